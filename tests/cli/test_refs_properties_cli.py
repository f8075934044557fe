"""`icectl branch|tag ...` and `icectl properties ...` as a user runs them: exit codes, one-line
errors on stderr, --json one document, nothing written on a refusal."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console
from typer.testing import CliRunner
from unit.ops.snapshots.test_refs import table_dir  # noqa: F401  (a fixture)

from icectl.cli.app import app
from icectl.cli.output.formats import terminal_table
from icectl.ops.inspect.views import ref_rows
from icectl.table import load_table


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("args, code, words", [
    (("branch", "create", "{t}", "b1"), 6, "branch b1 exists already"),
    (("branch", "drop", "{t}", "main"), 6, "cannot drop main"),
    (("tag", "drop", "{t}", "b1"), 6, "'b1' is a branch, not a tag"),
    (("branch", "drop", "{t}", "t1"), 6, "'t1' is a tag, not a branch"),
    (("branch", "drop", "{t}", "nope"), 3, "has no branch 'nope'"),
    (("tag", "replace", "{t}", "nope"), 3, "has no tag 'nope' to replace"),
    (("branch", "create", "{t}", "b2", "--snapshot", "42"), 3, "snapshot 42 not found"),
    (("branch", "create", "{t}", "b2", "--max-ref-age", "7x"), 2, "--max-ref-age '7x' is not a duration"),
    (("branch", "create", "{t}", "b2", "--max-snapshot-age", "soon"), 2, "--max-snapshot-age 'soon' is not"),
    (("branch", "create", "{t}", "b2", "--retain-last", "0"), 2, "--retain-last must be greater than 0"),
    (("properties", "set", "{t}", "format-version=3"), 2, "use icectl upgrade TABLE --to N"),
    (("properties", "set", "{t}", "history.expire.min-snapshots-to-keep=0"), 2, "is not an integer from 1"),
    (("properties", "set", "{t}", "gc.enabled=no"), 2, "gc.enabled='no' is not true or false"),
    (("properties", "set", "{t}", "lonely"), 2, "'lonely' is not KEY=VALUE"),
    (("properties", "unset", "{t}", "uuid"), 2, "uuid is a reserved table property"),
])
def test_refusals_exit_codes_and_one_line(table_dir: Path, args: tuple[str, ...], code: int,  # noqa: F811
                                          words: str) -> None:
    t = str(table_dir)
    assert run("branch", "create", t, "b1")[0] == 0 and run("tag", "create", t, "t1")[0] == 0
    before = sorted(os.listdir(table_dir / "metadata"))
    rc, out, err = run(*(a.replace("{t}", t) for a in args))
    assert rc == code, err
    assert err.startswith("icectl: error: ") and words in err and len(err.strip().splitlines()) == 1
    assert out == "" and sorted(os.listdir(table_dir / "metadata")) == before


def test_tag_has_no_branch_retention_options(table_dir: Path) -> None:  # noqa: F811
    rc, _, err = run("tag", "create", str(table_dir), "t", "--retain-last", "2")
    assert rc == 2 and "No such option: --retain-last" in err


def test_json_and_if_exists_flags(table_dir: Path) -> None:  # noqa: F811
    t = str(table_dir)
    rc, out, _ = run("branch", "create", t, "b", "--max-ref-age", "30d", "--retain-last", "2", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["view"] == "ref_change" and doc["after"]["max_ref_age_ms"] == 30 * 86_400_000
    rc, out, _ = run("branch", "create", t, "b", "--if-not-exists", "--json")
    assert rc == 0 and json.loads(out)["changed"] is False
    rc, out, _ = run("tag", "drop", t, "nope", "--if-exists", "--json")
    assert rc == 0 and json.loads(out)["reason"] == "no tag nope"
    rc, out, _ = run("branch", "list", t, "--json")
    rows = json.loads(out)["rows"]
    assert [r["name"] for r in rows] == ["main", "b"] and rows[1]["max_ref_age"] == "30d"
    rc, out, err = run("properties", "unset", t, "missing", "--json")
    assert rc == 0 and json.loads(out)["not_set"] == ["missing"] and "warning: missing is not set" in err
    rc, out, _ = run("properties", "list", t, "--all", "--json")
    assert {"key": "gc.enabled", "value": "true", "source": "default"} in json.loads(out)["rows"]


def test_inspect_refs_shows_durations_on_a_terminal_and_ms_in_json(table_dir: Path) -> None:  # noqa: F811
    t = str(table_dir)
    run("tag", "create", t, "t", "--max-ref-age", "2d")
    _, out, _ = run("inspect", "refs", t)
    assert "172800000" in out and "(2d)" not in out  # piped: the raw value (issue 16)
    console = Console(width=120, file=io.StringIO(), color_system=None)
    with console.capture() as cap:
        console.print(terminal_table(ref_rows(load_table(t))))
    assert "2d" in cap.get() and "172800000" not in cap.get()  # a terminal: the duration people read
    _, out, _ = run("inspect", "refs", t, "--json")
    assert {r["name"]: r for r in json.loads(out)["rows"]}["t"]["max_reference_age_in_ms"] == 172_800_000


def test_through_a_sql_catalog(tmp_path: Path) -> None:
    """The commit goes through the table's catalog: a SQLite catalog's pointer moves, and the
    next command (by catalog address) sees the ref and the property."""
    cfg = tmp_path / "icectl.toml"
    cfg.write_text(f'default-catalog = "prod"\n[catalog.prod]\ntype = "sql"\nuri = "{tmp_path / "cat.db"}"\n'
                   f'warehouse = "{tmp_path / "wh"}"\n')

    def cli(*args: str) -> dict[str, object]:
        rc, out, err = run("--config", str(cfg), *args, "--json")
        assert rc == 0, err
        return json.loads(out)

    cli("namespace", "create", "db")
    cli("create", "prod.db.t", "--schema", "id long")
    f = tmp_path / "f.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), f)
    cli("add-files", "prod.db.t", str(f))
    first = cli("tag", "create", "prod.db.t", "v1", "--max-ref-age", "7d")["metadata_location"]
    second = cli("properties", "set", "prod.db.t", "gc.enabled=false")["metadata_location"]
    assert first != second
    assert [r["name"] for r in cli("tag", "list", "prod.db.t")["rows"]] == ["v1"]
    rows = {r["key"]: r for r in cli("properties", "list", "prod.db.t")["rows"]}
    assert rows["gc.enabled"]["value"] == "false"
    assert cli("tag", "drop", "prod.db.t", "v1")["changed"] is True
    assert cli("tag", "list", "prod.db.t")["rows"] == []


@pytest.mark.parametrize("damage, args", [
    (lambda md: md["refs"]["main"].update(type=7), ("branch", "list", "{t}")),
    (lambda md: md["refs"].update(b={"snapshot-id": "x", "type": "branch"}), ("tag", "create", "{t}", "v")),
    (lambda md: md.update(properties=["not", "a", "map"]), ("properties", "set", "{t}", "a=1")),
    (lambda md: md["refs"].update(gone={"snapshot-id": 1, "type": "tag"}), ("tag", "drop", "{t}", "gone")),
])
def test_damaged_metadata_is_one_line_and_nothing_written(table_dir: Path, damage: object,  # noqa: F811
                                                          args: tuple[str, ...]) -> None:
    meta = table_dir / "metadata"
    current = meta / f"v{(meta / 'version-hint.text').read_text().strip()}.metadata.json"
    md = json.loads(current.read_text())
    damage(md)  # type: ignore[operator]
    current.write_text(json.dumps(md))
    before = sorted(os.listdir(meta))
    rc, out, err = run(*(a.replace("{t}", str(table_dir)) for a in args))
    assert rc == 4, err  # corrupt input
    assert out == "" and err.startswith("icectl: error: ") and len(err.strip().splitlines()) == 1
    assert sorted(os.listdir(meta)) == before and json.loads(current.read_text()) == md
