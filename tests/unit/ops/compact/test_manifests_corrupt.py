"""`icectl compact` on damaged copies of real Spark-written tables (issue 11, item 6).

A manifest that is missing, truncated or not Avro (destroyed magic: Spark fails with "Not an Avro
data file"), whether compact would rewrite it or carry it unchanged into the new snapshot, and a
rewritten manifest entry with values no writer records (negative sizes, counts beyond the record
count): compact exits 4 with one line naming the file (and the entry), writes nothing and commits
nothing, so the table folder is byte-identical; ``validate`` reports the same damage as findings.
The same on a v4 table (leaves instead of manifests).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.corrupt import copy_table, current_list, current_manifests, edit_entry, edit_manifest_list, find_entry
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.spec.manifest import ManifestContent, ManifestFile
from unit.validate.breaking import destroy_magic

runner = CliRunner()


def tree(d: Path) -> dict[str, bytes]:
    """Every file under the table folder with its bytes."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def compact_refuses(d: Path, *names: str) -> str:
    """compact exits 4 with one stderr line naming ``names``, and changes no byte of the table."""
    before = tree(d)
    out = runner.invoke(app, ["compact", str(d)])
    assert out.exit_code == 4, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.output, out.stderr
    assert all(n in lines[0] for n in names), (names, lines[0])
    assert tree(d) == before  # nothing written, nothing committed
    return lines[0]


def validate_errors(d: Path) -> set[tuple[str, str]]:
    out = runner.invoke(app, ["validate", str(d), "--json"])
    assert out.exit_code == 7, (out.stdout, out.stderr)
    return {(r["rule"], r["file"]) for r in json.loads(out.stdout)["rows"] if r["severity"] == "error"}


def _dry_run(d: Path) -> dict[str, Any]:
    out = runner.invoke(app, ["compact", str(d), "--dry-run", "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


def rewritten_and_kept(d: Path) -> tuple[list[str], list[str]]:
    """Manifests the pristine table's compaction replaces, and those it carries unchanged."""
    plan = _dry_run(d)
    replaced = [r["path"] for g in plan["groups"] if g["action"] == "rewrite" for r in g["replaced"]]
    kept = [m.manifest_path for m in current_manifests(d) if m.manifest_path not in replaced]
    assert replaced and kept
    return replaced, kept


def _set_length(d: Path, path: str) -> None:
    size = Path(path).stat().st_size
    edit_manifest_list(current_list(d), lambda rs: [r.__setitem__("manifest_length", size) for r in rs
                                                    if r["manifest_path"] == path])


def _magic(d: Path, path: str) -> set[str]:
    destroy_magic(path)
    return {"manifest.readable"}


def _truncate(d: Path, path: str) -> set[str]:
    Path(path).write_bytes(Path(path).read_bytes()[:-40])
    _set_length(d, path)  # the list agrees: only the file's own end tells
    return {"manifest.readable"}


def _truncate_unlisted(d: Path, path: str) -> set[str]:
    Path(path).write_bytes(Path(path).read_bytes()[:-40])
    return {"manifest.readable", "manifest-list.manifest-length"}


def _missing(d: Path, path: str) -> set[str]:
    Path(path).unlink()
    return {"manifest-list.manifest-exists"}


DAMAGE: dict[str, Callable[[Path, str], set[str]]] = {
    "destroyed-magic": _magic, "truncated": _truncate, "truncated-length-differs": _truncate_unlisted,
    "missing": _missing}


@pytest.mark.parametrize("which", ["rewritten", "kept"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_manifest_is_refused(damage: str, which: str, spark_tables: Any, tmp_path: Path) -> None:
    d = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    replaced, kept = rewritten_and_kept(d)
    victim = (replaced if which == "rewritten" else kept)[0]
    rules = DAMAGE[damage](d, victim)
    compact_refuses(d, victim)
    errors = validate_errors(d)
    # manifest.readable names the manifest; the list rules name the manifest list
    assert {r for r, f in errors if f in (victim, current_list(d))} >= rules, errors


def test_missing_manifest_list_is_refused(spark_tables: Any, tmp_path: Path) -> None:
    d = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    Path(current_list(d)).unlink()
    compact_refuses(d, current_list(d))


def _in_rewritten(d: Path, replaced: list[str]) -> Callable[[ManifestFile, dict[str, Any]], bool]:
    return lambda m, r: m.manifest_path in replaced and r["status"] != 2 and m.content == ManifestContent.DATA


def _counts(rec: dict[str, Any], key: str) -> dict[int, int]:
    return {kv["key"]: kv["value"] for kv in rec["data_file"][key] or []}


def _negative_size(rec: dict[str, Any]) -> None:
    rec["data_file"]["file_size_in_bytes"] = -1


def _negative_records(rec: dict[str, Any]) -> None:
    rec["data_file"]["record_count"] = -7


def _values_beyond_records(rec: dict[str, Any]) -> None:
    counts = _counts(rec, "value_counts")
    counts[1] = rec["data_file"]["record_count"] + 1  # 'id': one value per row at most
    rec["data_file"]["value_counts"] = [{"key": k, "value": v} for k, v in counts.items()]


def _nulls_beyond_values(rec: dict[str, Any]) -> None:
    values, nulls = _counts(rec, "value_counts"), _counts(rec, "null_value_counts")
    nulls[2] = values[2] + 1
    rec["data_file"]["null_value_counts"] = [{"key": k, "value": v} for k, v in nulls.items()]


IMPOSSIBLE = {"negative-size": _negative_size, "negative-record-count": _negative_records,
              "values-beyond-record-count": _values_beyond_records, "nulls-beyond-values": _nulls_beyond_values}


@pytest.mark.parametrize("kind", sorted(IMPOSSIBLE))
def test_impossible_entry_values_are_refused(kind: str, spark_tables: Any, tmp_path: Path) -> None:
    d = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    replaced, _kept = rewritten_and_kept(d)
    path, i = find_entry(d, _in_rewritten(d, replaced))
    edit_entry(d, path, i, IMPOSSIBLE[kind])
    compact_refuses(d, f"{path}#{i}")
    assert ("manifest.entry-values", path) in validate_errors(d)


# --------------------------------------------------------------------------- v4


def _v4_copy(spark_tables: Any, tmp_path: Path, before_upgrade: Callable[[Path], None] | None = None) -> Path:
    d = copy_table(spark_tables["v3_dv"].location, tmp_path / "t")
    if before_upgrade is not None:
        before_upgrade(d)
    out = runner.invoke(app, ["upgrade", str(d), "--to", "4", "--yes", "--json"])
    assert out.exit_code == 0, out.output
    # A root-level file of the current spec: its group (data files only: v4 compacts no delete
    # manifest) is rewritten, flushing it with the spec's carried-over data manifest.
    files = json.loads(runner.invoke(app, ["inspect", "files", str(d), "--content", "data", "--json"]).stdout)["rows"]
    spec = max(r["spec_id"] for r in files)
    source = next(r["file_path"] for r in files if r["spec_id"] == spec)
    extra = d / "data" / "v4-root-file.parquet"
    shutil.copyfile(source.removeprefix("file:"), extra)
    out = runner.invoke(app, ["add-files", str(d), str(extra), "--json"])
    assert out.exit_code == 0, out.output
    return d


def _a_kept_leaf(d: Path, replaced: set[str]) -> str:
    """A live leaf of main's root that the compaction would carry unchanged."""
    out = runner.invoke(app, ["inspect", "manifests", str(d), "--json"])
    assert out.exit_code == 0, out.output
    kept = [r["path"] for r in json.loads(out.stdout)["rows"] if r["path"] not in replaced]
    assert kept
    return str(kept[0])


@pytest.mark.parametrize("which", ["rewritten", "kept"])
@pytest.mark.parametrize("damage", ["destroyed-magic", "truncated", "missing"])
def test_v4_damaged_leaf_is_refused(damage: str, which: str, spark_tables: Any, tmp_path: Path) -> None:
    d = _v4_copy(spark_tables, tmp_path)
    plan = _dry_run(d)
    replaced = {r["path"] for g in plan["groups"] if g["action"] == "rewrite" for r in g["replaced"]}
    victim = sorted(replaced)[0] if which == "rewritten" else _a_kept_leaf(d, replaced)
    if damage == "destroyed-magic":
        destroy_magic(victim)
    elif damage == "truncated":
        Path(victim).write_bytes(Path(victim).read_bytes()[:-40])
    else:
        Path(victim).unlink()
    compact_refuses(d, victim)
    out = runner.invoke(app, ["validate", str(d), "--json"])
    assert out.exit_code == 7, out.output
    named = {r["rule"] for r in json.loads(out.stdout)["rows"]
             if r["severity"] == "error" and victim in (r["file"] + r["message"])}
    expected = {"destroyed-magic": "manifest.readable", "truncated": "manifest-list.manifest-length",
                "missing": "manifest-list.manifest-exists"}[damage]
    assert expected in named, named


def test_v4_impossible_leaf_entry_is_refused(spark_tables: Any, tmp_path: Path) -> None:
    where: list[tuple[str, int]] = []

    def negative_size(d: Path) -> None:  # before the upgrade: the leaf is the v3 manifest, its length fixed
        path, i = find_entry(d, lambda m, r: m.content == ManifestContent.DATA and m.partition_spec_id == 1
                             and r["status"] != 2)
        edit_entry(d, path, i, _negative_size)
        where.append((path, i))

    d = _v4_copy(spark_tables, tmp_path, negative_size)
    path, i = where[0]
    compact_refuses(d, f"{path}#{i}")
    assert ("manifest.entry-values", path) in validate_errors(d)
