"""Damaged v4 manifests (issue 29's bad input): a root with content type 1 or 5, colliding field ids,
a truncated or over-limit Mumbling manifest DV, a Parquet manifest without field ids. Every
command that reads the root says so in one line on stderr, exits 4 and writes nothing."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.codec.mumbling import encode_mumbling
from icectl.codec.v4_manifest import read_v4_manifest, write_v4_manifest
from icectl.errors import ExitCode
from icectl.spec.tracked_file import EntryStatus
from icectl.table import load_table
from icectl.table.layout.root import column_types, union_partition_type
from icectl.table.scan_v4 import partition_field_types


def _run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout, r.stderr


def _parquet(path: Path, start: int, day: int) -> str:
    ts = datetime.datetime(2024, 3, day, 1, tzinfo=datetime.timezone.utc)
    pq.write_table(pa.table({"id": pa.array(range(start, start + 3), pa.int64()),
                             "ts": pa.array([ts] * 3, pa.timestamp("us", tz="UTC"))}), path)
    return str(path)


@pytest.fixture(scope="module")
def v4_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A v4 table: two v1-v3 manifests from before the upgrade, a root-level data file after it."""
    d = tmp_path_factory.mktemp("v4") / "t"
    assert _run("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
                "--format-version", "3")[0] == 0
    (d / "data").mkdir(parents=True, exist_ok=True)
    for i in range(2):
        assert _run("add-files", str(d), _parquet(d / "data" / f"a{i}.parquet", i * 10, i + 1))[0] == 0
    assert _run("upgrade", str(d), "--to", "4", "--yes")[0] == 0
    assert _run("add-files", str(d), _parquet(d / "data" / "r.parquet", 100, 5))[0] == 0
    return d


def _files(d: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in d.rglob("*") if p.is_file()}


def _root(d: Path) -> Path:
    snap = load_table(str(d)).metadata.current_snapshot()
    assert snap is not None and snap.root_manifest
    return Path(snap.root_manifest)


def _rewrite_table(path: Path, change: Callable[[pa.Table], pa.Table]) -> None:
    table = pq.read_table(path)
    pq.write_table(change(table), path, store_schema=False)


def _set_column(table: pa.Table, name: str, values: list[int]) -> pa.Table:
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _no_field_ids(table: pa.Table) -> pa.Table:
    def strip(t: pa.DataType) -> pa.DataType:
        if pa.types.is_struct(t):
            return pa.struct([pa.field(f.name, strip(f.type), f.nullable) for f in t])
        if pa.types.is_list(t):
            return pa.list_(pa.field(t.value_field.name, strip(t.value_field.type), t.value_field.nullable))
        return t

    return table.cast(pa.schema([pa.field(f.name, strip(f.type), f.nullable) for f in table.schema]))


def _colliding(table: pa.Table) -> pa.Table:
    i = table.schema.get_field_index("file_format")
    f = table.schema.field(i).with_metadata({b"PARQUET:field_id": b"100"})  # location's id
    return table.cast(table.schema.set(i, f))


def _partition_as_text(table: pa.Table) -> pa.Table:
    """The partition struct's date field written as text (a value its type cannot hold)."""
    i = table.schema.get_field_index("partition")
    f = table.schema.field(i)
    child = f.type.field(0)
    text = pa.struct([pa.field(child.name, pa.string(), True, child.metadata)])
    values = [None if v is None else {child.name: "not a date"} for v in table.column(i).to_pylist()]
    return table.set_column(i, pa.field(f.name, text, f.nullable, f.metadata), pa.array(values, text))


def _mdv(dv: bytes) -> Callable[[Path], None]:
    def damage(d: Path) -> None:  # the first leaf entry gets this manifest DV
        md = load_table(str(d)).metadata
        path = _root(d)
        root = read_v4_manifest(path.read_bytes(), partition_types=partition_field_types(md),
                                column_types=column_types(md), root=True)
        rows = []
        done = False
        for e in root.entries:
            if e.is_manifest and not done and e.manifest_info is not None:
                e = dataclasses.replace(e, manifest_info=dataclasses.replace(e.manifest_info, dv=dv))
                done = True
            rows.append(e)
        path.write_bytes(write_v4_manifest(rows, root=True, partition_type=union_partition_type(md),
                                           column_types=column_types(md), schema_id=md.current_schema_id).data)

    return damage


TRUNCATED = encode_mumbling([1, 2, 300])[:-1]
OVER_LIMIT = bytes([1, 0, 0, 0]) + (8193).to_bytes(2, "little")  # 8,193 containers: over the 8,192 limit

DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "content type 1": (lambda d: _rewrite_table(_root(d), lambda t: _set_column(t, "content_type", [1] * len(t))),
                       "content_type 1"),
    "content type 5": (lambda d: _rewrite_table(_root(d), lambda t: _set_column(t, "content_type", [5] * len(t))),
                       "content_type 5"),
    "colliding field ids": (lambda d: _rewrite_table(_root(d), _colliding), "two fields with id 100"),
    "no field ids": (lambda d: _rewrite_table(_root(d), _no_field_ids), "has no Parquet field id"),
    "wrong value type": (lambda d: _rewrite_table(_root(d), _partition_as_text), "cannot decode"),
    "Avro root": (lambda d: _root(d).write_bytes(next((d / "metadata").glob("*-m0.avro")).read_bytes()),
                  "neither Parquet nor"),
    "truncated Mumbling": (_mdv(TRUNCATED), "Mumbling"),
    "over-limit Mumbling": (_mdv(OVER_LIMIT), "8193"),
}
COMMANDS = {
    "inspect files": ("inspect", "files"),
    "remove-files": ("remove-files",),
    "compact": ("compact",),
    "expire-snapshots": ("expire-snapshots", "--older-than", "0s", "--retain-last", "1"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_damaged_v4_manifest_is_one_line_exit_4_and_nothing_written(
        v4_table: Path, tmp_path: Path, damage: str, command: str) -> None:
    d = v4_table
    saved = _files(d)
    damaging, said = DAMAGES[damage]
    try:
        damaging(d)
        before = _files(d)
        args = [*COMMANDS[command], str(d)]
        if command == "remove-files":
            args.append(str(d / "data" / "r.parquet"))
        code, out, err = _run(*args)
        assert code == ExitCode.CORRUPT, (code, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and said in lines[0] and "Traceback" not in err, err
        assert _files(d) == before  # nothing written, nothing deleted
    finally:  # the module's table, as it was
        for p in set(_files(d)) - set(saved):
            Path(p).unlink()
        for p, data in saved.items():
            Path(p).write_bytes(data)


def test_the_undamaged_table_reads_and_the_damage_helpers_change_it(v4_table: Path) -> None:
    # The fixture is sound (so the failures above come from the damage), and each damage changes the root.
    code, _, err = _run("inspect", "files", str(v4_table))
    assert code == 0, err
    for damaging, _said in DAMAGES.values():
        before = _root(v4_table).read_bytes()
        damaging(v4_table)
        assert _root(v4_table).read_bytes() != before
        _root(v4_table).write_bytes(before)
    assert EntryStatus.MODIFIED.value == 4


def test_relative_locations_resolve_against_the_table_location(v4_table: Path, tmp_path: Path) -> None:
    """The spec's v4 path resolution: a relative location in a root is the table location + "/" +
    the path, for every reader (icectl's views, validate, the independent reader), never the
    working directory's file."""
    import json
    import os

    from support.v4_reader import live_data_files

    d = v4_table
    saved = _files(d)
    md = load_table(str(d)).metadata
    path = _root(d)
    try:
        root = read_v4_manifest(path.read_bytes(), partition_types=partition_field_types(md),
                                column_types=column_types(md), root=True)
        rows = [dataclasses.replace(e, location=e.location.removeprefix(md.location + "/"))
                if e.location.endswith("r.parquet") else e for e in root.entries]
        assert any(not e.location.startswith("/") for e in rows)
        path.write_bytes(write_v4_manifest(rows, root=True, partition_type=union_partition_type(md),
                                           column_types=column_types(md), schema_id=md.current_schema_id).data)
        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "r.parquet").write_bytes(b"a decoy in the working directory")
        cwd = os.getcwd()
        os.chdir(tmp_path)
        try:
            code, out, err = _run("inspect", "files", str(d), "--json")
            assert code == 0, err
            assert str(d / "data" / "r.parquet") in {r["file_path"] for r in json.loads(out)["rows"]}
            code, out, err = _run("validate", str(d), "--deep", "--json")
            assert json.loads(out)["errors"] == 0, out
        finally:
            os.chdir(cwd)
        assert str(d / "data" / "r.parquet") in live_data_files(load_table(str(d)).metadata_location)
        assert (tmp_path / "data" / "r.parquet").read_bytes() == b"a decoy in the working directory"
    finally:
        for p in set(_files(d)) - set(saved):
            Path(p).unlink()
        for p, data in saved.items():
            Path(p).write_bytes(data)
