"""Snapshot management (icectl/ops/snapshots.py) on small tables icectl builds itself.

Each history: main s1 -> s2 -> s4, branch dev s1 -> s3 (dev starts at s1), one data file per
snapshot with one row each, so which rows a ref reads tells which snapshots it has.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.forge import forge_commit, property_change, ref_change
from typer.testing import CliRunner

import icectl.ops.snapshots as ms
from icectl.cli.app import app
from icectl.codec.manifest_reader import read_manifest_list
from icectl.config import load_config
from icectl.errors import CommitConflictError, NotFoundError, RefusedError
from icectl.ops.files.add_files import add_files
from icectl.ops.snapshots import (
    cherrypick,
    fast_forward,
    latest_ancestor_older_than,
    plan_pick,
    publish,
    rollback,
    set_current,
)
from icectl.spec.manifest import ManifestContent
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import SnapshotRef
from icectl.table import Table, load_table
from icectl.table.commit import commit
from icectl.table.layout import Attempt, Deletes
from icectl.table.layout.manifest_list import ManifestListLayout
from icectl.table.scan import iter_entries, manifests_of
from unit.table.test_commit import write_sql_config


@dataclasses.dataclass
class History:
    dir: str
    files: dict[str, str]  # s1.. -> data file path
    ids: dict[str, int]  # s1.. -> snapshot id

    def table(self) -> Table:
        return load_table(self.dir)

    def name(self, sid: int | None) -> str | None:
        return {v: k for k, v in self.ids.items()}.get(sid, None if sid is None else str(sid))


def _file(tmp_path: Path, n: int) -> str:
    f = tmp_path / f"f{n}.parquet"
    pq.write_table(pa.table({"id": pa.array([n], pa.int64()), "name": [f"n{n}"]}), f)
    return str(f)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def build(tmp_path: Path, version: int = 2) -> History:
    d = str(tmp_path / "t")
    r = invoke("create", d, "--schema", "id long, name string", "--format-version", str(min(version, 3)))
    assert r.exit_code == 0, r.stderr
    files = {f"s{i}": _file(tmp_path, i) for i in range(1, 5)}
    ids: dict[str, int] = {}
    for name, branch in (("s1", "main"), ("s2", "main"), ("s3", "dev"), ("s4", "main")):
        if name == "s3":  # dev starts at s1
            commit(load_table(d), lambda md: ref_change("dev", SnapshotRef(ids["s1"], "branch")))
        out = add_files(load_table(d), [files[name]], branch=branch)
        ids[name] = out.data["snapshot_id"]
    if version >= 4:
        r = invoke("upgrade", d, "--to", "4", "--yes")
        assert r.exit_code == 0, r.stderr
    return History(d, files, ids)


def live_files(table: Table, ref: str = "main") -> set[str]:
    md = table.metadata
    snap = md.snapshot_for_ref(ref)
    assert snap is not None
    ms_ = [m for m in manifests_of(md, snap, table.io) if m.content == ManifestContent.DATA]
    return {Path(e.data_file.file_path).name for _, e in iter_entries(md, table.io, ms_, live_only=True)}


def version_of(h: History) -> str:
    return (Path(h.dir) / "metadata" / "version-hint.text").read_text()


# --------------------------------------------------------------------------- moving branches


def test_rollback_moves_main_back_and_logs_it(tmp_path: Path) -> None:
    h = build(tmp_path)
    # main keeps its retention settings when it moves (SnapshotRef.builderFrom)
    commit(h.table(), lambda md: ref_change("main", SnapshotRef(h.ids["s4"], "branch", min_snapshots_to_keep=7)))
    out = rollback(h.table(), to_snapshot=h.ids["s2"])
    md = h.table().metadata
    assert md.current_snapshot_id == h.ids["s2"] and md.refs["main"].min_snapshots_to_keep == 7
    assert md.snapshot_log[-1].snapshot_id == h.ids["s2"]
    assert [h.name(e.snapshot_id) for e in md.snapshot_log] == ["s1", "s2", "s4", "s4", "s2"]  # s4 twice: setting
    # main's retention is a set-snapshot-ref of main too
    assert out.data["previous_snapshot_id"] == h.ids["s4"] and out.data["current_snapshot_id"] == h.ids["s2"]
    assert live_files(h.table()) == {"f1.parquet", "f2.parquet"}
    assert h.ids["s4"] in md.snapshots_by_id  # rolled back, not removed
    # s4 is no ancestor of main now; dev's s3 never was: Java refuses both
    for target in ("s4", "s3"):
        before = version_of(h)
        with pytest.raises(RefusedError, match="not an ancestor"):
            rollback(h.table(), to_snapshot=h.ids[target])
        assert version_of(h) == before


def test_rollback_of_a_branch_and_to_a_timestamp(tmp_path: Path) -> None:
    h = build(tmp_path)
    md = h.table().metadata
    ts = {k: md.snapshots_by_id[v].timestamp_ms for k, v in h.ids.items()}
    # the latest ancestor strictly older than the point in time
    assert latest_ancestor_older_than(md, h.ids["s4"], ts["s4"]).snapshot_id == h.ids["s2"]  # type: ignore[union-attr]
    assert latest_ancestor_older_than(md, h.ids["s4"], ts["s2"] + 1).snapshot_id == h.ids["s2"]  # type: ignore[union-attr]
    assert latest_ancestor_older_than(md, h.ids["s4"], ts["s1"]) is None
    rollback(h.table(), to_timestamp_ms=ts["s3"], branch="dev")
    assert h.table().metadata.refs["dev"].snapshot_id == h.ids["s1"]
    assert h.table().metadata.current_snapshot_id == h.ids["s4"]  # main untouched, no log entry
    assert len(h.table().metadata.snapshot_log) == 3
    with pytest.raises(NotFoundError, match="older than"):
        rollback(h.table(), to_timestamp_ms=ts["s1"])
    with pytest.raises(NotFoundError, match="no branch 'nope'"):
        rollback(h.table(), to_snapshot=h.ids["s1"], branch="nope")


def test_set_current_goes_anywhere_and_refuses_tags_and_unknowns(tmp_path: Path) -> None:
    h = build(tmp_path)
    commit(h.table(), lambda md: ref_change("t1", SnapshotRef(h.ids["s2"], "tag")))
    set_current(h.table(), h.ids["s3"])
    assert h.table().metadata.current_snapshot_id == h.ids["s3"]
    assert live_files(h.table()) == {"f1.parquet", "f3.parquet"}
    out = set_current(h.table(), ref="t1", branch="dev")
    assert h.table().metadata.refs["dev"].snapshot_id == h.ids["s2"] and out.data["changed"]
    again = set_current(h.table(), ref="t1", branch="dev")
    assert not again.data["changed"] and "metadata_location" not in again.data
    before = version_of(h)
    with pytest.raises(RefusedError, match="is a tag"):
        set_current(h.table(), h.ids["s1"], branch="t1")
    with pytest.raises(NotFoundError, match="no snapshot 42"):
        set_current(h.table(), 42)
    with pytest.raises(NotFoundError, match="no branch or tag 'nope'"):
        set_current(h.table(), ref="nope")
    assert version_of(h) == before


def test_fast_forward(tmp_path: Path) -> None:
    h = build(tmp_path)
    with pytest.raises(RefusedError, match="not an ancestor"):  # main s4 is not behind dev s3
        fast_forward(h.table(), "main", "dev")
    with pytest.raises(RefusedError, match="not an ancestor"):  # dev's s3 is not in main's history
        fast_forward(h.table(), "dev", "main", dry_run=True)
    rollback(h.table(), to_snapshot=h.ids["s1"])
    out = fast_forward(h.table(), "main", "dev", dry_run=True)
    assert out.data["would_write"] and h.table().metadata.current_snapshot_id == h.ids["s1"]
    fast_forward(h.table(), "main", "dev")
    md = h.table().metadata
    assert md.current_snapshot_id == h.ids["s3"] and md.snapshot_log[-1].snapshot_id == h.ids["s3"]
    # a branch the table lacks is created at the target, as Java's replaceBranch(from, to, true)
    out = fast_forward(h.table(), "fresh", "main")
    assert out.data["ref"] == {"ref": "fresh", "from_snapshot_id": None, "to_snapshot_id": h.ids["s3"], "created": True}
    commit(h.table(), lambda md: ref_change("t1", SnapshotRef(h.ids["s1"], "tag")))
    with pytest.raises(RefusedError, match="is a tag"):
        fast_forward(h.table(), "t1", "main")
    with pytest.raises(NotFoundError):
        fast_forward(h.table(), "main", "nope")


# --------------------------------------------------------------------------- cherry-pick


def test_cherrypick_append_is_a_new_snapshot_with_fresh_row_ids(tmp_path: Path) -> None:
    h = build(tmp_path, version=3)
    before = h.table().metadata
    dry = cherrypick(h.table(), h.ids["s3"], dry_run=True)
    assert len(h.table().metadata.snapshots) == 4 and dry.data["mode"] == "cherry-pick"
    assert dry.data["new_snapshot"]["added_data_files"] == [h.files["s3"]]
    out = cherrypick(h.table(), h.ids["s3"])
    md = h.table().metadata
    new = md.snapshots_by_id[out.data["current_snapshot_id"]]
    assert new.parent_snapshot_id == h.ids["s4"] and new.operation == "append"
    assert new.summary["source-snapshot-id"] == str(h.ids["s3"]) and "published-wap-id" not in new.summary
    assert new.summary["added-data-files"] == "1" and new.summary["total-records"] == "4"
    assert set(dry.data["new_snapshot"]["summary"]) == set(new.summary)  # the dry run said what it would write
    # v3 row lineage: the re-added file gets new row ids from next-row-id, as Java's suppressFirstRowId
    assert new.first_row_id == before.next_row_id and md.next_row_id == before.next_row_id + 1
    assert live_files(h.table()) == {"f1.parquet", "f2.parquet", "f3.parquet", "f4.parquet"}
    assert Path(h.files["s3"]).exists()
    for sid, why in ((h.ids["s3"], "already picked"), (h.ids["s2"], "already an ancestor")):
        with pytest.raises(RefusedError, match=why):
            cherrypick(h.table(), sid)
    with pytest.raises(NotFoundError):
        cherrypick(h.table(), 7)


def _stage(h: History, name: str, wap_id: str) -> None:
    """Make snapshot ``name`` a staged write-audit-publish snapshot (summary wap.id), as Spark's
    staged writes are: a snapshot no branch has."""
    sid = h.ids[name]

    def staged(md: TableMetadata) -> TableMetadata:
        snaps = tuple(dataclasses.replace(s, summary={**s.summary, "wap.id": wap_id}) if s.snapshot_id == sid else s
                      for s in md.snapshots)
        refs = {k: v for k, v in md.refs.items() if v.snapshot_id != sid}
        return md.replace(snapshots=snaps, refs=refs)

    forge_commit(h.table(), staged)


def test_publish_fast_forwards_then_picks(tmp_path: Path) -> None:
    h = build(tmp_path)
    rollback(h.table(), to_snapshot=h.ids["s1"])
    _stage(h, "s3", "w1")  # parent s1 = main's head: a fast-forward
    _stage(h, "s2", "w2")  # parent s1 too: after w1 it is no fast-forward any more
    n = len(h.table().metadata.snapshots)
    out = publish(h.table(), "w1")
    assert out.data["mode"] == "fast-forward" and out.data["wap_id"] == "w1"
    assert h.table().metadata.current_snapshot_id == h.ids["s3"] and len(h.table().metadata.snapshots) == n
    with pytest.raises(RefusedError, match="wap id 'w1' was published already"):
        publish(h.table(), "w1")
    out = publish(h.table(), "w2")
    new = h.table().metadata.current_snapshot()
    assert new is not None and out.data["mode"] == "cherry-pick"
    assert new.summary["published-wap-id"] == "w2" and new.summary["source-snapshot-id"] == str(h.ids["s2"])
    assert live_files(h.table()) == {"f1.parquet", "f2.parquet", "f3.parquet"}
    with pytest.raises(RefusedError, match="published already"):
        publish(h.table(), "w2")
    with pytest.raises(NotFoundError, match=r"wap\.id 'w3'"):
        publish(h.table(), "w3")


def _md_with(h: History, name: str, **summary: str) -> TableMetadata:
    md = h.table().metadata
    sid = h.ids[name]
    return md.replace(snapshots=tuple(
        dataclasses.replace(s, summary={**s.summary, **summary}) if s.snapshot_id == sid else s
        for s in md.snapshots))


def test_what_java_refuses_to_pick(tmp_path: Path) -> None:
    h = build(tmp_path)
    ident = "t"
    # not an append, not a dynamic overwrite, not a fast-forward
    for op in ("delete", "overwrite", "replace"):
        with pytest.raises(RefusedError, match="not an append, a dynamic overwrite or a fast-forward"):
            plan_pick(_md_with(h, "s3", operation=op), h.ids["s3"], ident)
    # ... but any operation fast-forwards when its parent is main's head (s4's parent s2: roll back there)
    rollback(h.table(), to_snapshot=h.ids["s2"])
    assert plan_pick(_md_with(h, "s4", operation="delete"), h.ids["s4"], ident)[0] == "fast-forward"
    # a dynamic overwrite based on an ancestor: fast-forward when it can, else re-applied as an overwrite
    dyn = {"operation": "overwrite", "replace-partitions": "true"}
    assert plan_pick(_md_with(h, "s4", **dyn), h.ids["s4"], ident)[0] == "fast-forward"
    assert plan_pick(_dyn_not_ff(h), h.ids["s3"], ident)[0] == "overwrite"
    # a dynamic overwrite whose parent is not in main's history
    with pytest.raises(RefusedError, match="not an ancestor of main's head"):
        plan_pick(_md_with(h, "s4", **dyn).replace(refs={"main": SnapshotRef(h.ids["s3"], "branch")},
                                                   current_snapshot_id=h.ids["s3"]), h.ids["s4"], ident)


def _dyn_not_ff(h: History) -> TableMetadata:
    """s3 (parent s1) as a dynamic overwrite while main is at s2: s1 is an ancestor, no fast-forward."""
    return _md_with(h, "s3", operation="overwrite", **{"replace-partitions": "true"})


# --------------------------------------------------------------------------- concurrency and failures


def test_retries_recheck_on_the_fresh_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = build(tmp_path)
    extra = _file(tmp_path, 5)
    real_branch_ref = ms._branch_ref
    calls = 0

    def racing(md: TableMetadata, branch: str, ident: str, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # inside the first attempt: another writer appends to main first
            add_files(load_table(h.dir), [extra])
        return real_branch_ref(md, branch, ident, **kw)

    monkeypatch.setattr(ms, "_branch_ref", racing)
    out = rollback(h.table(), to_snapshot=h.ids["s2"])
    assert out.data["commit_attempts"] == 2 and out.data["previous_snapshot_id"] not in h.ids.values()
    md = h.table().metadata
    assert md.current_snapshot_id == h.ids["s2"]
    assert md.snapshots_by_id[out.data["previous_snapshot_id"]].parent_snapshot_id == h.ids["s4"]  # theirs stays

    # the other writer moves main to dev's line, where s2 is no ancestor: the retry's re-check refuses
    calls = 0

    def moving(md: TableMetadata, branch: str, ident: str, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            set_current(load_table(h.dir), h.ids["s3"])
        return real_branch_ref(md, branch, ident, **kw)

    monkeypatch.setattr(ms, "_branch_ref", real_branch_ref)
    set_current(h.table(), h.ids["s4"])  # main s4 -> s2 -> s1 again
    calls = 0
    monkeypatch.setattr(ms, "_branch_ref", moving)
    before = len(h.table().metadata.snapshot_log)
    with pytest.raises(RefusedError, match="not an ancestor"):
        rollback(h.table(), to_snapshot=h.ids["s2"])
    md = h.table().metadata
    assert md.current_snapshot_id == h.ids["s3"] and len(md.snapshot_log) == before + 1  # theirs, not ours


def test_cherrypick_retry_keeps_a_concurrent_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = build(tmp_path, version=3)
    extra = _file(tmp_path, 5)
    real = ms.plan_pick
    calls = 0

    def racing(md: TableMetadata, sid: int, ident: str) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:  # the first attempt's check: another writer appends to main first
            add_files(load_table(h.dir), [extra])
        return real(md, sid, ident)

    monkeypatch.setattr(ms, "plan_pick", racing)
    out = cherrypick(h.table(), h.ids["s3"])
    assert out.data["commit_attempts"] == 2
    assert live_files(h.table()) == {"f1.parquet", "f2.parquet", "f3.parquet", "f4.parquet", "f5.parquet"}
    folder = Path(h.dir) / "metadata"
    lists = [p.name for p in folder.glob(f"snap-{out.data['current_snapshot_id']}-*.avro")]
    assert len(lists) == 1  # the lost attempt's list is gone, the committed one stays


def test_fast_forward_pick_turns_into_a_new_snapshot_when_main_moves(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    h = build(tmp_path)
    rollback(h.table(), to_snapshot=h.ids["s1"])  # s3's parent is main's head: a fast-forward
    extra = _file(tmp_path, 5)
    real = ms.plan_pick
    calls = 0

    def racing(md: TableMetadata, sid: int, ident: str) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            add_files(load_table(h.dir), [extra])
        return real(md, sid, ident)

    monkeypatch.setattr(ms, "plan_pick", racing)
    out = cherrypick(h.table(), h.ids["s3"])
    assert out.data["mode"] == "cherry-pick"
    assert live_files(h.table()) == {"f1.parquet", "f3.parquet", "f5.parquet"}


def test_a_failed_cherrypick_leaves_no_file_and_deletes_nothing_live(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    h = build(tmp_path)
    folder = Path(h.dir) / "metadata"
    files_before = {p.name for p in folder.iterdir()}
    version = version_of(h)

    def lose(*args: Any, **kw: Any) -> Any:
        raise CommitConflictError("lost every attempt")

    monkeypatch.setattr("icectl.table.snapshot_writer.commit", lose)
    with pytest.raises(CommitConflictError):
        cherrypick(h.table(), h.ids["s3"])
    assert {p.name for p in folder.iterdir()} == files_before and version_of(h) == version
    assert all(Path(f).exists() for f in h.files.values())


# --------------------------------------------------------------------------- the command line


def test_cli_exit_codes_one_line_and_table_unchanged(tmp_path: Path) -> None:
    h = build(tmp_path)
    commit(h.table(), lambda md: ref_change("t1", SnapshotRef(h.ids["s2"], "tag")))
    version = version_of(h)
    cases = [
        (["rollback", h.dir, "--to-snapshot", "42"], 3),
        (["rollback", h.dir, "--to-snapshot", h.ids["s3"]], 6),
        (["rollback", h.dir, "--to-snapshot", h.ids["s1"], "--branch", "t1"], 6),
        (["rollback", h.dir], 2),
        (["rollback", h.dir, "--to-snapshot", h.ids["s1"], "--to-timestamp", "1d"], 2),
        (["rollback", h.dir, "--to-timestamp", "yesterday-ish"], 2),
        (["rollback", h.dir, "--to-timestamp", "3000d"], 3),
        (["set-current", h.dir], 2),
        (["set-current", h.dir, "--ref", "nope"], 3),
        (["cherrypick", h.dir, "42"], 3),
        (["cherrypick", h.dir, h.ids["s2"]], 6),
        (["publish", h.dir, "nope"], 3),
        (["fast-forward", h.dir, "main", "--to", "dev"], 6),
        (["fast-forward", h.dir, "t1", "--to", "main"], 6),
        (["fast-forward", h.dir, "main", "--to", "nope"], 3),
    ]
    for args, code in cases:
        r = invoke(*args)
        assert r.exit_code == code, (args, r.exit_code, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
    for args in (["rollback", h.dir, "--to-snapshot", "abc"], ["cherrypick", h.dir, "12x"]):  # the parser's own
        r = invoke(*args)
        assert r.exit_code == 2 and "Invalid value" in r.stderr, r.stderr
    for args in (["rollback", h.dir, "--to-snapshot", h.ids["s1"]], ["set-current", h.dir, "-s", h.ids["s3"]],
                 ["cherrypick", h.dir, h.ids["s3"]], ["fast-forward", h.dir, "dev2", "--to", "main"]):
        r = invoke(*args, "--dry-run", "--json")
        assert r.exit_code == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["dry_run"] is True and doc["would_write"][-1].startswith("a new table metadata file")
    assert version_of(h) == version
    r = invoke("rollback", h.dir, "--to-snapshot", h.ids["s2"], "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["view"] == "rollback" and doc["ref"]["from_snapshot_id"] == h.ids["s4"]
    assert load_table(h.dir).metadata.current_snapshot_id == h.ids["s2"]


def test_v4_moves_refs_and_picks_appends_into_the_root(tmp_path: Path) -> None:
    h = build(tmp_path, version=4)
    md = h.table().metadata
    assert md.format_version == 4
    dev_head = md.refs["dev"].snapshot_id  # the upgrade's replace snapshot on s3
    rollback(h.table(), to_snapshot=h.ids["s1"])
    fast_forward(h.table(), "main", "dev")
    assert h.table().metadata.current_snapshot_id == dev_head
    set_current(h.table(), h.ids["s2"])
    assert cherrypick(h.table(), h.ids["s4"]).data["mode"] == "fast-forward"  # only a ref moves
    set_current(h.table(), dev_head)
    # s4 (a manifest-list snapshot of before the upgrade) re-applied as a root-level entry of a new root
    before = h.table().metadata
    out = cherrypick(h.table(), h.ids["s4"])
    new = h.table().metadata.current_snapshot()
    assert new is not None and new.root_manifest is not None and new.parent_snapshot_id == dev_head
    assert out.data["new_snapshot"]["summary"]["source-snapshot-id"] == str(h.ids["s4"])
    assert live_files(h.table()) == {"f1.parquet", "f3.parquet", "f4.parquet"}
    assert new.first_row_id == before.next_row_id and h.table().metadata.next_row_id == before.next_row_id + 1
    # a v4 snapshot as the source, its files added in a new leaf (root-max-added-files 0)
    commit(h.table(), lambda md: ref_change("x", SnapshotRef(dev_head, "branch")))
    x = add_files(h.table(), [_file(tmp_path, 6)], branch="x").data["snapshot_id"]
    commit(h.table(), lambda md: property_change({"write.v4.root-max-added-files": "0"}))
    dry = cherrypick(h.table(), x, dry_run=True)
    assert [Path(p).name.split("-")[0] for p in dry.data["would_write"][:2]] == ["<uuid>", "root"]
    out = cherrypick(h.table(), x)
    assert out.data["mode"] == "cherry-pick"
    assert live_files(h.table()) == {"f1.parquet", "f3.parquet", "f4.parquet", "f6.parquet"}
    r = invoke("validate", h.dir, "--deep")
    assert r.exit_code == 0, r.stdout + r.stderr
    # a dynamic overwrite is not re-applied to a v4 root (refused before anything is written)
    _as_dynamic_overwrite(h, "s2")  # parent s1, an ancestor of main; main is past it: no fast-forward
    version = version_of(h)
    with pytest.raises(RefusedError, match="re-applies only appends"):
        cherrypick(h.table(), h.ids["s2"])
    assert version_of(h) == version
    # main at a snapshot of before the upgrade has no root to build on
    set_current(h.table(), h.ids["s4"])
    version = version_of(h)
    r = invoke("cherrypick", h.dir, x)
    assert r.exit_code == 6 and "before the upgrade" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert version_of(h) == version


def test_damaged_source_manifest_list_is_one_line_and_no_change(tmp_path: Path) -> None:
    h = build(tmp_path)
    snap = h.table().metadata.snapshots_by_id[h.ids["s3"]]
    assert snap.manifest_list is not None
    Path(snap.manifest_list.removeprefix("file:")).write_bytes(b"not avro")
    version = version_of(h)
    r = invoke("cherrypick", h.dir, h.ids["s3"])
    assert r.exit_code == 4 and "not an Avro file" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert version_of(h) == version
    Path(snap.manifest_list.removeprefix("file:")).unlink()
    r = invoke("cherrypick", h.dir, h.ids["s3"], "--dry-run")
    assert r.exit_code == 3 and "not found" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert version_of(h) == version


# --------------------------------------------------------------------------- dynamic overwrite


def _as_dynamic_overwrite(h: History, name: str) -> None:
    sid = h.ids[name]
    forge_commit(h.table(), lambda md: md.replace(snapshots=tuple(
        dataclasses.replace(s, summary={**s.summary, "operation": "overwrite", "replace-partitions": "true"})
        if s.snapshot_id == sid else s for s in md.snapshots)))


def test_dynamic_overwrite_pick_checks_replaced_partitions(tmp_path: Path) -> None:
    """s3 (dev, parent s1) made a dynamic overwrite: it replaces the partitions of the files it
    added. Unpartitioned, main's s2 and s4 added files to that one partition since s1: refused as
    Java's validateReplacedPartitions. Partitioned by id, nothing changed there: a new overwrite."""
    h = build(tmp_path)
    _as_dynamic_overwrite(h, "s3")
    before = version_of(h)
    with pytest.raises(RefusedError, match="changed partition"):
        cherrypick(h.table(), h.ids["s3"])
    assert version_of(h) == before

    p = tmp_path / "p"
    p.mkdir()
    d = str(p / "t")
    assert invoke("create", d, "--schema", "id long, name string", "--partition-by", "id").exit_code == 0
    ids = {}
    for n, branch in ((1, "main"), (2, "main"), (3, "dev"), (4, "main")):
        if n == 3:
            commit(load_table(d), lambda md: ref_change("dev", SnapshotRef(ids[1], "branch")))
        ids[n] = add_files(load_table(d), [_file(p, n)], branch=branch).data["snapshot_id"]
    hp = History(d, {}, {f"s{k}": v for k, v in ids.items()})
    _as_dynamic_overwrite(hp, "s3")
    out = cherrypick(hp.table(), ids[3])
    new = hp.table().metadata.current_snapshot()
    assert new is not None and new.operation == "overwrite" and out.data["new_snapshot"]["removed_data_files"] == []
    assert new.summary["source-snapshot-id"] == str(ids[3]) and "replace-partitions" not in new.summary
    assert live_files(hp.table()) == {"f1.parquet", "f2.parquet", "f3.parquet", "f4.parquet"}


def test_overwrite_pick_refuses_files_main_no_longer_has(tmp_path: Path) -> None:
    """Java's failMissingDeletePaths: every file the overwrite deletes must still be live on main.
    The manifest-list layout's deletes (what cherry-pick commits through) check it on the head."""
    h = build(tmp_path)
    t = h.table()
    md, head = t.metadata, t.metadata.current_snapshot()
    by_path = {e.data_file.file_path: e.data_file for s in md.snapshots
               for _, e in iter_entries(md, t.io, manifests_of(md, s, t.io))}
    attempt = Attempt(t.identifier, md, head, 99, md.last_sequence_number + 1, None, 1, t.metadata_folder)

    def refused(paths: list[str]) -> RefusedError:
        return RefusedError(f"not in main any more: {paths[0]}")

    layout = ManifestListLayout("c", [])
    with pytest.raises(RefusedError, match="not in main any more"):
        layout.write(t.io, attempt, Deletes([by_path[h.files["s3"]]], missing=refused))
    assert not list((tmp_path / "t" / "metadata").glob("c-m*.avro"))  # refused before any manifest is written
    # a live file: its manifest is rewritten, the file DELETED, the rest EXISTING
    index = ManifestListLayout("c0ffee", []).write(t.io, attempt, Deletes([by_path[h.files["s2"]]]))
    assert len(index.files) == 1 and index.files[0].endswith("c0ffee-m0.avro")
    listed = read_manifest_list(t.io.read(index.path), format_version=md.format_version)
    rewritten = [m for m in listed if m.manifest_path == index.files[0]]
    assert len(rewritten) == 1 and rewritten[0].deleted_files_count == 1 and rewritten[0].existing_files_count == 0
    replaced = {m.manifest_path for m in manifests_of(md, head, t.io)} - {m.manifest_path for m in listed}
    assert len(replaced) == 1  # the head manifest that held the file is replaced by its rewrite


def test_a_delete_that_can_no_longer_fast_forward_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = build(tmp_path)
    sid = h.ids["s4"]
    forge_commit(h.table(), lambda md: md.replace(snapshots=tuple(
        dataclasses.replace(s, summary={**s.summary, "operation": "delete"}) if s.snapshot_id == sid else s
        for s in md.snapshots)))
    rollback(h.table(), to_snapshot=h.ids["s2"])  # s4's parent: a fast-forward
    extra = _file(tmp_path, 5)
    real, calls = ms.plan_pick, []

    def racing(md: TableMetadata, s: int, ident: str) -> Any:
        calls.append(s)
        if len(calls) == 2:  # another writer appends to main before the fast-forward commits
            add_files(load_table(h.dir), [extra])
        return real(md, s, ident)

    monkeypatch.setattr(ms, "plan_pick", racing)
    with pytest.raises(RefusedError, match="not an append, a dynamic overwrite or a fast-forward"):
        cherrypick(h.table(), sid)
    assert live_files(h.table()) == {"f1.parquet", "f2.parquet", "f5.parquet"}  # theirs kept, nothing of ours


def test_through_a_sql_catalog(tmp_path: Path) -> None:
    """Addressed as catalog.namespace.table, the commit swaps the SQL catalog's pointer."""
    cfg = write_sql_config(tmp_path)
    env = {"ICECTL_CONFIG": str(cfg)}

    def run(*args: Any) -> Any:
        r = CliRunner().invoke(app, [str(a) for a in args], env=env)
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout) if "--json" in args else r

    run("create", "prod.db.t", "--schema", "id long, name string")
    ids = [run("add-files", "prod.db.t", _file(tmp_path, n), "--json")["snapshot_id"] for n in (1, 2)]
    doc = run("rollback", "prod.db.t", "--to-snapshot", ids[0], "--json")
    assert doc["metadata_location"].startswith(str(tmp_path / "sqlwh"))
    config = load_config(cfg)
    assert load_table("prod.db.t", config).metadata.current_snapshot_id == ids[0]
    run("fast-forward", "prod.db.t", "main", "--to", "main")  # a no-op: nothing written
    run("set-current", "prod.db.t", "--snapshot", ids[1])
    assert load_table("prod.db.t", config).metadata.current_snapshot_id == ids[1]
