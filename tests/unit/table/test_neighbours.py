"""icectl/table/neighbours.py: which tables share files with a table, and what happens when that
cannot be told. Small tables of one-file appends (no Spark); the Spark cases are in
tests/interop/test_shared_tables_vs_spark.py, the property in tests/property/test_shared_tables_property.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from support.appends import build_appends
from support.reach import files_under, table_reach
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.config import load_config
from icectl.errors import RefusedError
from icectl.table import load_table
from icectl.table.neighbours import find_neighbours, reach_of

DAY_MS = 86_400_000


def run(config: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, ["--config", str(config), *args], env={"ICECTL_WAREHOUSE": "", "ICECTL_CONFIG": ""})
    return r.exit_code, r.stdout, r.stderr


def setup(tmp_path: Path, extra: str = "") -> tuple[Path, Path]:
    wh = tmp_path / "wh"
    build_appends(wh / "db" / "t", 3, step_ms=DAY_MS)
    config = tmp_path / "icectl.toml"
    config.write_text(f'[catalog.local]\ntype = "hadoop"\nwarehouse = "{wh}"\n'
                      f'[catalog.sq]\ntype = "sql"\nuri = "{tmp_path / "sq.db"}"\nwarehouse = "{tmp_path / "sqwh"}"\n'
                      + extra)
    return config, wh / "db" / "t"


def current(d: Path) -> str:
    meta = d / "metadata"
    return str(meta / f"v{int((meta / 'version-hint.text').read_text())}.metadata.json")


def test_twins_nested_and_containing_tables_are_found_and_strangers_are_not(tmp_path: Path) -> None:
    config, t = setup(tmp_path)
    build_appends(tmp_path / "wh" / "db" / "stranger", 1)
    build_appends(t / "nested", 1)
    assert run(config, "register", "sq.db.twin", current(t))[0] == 0
    cfg = load_config(str(config))
    found = find_neighbours(load_table("local.db.t", cfg), config=cfg)
    assert sorted((n.name, n.why) for n in found.tables) == [("sq.db.twin", "the same table-uuid")]
    # A nested folder table shows up when a file to delete lies in it.
    inside = str(t / "nested" / "data" / "x.parquet")
    assert found.shared([inside]) == {inside: str(t / "nested")}
    assert found.shared([str(t / "data" / "y.parquet")]) == {}
    # Seen from the twin: the folder table at its location (the Hadoop entry, one neighbour).
    twin = find_neighbours(load_table("sq.db.twin", cfg), config=cfg)
    assert [n.name for n in twin.tables] == ["local.db.t"]
    # Seen from the nested table: the table containing it.
    nested = find_neighbours(load_table(str(t / "nested"), cfg), config=cfg)
    assert "local.db.t" in [n.name for n in nested.tables]


def test_reach_skips_a_missing_manifest_and_reads_relative_paths_both_ways(tmp_path: Path) -> None:
    d = tmp_path / "t"
    build_appends(d, 2, relative=[1])
    table = load_table(str(d))
    got = reach_of(table.metadata, table.metadata_location, table.io)
    expected = table_reach(d)
    assert expected <= got
    manifest = next(p for p in got if p.endswith("-m0.avro"))
    os.remove(manifest)
    notes: list[str] = []
    assert reach_of(table.metadata, table.metadata_location, table.io, notes) < got and notes


@pytest.mark.parametrize("command", ["expire", "orphans", "drop"])
def test_a_catalog_that_cannot_be_listed_refuses_with_nothing_changed(tmp_path: Path, command: str) -> None:
    config, t = setup(tmp_path, '[catalog.down]\ntype = "rest"\nuri = "http://127.0.0.1:9"\n')
    (t / "data" / "orphan.parquet").write_bytes(b"x")
    old = time.time() - 10 * 86_400
    for p in t.rglob("*"):
        os.utime(p, (old, old))
    before = {p: p.stat().st_mtime_ns for p in map(Path, files_under(t))}
    args = {"expire": ["expire-snapshots", "db.t", "--older-than", str(int(time.time() * 1000)), "--retain-last", "1"],
            "orphans": ["remove-orphan-files", "db.t"], "drop": ["drop", "db.t", "--purge"]}[command]
    code, out, err = run(config, *args)
    assert code == 6 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "catalog 'down' cannot be listed" in err and "nothing deleted" in err
    assert {p: p.stat().st_mtime_ns for p in map(Path, files_under(t))} == before


def test_register_of_metadata_another_entry_uses_warns_and_writes_nothing_more(tmp_path: Path) -> None:
    config, t = setup(tmp_path)
    md = current(t)
    code, out, err = run(config, "register", "sq.db.a", md, "--json")
    assert code == 0 and str(t) in json.loads(out)["warning"]  # the folder table's current version
    on_disk = files_under(tmp_path / "wh")
    code, out, err = run(config, "register", "sq.db.b", md, "--json")
    doc: dict[str, Any] = json.loads(out)
    assert code == 0 and "sq.db.a" in doc["warning"] and doc["metadata_location"] == md
    assert err.count("\n") == 1 and err.startswith("icectl: warning:")
    assert files_under(tmp_path / "wh") == on_disk  # no new metadata file, nothing else written
    assert not (tmp_path / "sqwh").exists()


def test_an_unreadable_table_around_the_location_refuses(tmp_path: Path) -> None:
    """The table containing this one cannot be read: what it reaches cannot be told, so nothing goes."""
    config, t = setup(tmp_path)
    build_appends(t / "nested", 2, step_ms=DAY_MS)
    Path(current(t)).write_text("{")
    cfg = load_config(str(config))
    nested = load_table(str(t / "nested"), cfg)
    with pytest.raises(RefusedError, match="nothing deleted"):
        find_neighbours(nested, config=cfg)
    before = files_under(t)
    code, _out, err = run(config, "expire-snapshots", str(t / "nested"), "--older-than", str(int(time.time() * 1000)),
                          "--retain-last", "1")
    assert code == 6 and len(err.strip().splitlines()) == 1 and files_under(t) == before


def test_the_folders_above_a_location_stop_at_the_root_or_bucket() -> None:
    from icectl.table.neighbours import _folders_up

    assert list(_folders_up("s3://bucket/ns/t")) == ["s3://bucket/ns/t", "s3://bucket/ns", "s3://bucket"]
    assert list(_folders_up("/a/b/")) == ["/a/b", "/a"]
