"""`icectl expire-snapshots` rule by rule, on small tables icectl builds itself (no Spark).

Tables come from `icectl create` + `icectl add-files` of tiny Parquet files written inside the
table directory; refs, rollbacks, statistics entries and extra schemas/specs are set with
icectl's own commit (what Spark's ALTER TABLE / CALL would write). Timestamps are real, so old
snapshots are made expirable with `--older-than <a snapshot's commit time>` or `0s`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.forge import forge_commit
from typer.testing import CliRunner

import icectl.cli.commands.maintenance as cmd
import icectl.ops.expire as expire_mod
from icectl.cli.app import app
from icectl.errors import CommitConflictError, ExitCode, StorageError
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import LONG, NestedField
from icectl.spec.snapshots import (
    PartitionStatisticsFile,
    SnapshotLogEntry,
    SnapshotRef,
    StatisticsFile,
)
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.scan import manifests_of

COUNTS = ("deleted_data_files_count", "deleted_position_delete_files_count", "deleted_equality_delete_files_count",
          "deleted_manifest_files_count", "deleted_manifest_lists_count", "deleted_statistics_files_count")


def run(wh: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"ICECTL_WAREHOUSE": str(wh), "ICECTL_CONFIG": ""})
    return r.exit_code, r.stdout, r.stderr


def iso(ms: int) -> str:
    return f"{ms}"  # epoch milliseconds: one of --older-than's forms


class Tbl:
    """A table in a private warehouse, grown one `add-files` snapshot at a time."""

    def __init__(self, wh: Path, name: str = "db.t", version: int = 2) -> None:
        self.wh, self.name = wh, name
        self.dir = wh.joinpath(*name.split("."))
        code, _, err = run(wh, "create", name, "--schema", "id long, name string", "--format-version", str(version))
        assert code == 0, err
        self.n = 0

    def add(self, rows: int = 3, branch: str | None = None, where: Path | None = None) -> int:
        """One append of a fresh Parquet file (inside the table's data/ unless ``where``)."""
        self.n += 1
        f = (where or self.dir / "data") / f"f{self.n:03d}.parquet"
        f.parent.mkdir(parents=True, exist_ok=True)
        ids = range(self.n * 100, self.n * 100 + rows)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"r{i}" for i in ids]}), f)
        args = ["add-files", self.name, str(f), "--json"] + (["--branch", branch, "--create-branch"] if branch else [])
        code, out, err = run(self.wh, *args)
        assert code == 0, err
        time.sleep(0.003)  # distinct commit timestamps, so cutoffs can fall between snapshots
        return int(json.loads(out)["snapshot_id"])

    def md(self) -> TableMetadata:
        return load_table(str(self.dir)).metadata

    def change(self, fn: Callable[[TableMetadata], TableMetadata]) -> None:
        forge_commit(load_table(str(self.dir)), fn)

    def ts(self, sid: int) -> int:
        s = self.md().snapshot_by_id(sid)
        assert s is not None
        return s.timestamp_ms

    def expire(self, *args: str, expect: int = 0) -> dict[str, Any]:
        code, out, err = run(self.wh, "expire-snapshots", str(self.dir), *args, "--json")
        assert code == expect, (code, out, err)
        return json.loads(out) if out.strip() else {"stderr": err}

    def listing(self) -> dict[str, tuple[int, int]]:
        """Every file under the table directory (hidden ones too) with size and mtime."""
        out = {}
        for root, _dirs, names in os.walk(self.dir):
            for n in names:
                st = os.stat(os.path.join(root, n))
                out[os.path.relpath(os.path.join(root, n), self.dir)] = (st.st_size, st.st_mtime_ns)
        return out

    def data_file(self, n: int) -> Path:
        return self.dir / "data" / f"f{n:03d}.parquet"

    def manifest_list(self, sid: int) -> str:
        s = load_table(str(self.dir)).metadata.snapshot_by_id(sid)
        assert s is not None and s.manifest_list
        return s.manifest_list


def with_ref(name: str, ref: SnapshotRef) -> Callable[[TableMetadata], TableMetadata]:
    return lambda md: md.replace(refs={**md.refs, name: ref})


def with_props(props: dict[str, str]) -> Callable[[TableMetadata], TableMetadata]:
    return lambda md: md.replace(properties={**md.properties, **props})


def rollback(to: int) -> Callable[[TableMetadata], TableMetadata]:
    """Java's rollback: main and current-snapshot-id move back, the snapshot-log gets an entry."""
    def build(md: TableMetadata) -> TableMetadata:
        return md.replace(refs={**md.refs, "main": dataclasses.replace(md.refs["main"], snapshot_id=to)},
                          current_snapshot_id=to,
                          snapshot_log=(*md.snapshot_log, SnapshotLogEntry(int(time.time() * 1000), to)))
    return build


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    return tmp_path / "wh"


def snapshot_ids(t: Tbl) -> set[int]:
    return {s.snapshot_id for s in t.md().snapshots}


# --------------------------------------------------------------------------- retention rules


def test_max_ref_age_drops_tag_and_branch_never_main(wh: Path) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(3)]
    b = t.add(branch="b")  # a branch with its own snapshot (started at main's head)
    old = t.add(branch="old_but_kept")
    t.change(with_ref("t", SnapshotRef(s[0], "tag", max_ref_age_ms=1)))
    t.change(with_ref("b", SnapshotRef(b, "branch", max_ref_age_ms=1)))
    t.change(with_ref("old_but_kept", SnapshotRef(old, "branch", max_ref_age_ms=3_600_000)))
    t.change(with_ref("main", SnapshotRef(s[2], "branch", max_ref_age_ms=1)))  # main never expires
    time.sleep(0.01)
    out = t.expire("--older-than", "0s", "--retain-last", "5")
    assert sorted(out["removed_refs"]) == ["b", "t"]
    md = t.md()
    assert set(md.refs) == {"main", "old_but_kept"} and md.current_snapshot_id == s[2]
    # b's snapshot is now unreferenced and old: expired, and its data file with it. The tag's
    # snapshot stays: it is one of main's last 5.
    assert out["expired_snapshots"] == [b]
    assert snapshot_ids(t) == {*s, old}
    assert not t.data_file(4).exists() and t.data_file(5).exists()
    assert all(t.data_file(i).exists() for i in (1, 2, 3))
    assert out["deleted_data_files_count"] == 1


def test_ref_settings_win_over_command_line_and_table_properties(wh: Path) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(6)]
    # Table property: keep 4 when the command line says nothing about it.
    t.change(with_props({"history.expire.min-snapshots-to-keep": "4"}))
    out = t.expire("--older-than", "0s")
    assert sorted(out["expired_snapshots"]) == sorted(s[:2])
    # --retain-last beats the table property ...
    out = t.expire("--older-than", "0s", "--retain-last", "3")
    assert out["expired_snapshots"] == [s[2]]
    # ... and the ref's own min-snapshots-to-keep beats --retain-last.
    t.change(with_ref("main", SnapshotRef(s[5], "branch", min_snapshots_to_keep=3)))
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["expired_snapshot_count"] == 0 and snapshot_ids(t) == set(s[3:])
    # A branch's max-snapshot-age-ms beats --older-than: its young ancestors stay.
    t.change(with_ref("main", SnapshotRef(s[5], "branch")))
    t.change(with_ref("keep", SnapshotRef(s[4], "branch", max_snapshot_age_ms=3_600_000)))
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["expired_snapshot_count"] == 0 and snapshot_ids(t) == set(s[3:])
    # With a ref age limit that everything exceeds, the branch keeps only its first 1.
    t.change(with_ref("keep", SnapshotRef(s[4], "branch", max_snapshot_age_ms=1)))
    time.sleep(0.01)
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["expired_snapshots"] == [s[3]] and snapshot_ids(t) == {s[4], s[5]}


def test_tag_keeps_only_its_snapshot_and_snapshot_log_is_cut_at_the_last_gap(wh: Path) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(5)]
    t.change(with_ref("v1", SnapshotRef(s[2], "tag")))
    assert [e.snapshot_id for e in t.md().snapshot_log] == s
    # Expire only the first two: the log keeps everything after them.
    out = t.expire("--older-than", iso(t.ts(s[2])), "--retain-last", "1")
    assert sorted(out["expired_snapshots"]) == sorted(s[:2])
    assert [e.snapshot_id for e in t.md().snapshot_log] == s[2:]
    # Now everything but the head and the tag: s[3] goes, and Java drops every log entry before
    # the last removed one (s[2] is kept but its entry would suggest false time travel).
    lists = {sid: t.manifest_list(sid) for sid in s[2:]}
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["expired_snapshots"] == [s[3]]
    assert snapshot_ids(t) == {s[2], s[4]}
    assert [e.snapshot_id for e in t.md().snapshot_log] == [s[4]]
    # Appends only: every data file and manifest is still reachable from the head.
    assert all(t.data_file(i).exists() for i in range(1, 6))
    assert out["deleted_manifest_lists_count"] == 1 and not os.path.exists(lists[s[3]])
    assert os.path.exists(lists[s[2]]) and os.path.exists(lists[s[4]])
    assert {k: out[k] for k in COUNTS if k != "deleted_manifest_lists_count"} == dict.fromkeys(
        [k for k in COUNTS if k != "deleted_manifest_lists_count"], 0)


def test_unreferenced_snapshots_kept_while_young_expired_when_old(wh: Path) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(4)]
    t.change(rollback(s[1]))  # s[2], s[3] are now reachable from no ref
    out = t.expire("--older-than", iso(t.ts(s[3])), "--retain-last", "1")
    # main keeps s1 (retain-last 1) and drops s0; unreferenced s2 is old, s3 young.
    assert sorted(out["expired_snapshots"]) == sorted([s[0], s[2]])
    assert snapshot_ids(t) == {s[1], s[3]}
    # s2's data file is still reachable from s3 (an append on top of it).
    assert t.data_file(3).exists() and out["deleted_data_files_count"] == 0
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["expired_snapshots"] == [s[3]]
    # Now the rolled-back appends' files go: data files 3 and 4, their manifests, s3's list.
    assert not t.data_file(3).exists() and not t.data_file(4).exists()
    assert t.data_file(1).exists() and t.data_file(2).exists()
    assert (out["deleted_data_files_count"], out["deleted_manifest_files_count"],
            out["deleted_manifest_lists_count"]) == (2, 2, 1)
    assert load_table(str(t.dir)).metadata.current_snapshot_id == s[1]


def test_snapshot_id_option(wh: Path) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(3)]
    t.change(with_ref("tag1", SnapshotRef(s[1], "tag")))
    before = t.listing()
    r = t.expire("--snapshot-id", str(s[1]), expect=ExitCode.REFUSED)
    assert "tag1" in r["stderr"]
    r = t.expire("--snapshot-id", str(s[2]), expect=ExitCode.REFUSED)  # main's head
    assert "main" in r["stderr"]
    t.expire("--snapshot-id", "12345", expect=ExitCode.NOT_FOUND)
    assert t.listing() == before
    # An ancestor the policy would keep (young) still goes when named.
    out = t.expire("--snapshot-id", str(s[0]))
    assert out["expired_snapshots"] == [s[0]] and snapshot_ids(t) == {s[1], s[2]}


@pytest.mark.parametrize("value", ["false", "FALSE", "no", "0"])
def test_gc_disabled_refuses_and_changes_nothing(wh: Path, value: str) -> None:
    t = Tbl(wh)
    for _ in range(3):
        t.add()
    t.change(with_props({"gc.enabled": value}))  # Java: anything but "true" disables GC
    before = t.listing()
    for extra in ([], ["--dry-run"]):
        r = t.expire("--older-than", "0s", "--retain-last", "1", *extra, expect=ExitCode.REFUSED)
        assert "gc.enabled" in r["stderr"]
    assert t.listing() == before and len(t.md().snapshots) == 3


def test_statistics_of_expired_snapshots_are_dropped_and_deleted(wh: Path) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(3)]
    meta = t.dir / "metadata"
    files = {}
    for sid in (s[0], s[2]):
        for kind in ("stats", "pstats"):
            p = meta / f"{sid}-{kind}.puffin"
            p.write_bytes(b"PFA1 not really")
            files[sid, kind] = p

    def add_stats(md: TableMetadata) -> TableMetadata:
        return md.replace(
            statistics=tuple(StatisticsFile(sid, str(files[sid, "stats"]), 15, 4) for sid in (s[0], s[2])),
            partition_statistics=tuple(PartitionStatisticsFile(sid, str(files[sid, "pstats"]), 15)
                                       for sid in (s[0], s[2])))
    t.change(add_stats)
    out = t.expire("--older-than", iso(t.ts(s[1])), "--retain-last", "1")
    assert out["expired_snapshots"] == [s[0]] and out["deleted_statistics_files_count"] == 2
    md = t.md()
    assert [x.snapshot_id for x in md.statistics] == [s[2]]
    assert [x.snapshot_id for x in md.partition_statistics] == [s[2]]
    assert not files[s[0], "stats"].exists() and not files[s[0], "pstats"].exists()
    assert files[s[2], "stats"].exists() and files[s[2], "pstats"].exists()


def test_metadata_log_gets_the_previous_version(wh: Path) -> None:
    t = Tbl(wh)
    for _ in range(3):
        t.add()
    before = load_table(str(t.dir))
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    after = t.md()
    assert after.metadata_log[-1].metadata_file == before.address.metadata_location
    assert len(after.metadata_log) == len(before.metadata.metadata_log) + 1
    assert out["metadata_location"] != before.address.metadata_location
    assert after.last_updated_ms > before.metadata.last_updated_ms


def test_clean_expired_metadata_drops_unused_schemas_and_specs_never_current(wh: Path) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(2)]

    def evolve(md: TableMetadata) -> TableMetadata:
        # schema 1: unused and not current; spec 1: unused and not default; schema 2 / spec 2:
        # current and default, though no snapshot was written with them yet.
        base = md.schema()
        s1 = dataclasses.replace(base, schema_id=1, fields=(*base.fields, NestedField(3, "x", LONG)))
        s2 = dataclasses.replace(base, schema_id=2, fields=(*base.fields, NestedField(4, "y", LONG)))
        return md.replace(schemas=(*md.schemas, s1, s2), current_schema_id=2, last_column_id=4,
                          partition_specs=(*md.partition_specs, PartitionSpec(1), PartitionSpec(2)),
                          default_spec_id=2)
    t.change(evolve)
    out = t.expire("--older-than", iso(t.ts(s[1])), "--retain-last", "1", "--dry-run")
    assert {x.schema_id for x in t.md().schemas} == {0, 1, 2}  # a dry run writes nothing
    out = t.expire("--older-than", iso(t.ts(s[1])), "--retain-last", "1", "--clean-expired-metadata")
    assert out["expired_snapshots"] == [s[0]]
    md = t.md()
    # Schema 0: s[1] was written with it. Spec 0: s[1]'s manifests use it.
    assert {x.schema_id for x in md.schemas} == {0, 2} and md.current_schema_id == 2
    assert {x.spec_id for x in md.partition_specs} == {0, 2} and md.default_spec_id == 2
    # Nothing to expire, but still something to clean: a commit without expiry.
    t.change(lambda m: m.replace(schemas=(*m.schemas, dataclasses.replace(m.schema(), schema_id=3))))
    out = t.expire("--older-than", iso(t.ts(s[1])), "--retain-last", "1", "--clean-expired-metadata")
    assert out["expired_snapshot_count"] == 0 and {x.schema_id for x in t.md().schemas} == {0, 2}


# --------------------------------------------------------------------------- safety


def test_files_outside_the_table_location_are_kept_and_reported_expiry_goes_on(wh: Path, tmp_path: Path) -> None:
    """Issue 11 item 10: a file added from outside used to block every expiry (exit 6, no plan)."""
    t = Tbl(wh)
    for _ in range(2):
        t.add()
    outside = tmp_path / "elsewhere"
    b = t.add(branch="b", where=outside)
    t.change(with_ref("b", SnapshotRef(b, "branch", max_ref_age_ms=1)))
    time.sleep(0.01)
    before, md_before = t.listing(), t.md()
    plan = t.expire("--older-than", "0s", "--retain-last", "1", "--dry-run")
    assert plan["expired_snapshot_count"] == 2 and plan["kept_external_files_count"] == 1
    assert plan["kept_external_files"] == [str(outside / "f003.parquet")]
    assert str(outside / "f003.parquet") not in plan["would_delete"]["data_files"]
    assert t.listing() == before and t.md() == md_before
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["removed_refs"] == ["b"] and out["kept_external_files_count"] == 1
    # The rest goes on: the manifest lists of both expired snapshots, and b's manifest, go.
    assert out["deleted_manifest_lists_count"] == 2 and out["deleted_data_files_count"] == 0
    assert (outside / "f003.parquet").exists()
    assert run(wh, "expire-snapshots", str(t.dir))[0] == 0


def test_allow_external_deletes_deletes_files_outside(wh: Path, tmp_path: Path) -> None:
    t = Tbl(wh)
    t.add()
    outside = tmp_path / "elsewhere"
    b = t.add(branch="b", where=outside)
    t.change(with_ref("b", SnapshotRef(b, "branch", max_ref_age_ms=1)))
    time.sleep(0.01)
    code, text, err = run(wh, "expire-snapshots", str(t.dir), "--older-than", "0s", "--retain-last", "1")
    assert code == 0 and "kept 1 file(s) outside the table location" in text, (text, err)
    assert (outside / "f002.parquet").exists()
    t2 = Tbl(wh, "db.t2")
    t2.add()
    b = t2.add(branch="b", where=outside)
    t2.change(with_ref("b", SnapshotRef(b, "branch", max_ref_age_ms=1)))
    time.sleep(0.01)
    out = t2.expire("--older-than", "0s", "--retain-last", "1", "--allow-external-deletes")
    assert out["removed_refs"] == ["b"] and out["deleted_data_files_count"] == 1
    assert out["kept_external_files_count"] == 0 and not (outside / "f002.parquet").exists()


def test_max_deletes_refuses_a_bigger_run_with_nothing_changed(wh: Path) -> None:
    t = Tbl(wh)
    for _ in range(4):
        t.add()
    before = t.listing()
    r = t.expire("--older-than", "0s", "--retain-last", "1", "--max-deletes", "2", expect=ExitCode.REFUSED)
    assert "--max-deletes" in r["stderr"] and "3" in r["stderr"]
    assert t.listing() == before and len(t.md().snapshots) == 4
    out = t.expire("--older-than", "0s", "--retain-last", "1", "--max-deletes", "3")
    assert out["deleted_manifest_lists_count"] == 3


def test_a_file_already_gone_is_not_an_error(wh: Path) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(3)]
    t.change(rollback(s[0]))
    t.data_file(3).unlink()  # someone removed it already
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["already_gone"] == 1 and out["failures"] == []
    assert out["deleted_data_files_count"] == 1 and not t.data_file(2).exists()


def test_delete_failure_is_reported_the_rest_deleted(wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(4)]
    t.change(rollback(s[0]))
    stuck = str(t.data_file(3))
    real = FileIO.delete

    def delete(self: FileIO, path: str) -> bool:
        if path == stuck:
            raise StorageError("permission denied deleting", path=path)
        return real(self, path)
    monkeypatch.setattr(FileIO, "delete", delete)
    code, out, err = run(wh, "expire-snapshots", str(t.dir), "--older-than", "0s", "--retain-last", "1", "--json")
    assert code == StorageError.exit_code, err
    doc = json.loads(out)
    assert len(doc["failures"]) == 1 and stuck in doc["failures"][0]
    assert doc["deleted_data_files_count"] == 2 and not t.data_file(2).exists() and not t.data_file(4).exists()
    assert t.data_file(3).exists()
    assert snapshot_ids(t) == {s[0]}  # the commit stands


def test_dry_run_lists_by_category_and_changes_nothing(wh: Path) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(4)]
    t.change(rollback(s[1]))
    before = t.listing()
    plan = t.expire("--older-than", "0s", "--retain-last", "1", "--dry-run")
    assert t.listing() == before
    assert plan["dry_run"] is True and sorted(plan["expired_snapshots"]) == sorted([s[0], s[2], s[3]])
    would = plan["would_delete"]
    assert {c: len(v) for c, v in would.items()} == {c[len("deleted_"):-len("_count")]: plan[c] for c in COUNTS}
    assert sorted(would["data_files"]) == sorted(str(t.data_file(i)) for i in (3, 4))
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    gone = {str(t.dir / p) for p in set(before) - set(t.listing())}
    assert gone - {p for p in gone if p.endswith(".metadata.json") or p.endswith(".crc")} == \
        {p for v in would.values() for p in v}
    assert {c: out[c] for c in COUNTS} == {c: plan[c] for c in COUNTS}


def test_commit_comes_before_any_delete(wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = Tbl(wh)
    s = [t.add() for _ in range(3)]
    t.change(rollback(s[0]))
    before = t.listing()

    def lost(*_a: object, **_k: object) -> None:
        raise CommitConflictError("another writer committed first")
    monkeypatch.setattr(expire_mod, "commit", lost)
    r = t.expire("--older-than", "0s", "--retain-last", "1", expect=ExitCode.CONFLICT)
    assert "another writer" in r["stderr"]
    assert t.listing() == before


def test_snapshots_restored_after_the_commit_keep_their_files(wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cleanup is judged on the table re-read after the commit: a writer that brings expired
    snapshots back (a stale writer on a catalog without atomic swaps) keeps their files."""
    t = Tbl(wh)
    s = [t.add() for _ in range(3)]
    t.change(rollback(s[0]))
    original = t.md()
    real_commit = expire_mod.commit

    def commit_then_restore(table: Any, build: Any, **kw: Any) -> Any:
        result = real_commit(table, build, **kw)
        forge_commit(load_table(str(t.dir)), lambda md: md.replace(snapshots=original.snapshots, refs=original.refs))
        return result
    monkeypatch.setattr(expire_mod, "commit", commit_then_restore)
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["expired_snapshot_count"] == 2
    assert {c: out[c] for c in COUNTS} == dict.fromkeys(COUNTS, 0)
    assert all(t.data_file(i).exists() for i in (1, 2, 3))
    for sid in s:
        assert os.path.exists(t.manifest_list(sid))


def test_version_replaced_after_cleanup_was_planned_deletes_nothing(wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check-then-rename writer (plain Hadoop LocalFileSystem) can replace our new version after
    the post-commit re-read: the last look before deleting must catch it and delete nothing."""
    t = Tbl(wh)
    s = [t.add() for _ in range(3)]
    meta = t.dir / "metadata"
    before_files = t.listing()
    real = expire_mod.files_to_delete
    calls: list[int] = []

    def plan_then_replaced(before: TableMetadata, expired: list[int], after: TableMetadata, *a: Any,
                           **k: Any) -> Any:
        out = real(before, expired, after, *a, **k)
        calls.append(1)
        if len(calls) == 2:  # after the commit: the stale writer's file replaces ours (os.replace)
            versions = sorted(int(n[1:].split(".")[0]) for n in os.listdir(meta) if n.endswith(".metadata.json"))
            stale = (meta / f"v{versions[-2]}.metadata.json").read_bytes()
            tmp = meta / "stale.tmp"
            tmp.write_bytes(stale)
            os.replace(tmp, meta / f"v{versions[-1]}.metadata.json")
        return out
    monkeypatch.setattr(expire_mod, "files_to_delete", plan_then_replaced)
    r = t.expire("--older-than", "0s", "--retain-last", "1", expect=ExitCode.CONFLICT)
    assert len(calls) == 2
    assert "replaced" in r["cleanup_skipped"]
    assert {c: r[c] for c in COUNTS} == dict.fromkeys(COUNTS, 0)
    assert snapshot_ids(t) == set(s)  # the table as the stale writer left it: every snapshot back
    after_files = t.listing()
    assert set(before_files) <= set(after_files)  # nothing deleted


def test_all_tables_one_json_line_each_worst_exit_code(wh: Path) -> None:
    tables = [Tbl(wh, name) for name in ("db.a", "db.b", "sales.c")]
    for tb in tables:
        for _ in range(3):
            tb.add()
    broken = tables[1]
    meta = load_table(str(broken.dir)).address.metadata_location
    Path(meta).write_text("{ not json")
    code, out, err = run(wh, "expire-snapshots", "--all", "--older-than", "0s", "--retain-last", "1", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 3, out
    by_table = {d["table"].rsplit(".", 1)[-1] if "." in d["table"] else d["table"]: d for d in lines}
    assert code == ExitCode.CORRUPT, err
    assert "error" in by_table["b"]
    for name in ("a", "c"):
        assert by_table[name]["expired_snapshot_count"] == 2
    assert len(tables[0].md().snapshots) == 1 and len(tables[2].md().snapshots) == 1
    # Limited to a namespace; --snapshot-id makes no sense with --all.
    code, out, _ = run(wh, "expire-snapshots", "--all", "sales", "--older-than", "0s", "--json")
    assert code == 0 and len(out.splitlines()) == 1
    assert run(wh, "expire-snapshots", "--all", "--snapshot-id", "1")[0] == ExitCode.USAGE


def test_usage_errors(wh: Path) -> None:
    t = Tbl(wh)
    t.add()
    for args in (["--retain-last", "0"], ["--older-than", "yesterday"], ["--older-than", "1700000000"],
                 ["--max-deletes", "-1"]):
        code, _, err = run(wh, "expire-snapshots", str(t.dir), *args)
        assert code == ExitCode.USAGE, (args, err)
    assert run(wh, "expire-snapshots")[0] == ExitCode.USAGE


def test_nothing_to_expire_writes_nothing(wh: Path) -> None:
    t = Tbl(wh)
    t.add()
    before = t.listing()
    out = t.expire("--older-than", "0s")
    assert out["expired_snapshot_count"] == 0 and t.listing() == before


def test_library_now_ms_makes_snapshots_old(wh: Path) -> None:
    """The core takes `now` from its caller: the table's own 5-day default applies."""
    t = Tbl(wh)
    s = [t.add() for _ in range(3)]
    table = load_table(str(t.dir))
    r = expire_snapshots(table, ExpirePolicy(), now_ms=int(time.time() * 1000))
    assert r.data["expired_snapshot_count"] == 0  # younger than 5 days
    r = expire_snapshots(table, ExpirePolicy(), now_ms=int(time.time() * 1000) + 6 * 86_400_000)
    assert sorted(r.data["expired_snapshots"]) == sorted(s[:2]) and r.exit_code == 0


def test_a_file_named_in_another_spelling_by_a_retained_snapshot_is_kept(wh: Path) -> None:
    """``file:///x`` in an expired snapshot and ``/x`` in a retained one are the same file."""
    t = Tbl(wh)
    s0 = t.add()
    f = t.dir / "data" / "shared.parquet"
    pq.write_table(pa.table({"id": pa.array([7], pa.int64()), "name": ["x"]}), f)
    for args in ([str(f), "--branch", "b", "--create-branch"], [f"file://{f}"]):  # b starts at s0
        code, _, err = run(wh, "add-files", t.name, *args, "--json")
        assert code == 0, err
    t.change(rollback(s0))  # the file:// snapshot is now unreferenced; branch b names the plain path
    plan = t.expire("--older-than", "0s", "--retain-last", "1", "--dry-run")
    assert plan["expired_snapshot_count"] == 1 and plan["would_delete"]["data_files"] == []
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["deleted_data_files_count"] == 0 and out["deleted_manifest_lists_count"] == 1
    assert f.exists()


def test_all_goes_on_after_an_unexpected_error_in_one_table(wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables = [Tbl(wh, name) for name in ("db.a", "db.b", "db.c")]
    for tb in tables:
        tb.add()
        tb.add()
    real = cmd.expire_snapshots

    def flaky(table: Any, policy: ExpirePolicy, **kw: Any) -> Any:
        if table.identifier.endswith("b"):
            raise KeyError("a bug met on this table only")
        return real(table, policy, **kw)
    monkeypatch.setattr(cmd, "expire_snapshots", flaky)
    code, out, _ = run(wh, "expire-snapshots", "--all", "--older-than", "0s", "--retain-last", "1", "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == ExitCode.INTERNAL and len(lines) == 3
    assert "KeyError" in lines[1]["error"]
    assert lines[0]["expired_snapshot_count"] == lines[2]["expired_snapshot_count"] == 1


def test_files_under_write_data_path_belong_to_the_table(wh: Path, tmp_path: Path) -> None:
    """Java writes data under write.data.path when it is set: those files are the table's own."""
    t = Tbl(wh)
    t.add()
    data_path = tmp_path / "object-store-data"
    t.change(with_props({"write.data.path": str(data_path)}))
    b = t.add(branch="b", where=data_path / "x")
    other = tmp_path / "other-table"
    c = t.add(branch="c", where=other)
    t.change(with_ref("b", SnapshotRef(b, "branch", max_ref_age_ms=1)))
    time.sleep(0.01)
    out = t.expire("--older-than", "0s", "--retain-last", "1")
    assert out["removed_refs"] == ["b"] and not (data_path / "x" / "f002.parquet").exists()
    # A file anywhere else is still refused.
    t.change(with_ref("c", SnapshotRef(c, "branch", max_ref_age_ms=1)))
    time.sleep(0.01)
    r = t.expire("--older-than", "0s", "--retain-last", "1")
    assert r["kept_external_files"] == [str(other / "f003.parquet")] and (other / "f003.parquet").exists()


@dataclasses.dataclass
class ReadLog(FileIO):
    """A FileIO that remembers what it read (whole files and ranges), to see which files a run opens."""

    opened: list[str] = dataclasses.field(default_factory=list)

    def read(self, path: str) -> bytes:
        self.opened.append(path)
        return super().read(path)

    def read_with_identity(self, path: str) -> Any:
        self.opened.append(path)
        return super().read_with_identity(path)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        self.opened.append(path)
        return super().read_range(path, offset, length)


def test_retained_manifests_are_opened_only_when_more_than_manifest_lists_go(wh: Path) -> None:
    """Appends: every manifest stays listed, so only the old lists go, and the files the retained
    manifests list (which matter only against manifests or content files that go, as in Java's
    ReachableFileCleanup) are not read. After a compaction the old manifests go too: then the
    retained manifest is read, and every data file it lists stays."""
    t = Tbl(wh)
    for _ in range(3):
        t.add()
    io = ReadLog()
    table = load_table(str(t.dir), None, io)
    kept = {m.manifest_path for m in manifests_of(table.metadata, table.metadata.current_snapshot(), table.io)}
    result = expire_snapshots(table, ExpirePolicy(older_than_ms=int(time.time() * 1000) + 1, retain_last=1))
    assert result.data["deleted_manifest_lists_count"] == 2 and result.data["deleted_manifest_files_count"] == 0
    assert len(kept) == 3 and not kept & set(io.opened)

    t.add()
    code, _, err = run(wh, "compact", t.name, "--json")
    assert code == 0, err
    time.sleep(0.003)
    io = ReadLog()
    table = load_table(str(t.dir), None, io)
    merged = {m.manifest_path for m in manifests_of(table.metadata, table.metadata.current_snapshot(), table.io)}
    result = expire_snapshots(table, ExpirePolicy(older_than_ms=int(time.time() * 1000) + 1, retain_last=1))
    assert result.data["deleted_manifest_files_count"] == 4 and result.data["deleted_data_files_count"] == 0
    assert merged <= set(io.opened)
    assert all(t.data_file(n).exists() for n in (1, 2, 3, 4))
