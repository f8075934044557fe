"""Issue 27 items 3 and 4 on clones of Spark-written fixtures: a ``write.data.path`` (or kin) that
would widen the delete fence beyond the table, and relative paths in v1-v3 manifests.

Item 3: ``properties set`` and ``create`` refuse a file system root, a parent of the table's
location and a folder holding another table (exit 2); the same values written into the metadata
by another tool are ignored by the fence, so ``drop --purge``, ``expire-snapshots`` and
``remove-orphan-files`` keep a file outside the table that add-files registered, and say why.
Spark judges the rows where the table survives.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.corrupt import current_list, current_manifests, edit_manifest, edit_manifest_list
from support.fixtures import FixtureTable
from support.spark import latest_metadata_path
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.engine import LocalEngine, using
from icectl.errors import CorruptInputError, ExitCode
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.orphans import remove_orphan_files
from icectl.spec.manifest import ManifestContent
from icectl.table import load_table
from interop.test_delete_fence_vs_spark import digest, icectl, listing, live_files


def _set_by_hand(t: FixtureTable, **props: str) -> None:
    """Properties written into the current metadata file as another tool could (no icectl check)."""
    current = latest_metadata_path(t.location)
    doc = json.loads(current.read_text())
    doc["properties"] = {**doc.get("properties", {}), **props}
    current.write_text(json.dumps(doc))
    (current.parent / f".{current.name}.crc").unlink(missing_ok=True)  # Hadoop would reject the stale checksum


def _outside_file(spark: Any, t: FixtureTable, folder: Path) -> Path:
    """A copy of one of the table's data files in ``folder``, registered by add-files."""
    folder.mkdir(parents=True, exist_ok=True)
    ext = folder / "ext.parquet"
    shutil.copy(sorted(live_files(spark, t))[0], ext)
    code, _, err = icectl("add-files", str(t.location), str(ext))
    assert code == 0, err
    return ext


def _other_table(folder: Path) -> Path:
    """A folder holding another table's metadata (enough for icectl to see a table there)."""
    meta = folder / "other" / "metadata"
    meta.mkdir(parents=True)
    (meta / "v1.metadata.json").write_text("{}")
    return folder


def _widening(kind: str, t: FixtureTable, outside: Path) -> str:
    if kind == "root":
        return "/"
    if kind == "parent":  # the common parent of the table and the outside folder
        return os.path.commonpath([str(t.location), str(outside)])
    return str(_other_table(outside))


@pytest.mark.parametrize("kind", ["root", "parent", "other-table"])
def test_properties_set_refuses_a_fence_widening_folder(kind: str, spark: Any,
                                                        spark_clone: Callable[..., FixtureTable],
                                                        tmp_path: Path) -> None:
    t = spark_clone("v1_unpart")
    outside = tmp_path / "outside"
    outside.mkdir()
    value = _widening(kind, t, outside)
    before = sorted(os.listdir(t.location / "metadata"))
    for key in ("write.data.path", "write.metadata.path", "write.object-storage.path", "write.folder-storage.path"):
        code, out, err = icectl("properties", "set", str(t.location), f"{key}={value}")
        assert code == ExitCode.USAGE, (key, out, err)
        assert len(err.strip().splitlines()) == 1 and "delete fence" in err, err
    assert sorted(os.listdir(t.location / "metadata")) == before  # nothing written
    # A folder of its own elsewhere (Java's LocationProviders write there) is still accepted.
    code, out, err = icectl("properties", "set", str(t.location), f"write.data.path={tmp_path / 'own'}")
    assert code == 0, err
    # create refuses the same values.
    code, out, err = icectl("create", str(tmp_path / "new"), "--schema", "id bigint",
                            "--property", f"write.data.path={value}")
    assert code == ExitCode.USAGE, (out, err)
    assert "delete fence" in err and not (tmp_path / "new").exists()


@pytest.mark.parametrize("kind", ["root", "parent", "other-table"])
def test_a_widening_folder_in_metadata_never_lets_a_purge_delete_outside(kind: str, spark: Any,
                                                                          spark_clone: Callable[..., FixtureTable],
                                                                          tmp_path: Path) -> None:
    t = spark_clone("v1_unpart")
    outside = tmp_path / "outside"
    ext = _outside_file(spark, t, outside)
    value = _widening(kind, t, outside)
    _set_by_hand(t, **{"write.data.path": value})
    for args in (("remove-orphan-files", str(t.location), "--older-than", "0s", "--allow-recent", "--json"),
                 ("drop", str(t.location), "--purge", "--json")):
        code, out, err = icectl(*args)
        assert code == 0, (args, out, err)
        assert ext.exists(), args
    res = json.loads(out)
    assert res["dropped"] is True and str(ext) in res["kept_external_files"]
    assert "write.data.path" in err and "ignored by the delete fence" in err
    assert not (t.location / "metadata").exists()  # the table itself went


@pytest.mark.parametrize("kind", ["root", "parent", "other-table"])
def test_a_widening_folder_in_metadata_never_lets_expire_delete_outside(kind: str, spark: Any,
                                                                         spark_clone: Callable[..., FixtureTable],
                                                                         tmp_path: Path) -> None:
    t = spark_clone("v1_unpart")
    outside = tmp_path / "outside"
    ext = _outside_file(spark, t, outside)
    spark.sql(f"DELETE FROM {t.name} WHERE id < 35")  # removes the outside copy from the current snapshot
    _set_by_hand(t, **{"write.data.path": _widening(kind, t, outside)})
    rows = digest(spark, t)
    code, out, err = icectl("expire-snapshots", str(t.location), "--older-than", "0s", "--retain-last", "1", "--json")
    assert code == 0, (out, err)
    res = json.loads(out)
    assert res["expired_snapshot_count"] >= 3 and res["kept_external_files"] == [str(ext)]
    assert ext.exists() and "ignored by the delete fence" in err
    assert digest(spark, t) == rows


# --------------------------------------------------------------------------- item 4: relative paths


def _relative(path: str, t: FixtureTable) -> str:
    """``file:/.../t/data/x.parquet`` -> ``data/x.parquet`` (invalid before v4)."""
    for spelling in (f"file:{t.location}", str(t.location)):
        if path.startswith(spelling + "/"):
            return path[len(spelling) + 1:]
    raise AssertionError(f"{path} is not under {t.location}")


def _relativize(kind: str, t: FixtureTable) -> tuple[str, str]:
    """Rewrite a copy of a Spark manifest (or list) so it names its files (manifests) by relative
    paths; returns (the file that names them, one relative path)."""
    if kind == "data-file":
        m = next(m for m in current_manifests(t.location) if m.content == ManifestContent.DATA)
        names: list[str] = []

        def rel_files(_schema: dict[str, Any], _meta: dict[str, bytes], records: list[dict[str, Any]]) -> None:
            for r in records:
                r["data_file"]["file_path"] = _relative(r["data_file"]["file_path"], t)
                names.append(r["data_file"]["file_path"])
        edit_manifest(t.location, m.manifest_path, rel_files)
        return m.manifest_path, names[0]
    listed: list[str] = []

    def rel_manifests(records: list[dict[str, Any]]) -> None:
        for r in records:
            r["manifest_path"] = _relative(r["manifest_path"], t)
            listed.append(r["manifest_path"])
    return edit_manifest_list(current_list(t.location), rel_manifests), listed[0]


COMMANDS = {
    "remove-orphan-files": ("remove-orphan-files", "{T}", "--older-than", "0s", "--allow-recent"),
    "expire-snapshots": ("expire-snapshots", "{T}", "--older-than", "0s", "--retain-last", "1"),
    "drop --purge": ("drop", "{T}", "--purge"),
}


@pytest.mark.parametrize("kind", ["data-file", "manifest"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_relative_path_before_v4_is_refused_not_resolved_against_the_working_directory(
        command: str, kind: str, spark: Any, spark_clone: Callable[..., FixtureTable], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27 item 4: run from another folder, orphans took the live files for orphans and deleted
    them. Now every command that deletes by reachability stops with exit 4 naming the file and the
    path; the table is unchanged and Spark (which resolves nothing either) is not asked to read it."""
    t = spark_clone("v2_part")
    live = sorted(live_files(spark, t))
    rows = digest(spark, t)
    named_by, rel = _relativize(kind, t)
    before = listing(t.location)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = icectl(*(a.format(T=t.location) for a in COMMANDS[command]))
    assert code == ExitCode.CORRUPT, (out, err)
    assert len(err.strip().splitlines()) == 1 and named_by in err and repr(rel) in err, err
    assert listing(t.location) == before and all(Path(p).exists() for p in live)
    assert os.listdir(elsewhere) == []
    monkeypatch.chdir(tmp_path)
    if kind == "data-file":  # the manifest list still reads: Spark judges the rows are all there
        _relativize_back(t, named_by)
        assert digest(spark, t) == rows


def _relativize_back(t: FixtureTable, manifest: str) -> None:
    def absolute(_schema: dict[str, Any], _meta: dict[str, bytes], records: list[dict[str, Any]]) -> None:
        for r in records:
            r["data_file"]["file_path"] = f"file:{t.location}/{r['data_file']['file_path']}"
    edit_manifest(t.location, manifest, absolute)
    for crc in (t.location / "metadata").glob(".*.avro.crc"):  # Hadoop would reject the stale checksums
        crc.unlink()


@pytest.mark.parametrize("kind", ["data-file", "manifest"])
def test_both_engines_refuse_a_relative_path_alike(kind: str, spark_engine: Any,
                                                   spark_clone: Callable[..., FixtureTable], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The check sits where reachable files are gathered: the Spark engine's executors (manifest lists
    and manifests decoded there) refuse with the local engine's error, word for word."""
    t = spark_clone("v2_part")
    _relativize(kind, t)
    before = listing(t.location)
    monkeypatch.chdir(tmp_path)
    now = int(time.time() * 1000)
    errors: dict[str, list[str]] = {}
    for name, engine in (("local", LocalEngine()), ("spark", spark_engine)):
        mark = engine.mark()
        with using(engine):
            got = []
            for run in (lambda: expire_snapshots(load_table(str(t.location)),
                                                 ExpirePolicy(older_than_ms=now, retain_last=1), now_ms=now),
                        lambda: remove_orphan_files(load_table(str(t.location)), older_than_ms=now, now_ms=now,
                                                    allow_recent=True)):
                with pytest.raises(CorruptInputError) as e:
                    run()
                got.append(e.value.one_line())
            errors[name] = got
        assert name == "local" or (engine.report_since(mark).spark_jobs or 0) > 0  # no fallback to local
    assert errors["spark"] == errors["local"]
    assert all("relative path" in e for e in errors["local"])
    assert listing(t.location) == before


def test_properties_set_refuses_a_folder_holding_another_catalog_entry(
        spark: Any, spark_clone: Callable[..., FixtureTable], tmp_path: Path) -> None:
    """A SQLite catalog entry whose location lies in the folder but whose metadata file does not (the
    folder search cannot see it): the configured catalogs are asked, and the set is refused."""
    t = spark_clone("v1_unpart")
    other = spark_clone("v2_part")
    outside = tmp_path / "outside"
    (outside / "sq_table").mkdir(parents=True)
    doc = json.loads(latest_metadata_path(other.location).read_text())
    doc["location"] = str(outside / "sq_table")
    elsewhere = tmp_path / "meta" / "00001-x.metadata.json"
    elsewhere.parent.mkdir()
    elsewhere.write_text(json.dumps(doc))
    config = tmp_path / "icectl.toml"
    config.write_text(f'default-catalog = "s"\n[catalog.s]\ntype = "sql"\nuri = "{tmp_path / "cat.db"}"\n'
                      f'warehouse = "{tmp_path / "wh"}"\n')
    env = {"ICECTL_CONFIG": str(config)}
    r = CliRunner().invoke(app, ["register", "s.db.moved", str(elsewhere)], env=env)
    assert r.exit_code == 0, r.stderr
    before = sorted(os.listdir(t.location / "metadata"))
    r = CliRunner().invoke(app, ["properties", "set", str(t.location), f"write.data.path={outside}"], env=env)
    assert r.exit_code == ExitCode.USAGE, (r.stdout, r.stderr)
    assert "catalog entry s.db.moved" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert sorted(os.listdir(t.location / "metadata")) == before
    r = CliRunner().invoke(app, ["properties", "set", str(t.location), f"write.data.path={tmp_path / 'own'}"], env=env)
    assert r.exit_code == 0, r.stderr
