"""table/commit: a build returns a TableChange; every attempt checks its requirements against the
base it refreshed, a lost swap or a failed requirement makes the loop refresh and build again."""

from __future__ import annotations

from pathlib import Path

import pytest

from icectl.catalog.sql import SqlCatalog, SqlOperations
from icectl.errors import CommitConflictError, RefusedError
from icectl.ops.create.metadata import new_table_metadata
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import NestedField, Schema, parse_primitive
from icectl.spec.snapshots import Snapshot
from icectl.spec.updates import (
    AssertRefSnapshotId,
    SetProperties,
    TableChange,
    snapshot_change,
)
from icectl.storage import FileIO
from icectl.table import Table, load_table
from icectl.table.commit import commit, create_table

SCHEMA = Schema((NestedField(1, "id", parse_primitive("long"), True),))
FAST = {"commit.retry.num-retries": "3", "commit.retry.min-wait-ms": "0", "commit.retry.max-wait-ms": "0"}


def new_table(tmp_path: Path) -> Path:
    table_dir = tmp_path / "t"
    md = new_table_metadata(schema=SCHEMA, location=str(table_dir), partition_spec=None, sort_order=None,
                            properties=dict(FAST), format_version=2)
    create_table(str(table_dir), None, md)
    return table_dir


def append(base: TableMetadata, sid: int) -> TableChange:
    """A snapshot on main's head (no files: only the metadata matters here)."""
    head = base.snapshot_for_ref("main")
    snapshot = Snapshot(sid, 1_000 + sid, head.snapshot_id if head else None, base.last_sequence_number + 1,
                        f"/nowhere/snap-{sid}.avro", summary={"operation": "append"}, schema_id=0)
    return snapshot_change(base, snapshot)


def no_sleep(_: float) -> None:
    pass


def test_a_moved_branch_fails_assert_ref_snapshot_id_and_build_runs_again(tmp_path: Path) -> None:
    table_dir = new_table(tmp_path)
    ours = load_table(str(table_dir))
    planned_head = None  # what a plan made before the commit saw: main has no snapshot yet
    commit(load_table(str(table_dir)), lambda b: append(b, 1))  # meanwhile another writer moves main
    bases: list[TableMetadata] = []

    def build(base: TableMetadata) -> TableChange:
        bases.append(base)
        head = planned_head if len(bases) == 1 else base.refs["main"].snapshot_id  # 1st: the stale plan
        return TableChange((AssertRefSnapshotId("main", head),), (SetProperties({"ours": "1"}),))

    result = commit(ours, build, sleep=no_sleep)
    assert result.attempts == 2 and len(bases) == 2
    assert "requirement assert-ref-snapshot-id failed: branch main was created concurrently" in result.conflicts[0]
    assert result.metadata.properties["ours"] == "1" and result.metadata.current_snapshot_id == 1


def test_a_swap_lost_to_a_concurrent_commit_rebuilds_on_the_fresh_base(tmp_path: Path) -> None:
    table_dir = new_table(tmp_path)
    commit(load_table(str(table_dir)), lambda b: append(b, 1))
    ours = load_table(str(table_dir))
    calls: list[int | None] = []

    def build(base: TableMetadata) -> TableChange:
        calls.append(base.current_snapshot_id)
        if len(calls) == 1:  # another writer commits between our refresh and our swap
            commit(load_table(str(table_dir)), lambda b: append(b, 2))
        return append(base, 3)

    result = commit(ours, build, sleep=no_sleep)
    assert calls == [1, 2] and result.attempts == 2
    assert [s.snapshot_id for s in result.metadata.snapshots] == [1, 2, 3]
    assert result.metadata.snapshot_for_ref("main").parent_snapshot_id == 2  # type: ignore[union-attr]
    assert ours.metadata == result.metadata


def test_a_requirement_that_never_holds_gives_up_as_a_conflict(tmp_path: Path) -> None:
    table = load_table(str(new_table(tmp_path)))
    calls = []

    def build(base: TableMetadata) -> TableChange:
        calls.append(1)
        return TableChange((AssertRefSnapshotId("main", 42),), (SetProperties({"x": "1"}),))

    with pytest.raises(CommitConflictError, match="assert-ref-snapshot-id failed") as e:
        commit(table, build, sleep=no_sleep)
    assert e.value.exit_code == 5 and len(calls) == 4  # num-retries 3: four attempts, each built anew


def test_a_change_without_effect_writes_nothing(tmp_path: Path) -> None:
    table_dir = new_table(tmp_path)
    table = load_table(str(table_dir))
    before = sorted(p.name for p in (table_dir / "metadata").iterdir())
    result = commit(table, lambda b: TableChange((), (SetProperties(dict(FAST)),)))
    assert not result.committed and result.metadata_location == table.metadata_location
    assert sorted(p.name for p in (table_dir / "metadata").iterdir()) == before


def test_a_replaced_table_is_refused_not_retried(tmp_path: Path) -> None:
    table_dir = new_table(tmp_path)
    table = load_table(str(table_dir))
    stale = Table(table.address, table.metadata.replace(table_uuid="another-table"), table.io)
    with pytest.raises(RefusedError, match="was replaced meanwhile"):
        commit(stale, lambda b: TableChange((), (SetProperties({"x": "1"}),)))


def test_sql_catalog_commits_a_change(tmp_path: Path) -> None:
    io = FileIO()
    catalog = SqlCatalog("prod", str(tmp_path / "catalog.db"), str(tmp_path / "wh"), io)
    catalog.create_namespace(("db",))
    md = new_table_metadata(schema=SCHEMA, location=str(tmp_path / "wh" / "db" / "t"), partition_spec=None,
                            sort_order=None, properties=dict(FAST), format_version=2)
    created = create_table(catalog, "db.t", md)
    table = load_table(created.metadata_location)
    ops = SqlOperations(catalog, ("db",), "t", io)
    result = commit(table, lambda b: append(b, 7), ops=ops)
    assert SqlOperations(catalog, ("db",), "t", catalog.io).current_pointer() == result.metadata_location
    assert result.metadata.current_snapshot_id == 7
    assert [e.metadata_file for e in result.metadata.metadata_log] == [created.metadata_location]
