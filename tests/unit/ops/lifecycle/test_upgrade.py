"""`icectl upgrade` and the v4 read path on tables icectl writes (no Spark: fast rule tests).

The v4 snapshots here are built with the codec directly (manifest DVs inline and in Puffin,
root-level data files, DELETED root entries), so the reader's answers are checked against what
the test put in, not against the reader itself.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.codec.mumbling import encode_mumbling
from icectl.codec.v4_manifest import read_v4_manifest as read_spec
from icectl.codec.v4_manifest import write_v4_manifest as write_spec
from icectl.errors import ExitCode
from icectl.ops.lifecycle import upgrade as upgrade_mod
from icectl.spec.manifest import ManifestEntryStatus
from icectl.spec.snapshots import Snapshot
from icectl.spec.tracked_file import ContentType, EntryStatus, TrackedFile, Tracking
from icectl.spec.updates import snapshot_change
from icectl.table import load_table
from icectl.table.commit import commit, new_snapshot_id
from icectl.table.layout.root import column_types, union_partition_type

EXISTING, ADDED, DELETED = ManifestEntryStatus.EXISTING, ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED


def icectl(*args: str, expect: int = 0, json_out: bool = True) -> dict[str, Any]:
    r = CliRunner().invoke(app, [*args, "--json"] if json_out else list(args))
    assert r.exit_code == expect, (r.stdout, r.stderr)
    return json.loads(r.stdout) if json_out and r.stdout.strip() else {}


def parquet(path: Path, ids: range, day: int) -> str:
    t = pa.table({"id": pa.array(list(ids), pa.int64()),
                  "ts": pa.array([datetime.datetime(2024, 3, day, 1, tzinfo=datetime.timezone.utc)] * len(ids),
                                 pa.timestamp("us", tz="UTC"))})
    pq.write_table(t, path)
    return str(path)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A v2 table with three appends of one file each (5 rows, one partition each)."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
           "--format-version", "2")
    for day in (1, 2, 3):
        icectl("add-files", str(d), parquet(tmp_path / f"f{day}.parquet", range(day * 10, day * 10 + 5), day))
    return d


def files(d: Path, *extra: str) -> dict[str, dict[str, Any]]:
    return {r["file_path"]: r for r in icectl("inspect", "files", str(d), *extra)["rows"]}


def metadata_files(d: Path) -> set[str]:
    return set(os.listdir(d / "metadata"))


def test_refuses_v4_without_terminal_or_yes(table: Path) -> None:
    before = metadata_files(table)
    r = CliRunner().invoke(app, ["upgrade", str(table), "--to", "4"])
    assert r.exit_code == ExitCode.REFUSED
    assert "cannot read" in r.stderr and "--yes" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert metadata_files(table) == before


def test_dry_run_writes_nothing(table: Path) -> None:
    before = metadata_files(table)
    plan = icectl("upgrade", str(table), "--to", "4", "--dry-run")
    assert plan["dry_run"] and plan["from_version"] == 2 and len(plan["branches"]) == 1
    b = plan["branches"][0]
    assert b["manifests"] == 3 and b["live_files"] == 3 and b["first_row_id"] == 0 and b["added_rows"] == 15
    assert plan["would_write"][0] == b["root_manifest"] and "/metadata/root-" in b["root_manifest"]
    assert metadata_files(table) == before


def test_upgrade_to_v4_then_everything_reads(table: Path) -> None:
    before = files(table)
    out = icectl("upgrade", str(table), "--to", "4", "--yes")
    assert out["committed"]
    md = json.loads((table / "metadata" / "v5.metadata.json").read_text())
    assert md["format-version"] == 4 and md["next-row-id"] == 15
    head = md["snapshots"][-1]
    assert head["summary"]["operation"] == "replace" and head["summary"]["total-data-files"] == "3"
    assert head["first-row-id"] == 0 and head["added-rows"] == 15 and head["sequence-number"] == 4
    after = files(table)
    assert set(after) == set(before)
    v3_columns = {"first_row_id", "content_offset", "content_size_in_bytes"}
    for path, row in before.items():  # v3's columns; v2 -> v4 passes through v3: row ids assigned
        assert set(after[path]) == set(row) | v3_columns
        assert {k: v for k, v in after[path].items() if k not in v3_columns} == row
    assert sorted(r["first_row_id"] for r in after.values()) == [0, 5, 10]
    manifests = icectl("inspect", "manifests", str(table))["rows"]
    assert len(manifests) == 3 and all(m["path"].endswith("-m0.avro") for m in manifests)
    assert head["root-manifest"].endswith(".parquet")
    root = read_spec((Path(head["root-manifest"])).read_bytes(), partition_types={}, column_types={}, root=True)
    assert root.metadata == {"schema-id": "0", "format-version": "4"}  # the spec's two keys, nothing else
    assert {e.content_type for e in root.entries} == {ContentType.DATA_MANIFEST}
    # O(1): each row references a v1-v3 manifest (format_version 0) with the list's counts copied.
    assert all(e.manifest_info and e.manifest_info.format_version == 0 and e.manifest_info.added_rows_count == 5
               and e.content_stats is None and e.file_format == "avro" for e in root.entries)
    icectl("upgrade", str(table), "--to", "4", "--yes")  # already v4: nothing to do
    assert json.loads((table / "metadata" / "version-hint.text").read_text()) == 5
    icectl("upgrade", str(table), "--to", "3", expect=ExitCode.USAGE)


def test_a_difference_aborts_with_nothing_written(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = metadata_files(table)
    real = upgrade_mod.manifest_row

    def drop_a_row(m: Any, *a: Any, **kw: Any) -> Any:  # a buggy root: one leaf's sequence number is off by one
        e = real(m, *a, **kw)
        if m.manifest_path.endswith(sorted(p for p in before if p.endswith("-m0.avro"))[0]):
            t = e.tracking
            e = e.with_tracking(sequence_number=t.sequence_number + 1, file_sequence_number=t.file_sequence_number + 1)
        return e

    monkeypatch.setattr(upgrade_mod, "manifest_row", drop_a_row)
    r = CliRunner().invoke(app, ["upgrade", str(table), "--to", "4", "--yes"])
    assert r.exit_code == ExitCode.REFUSED and "differs from head" in r.stderr
    assert metadata_files(table) == before


def _commit_root(d: Path, entries: list[TrackedFile], snapshot_id: int) -> None:
    t = load_table(str(d))
    md = t.metadata
    head = md.current_snapshot()
    assert head is not None
    seq = md.last_sequence_number + 1
    path = str(d / "metadata" / f"root-{snapshot_id}-test.parquet")
    data = write_spec(entries, root=True, partition_type=union_partition_type(md), column_types=column_types(md),
                      schema_id=md.current_schema_id).data
    Path(path).write_bytes(data)
    snap = Snapshot(snapshot_id=snapshot_id, timestamp_ms=head.timestamp_ms + 1, parent_snapshot_id=head.snapshot_id,
                    sequence_number=seq, root_manifest=path, summary={"operation": "delete"},
                    schema_id=md.current_schema_id, first_row_id=md.next_row_id, added_rows=5)
    commit(t, lambda base: snapshot_change(base, snap))


def test_reader_applies_manifest_dvs_and_root_level_files(table: Path, tmp_path: Path) -> None:
    icectl("upgrade", str(table), "--to", "4", "--yes")
    t = load_table(str(table))
    head = t.metadata.current_snapshot()
    assert head is not None and head.root_manifest
    root = read_spec(Path(head.root_manifest).read_bytes(), partition_types={}, column_types={}, root=True)
    leaves = [e for e in root.entries if e.content_type == ContentType.DATA_MANIFEST]
    by_file = files(table)
    sid = new_snapshot_id(t.metadata)
    seq = t.metadata.last_sequence_number + 1

    def mdv(e: TrackedFile) -> TrackedFile:  # the leaf loses its only row (ordinal 0) in this snapshot
        assert e.manifest_info is not None
        return dataclasses.replace(
            e.with_tracking(status=EntryStatus.MODIFIED, modified_snapshot_id=sid,
                            deleted_positions=encode_mumbling([0])),
            manifest_info=dataclasses.replace(e.manifest_info, dv=encode_mumbling([0])))

    new_file = parquet(tmp_path / "f9.parquet", range(90, 95), 9)
    added = TrackedFile(Tracking(EntryStatus.ADDED, sid, seq, seq, first_row_id=15), ContentType.DATA, new_file,
                        "parquet", 5, os.path.getsize(new_file), 0, {1000: 19791})
    gone = TrackedFile(Tracking(EntryStatus.DELETED, 1, 1, 1, first_row_id=100), ContentType.DATA,
                       "/nowhere/old.parquet", "parquet", 7, 10, 0, {1000: 19790})
    _commit_root(table, [mdv(leaves[0]), mdv(leaves[1]), *leaves[2:], added, gone], sid)
    live = files(table)
    removed = {p for p, r in by_file.items() if r["first_row_id"] in (0, 5)}  # the first two leaves' files
    kept = set(by_file) - removed
    assert len(removed) == 2 and set(live) == kept | {new_file}
    assert live[new_file]["partition"] == {"ts_day": "2024-03-09"} and live[new_file]["first_row_id"] == 15
    entries = icectl("inspect", "entries", str(table))["rows"]
    assert {(r["status"], r["data_file"]["file_path"]) for r in entries if r["status"] != EXISTING} >= {
        (int(ADDED), new_file), (int(DELETED), "/nowhere/old.parquet")}
    tree = icectl("inspect", "tree", str(table))
    assert tree["by_type_and_status"] == {"DATA/ADDED": 1, "DATA/DELETED": 1, "DATA_MANIFEST/EXISTING": 1,
                                          "DATA_MANIFEST/MODIFIED": 2}
    dvs = {r["location"]: r["dv_cardinality"] for r in tree["rows"] if r["content_type"] == "DATA_MANIFEST"}
    assert sorted(dvs.values()) == [0, 1, 1]
    parts = icectl("inspect", "partitions", str(table))["rows"]
    assert sum(p["file_count"] for p in parts) == 2
    # The snapshot from before the upgrade still reads through its manifest list.
    pre = t.metadata.snapshot_by_id(head.parent_snapshot_id or 0)
    assert pre is not None and set(files(table, "--snapshot", str(pre.snapshot_id))) == set(by_file)


def test_upgrade_to_2_and_3_are_metadata_only(tmp_path: Path) -> None:
    d = tmp_path / "v1"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--format-version", "1")
    icectl("add-files", str(d), parquet(tmp_path / "a.parquet", range(3), 1))
    before = files(d)
    out = icectl("upgrade", str(d), "--to", "2")
    assert out["committed"] and out["branches"] == []
    out = icectl("upgrade", str(d), "--to", "3", "--dry-run")
    assert out["would_write"] == ["a new table metadata file (the next version)"]
    icectl("upgrade", str(d), "--to", "3")
    md = load_table(str(d)).metadata
    assert md.format_version == 3 and md.next_row_id == 0 and len(md.snapshots) == 1
    assert {p: {k: v for k, v in r.items() if k not in ("first_row_id", "referenced_data_file", "content_offset",
                                                         "content_size_in_bytes")}
            for p, r in files(d).items()} == before
    icectl("upgrade", str(d), "--to", "5", expect=ExitCode.USAGE)


def test_terminal_asks_before_v4(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from icectl.cli.commands import upgrade as upgrade_cmd

    monkeypatch.setattr(upgrade_cmd, "sys", SimpleNamespace(stdin=SimpleNamespace(isatty=lambda: True)))
    before = metadata_files(table)
    r = CliRunner().invoke(app, ["upgrade", str(table), "--to", "4"], input="n\n")
    assert r.exit_code == ExitCode.REFUSED and "cannot read" in r.stderr and "not confirmed" in r.stderr
    assert metadata_files(table) == before
    r = CliRunner().invoke(app, ["upgrade", str(table), "--to", "4", "--json"], input="y\n")
    assert r.exit_code == 0, r.stderr
    # The question goes to stderr; CliRunner echoes the typed answer into stdout (a terminal would not).
    assert "Upgrade" not in r.stdout and json.loads(r.stdout.removeprefix(" y\n"))["committed"] is True
    assert load_table(str(table)).metadata.format_version == 4
