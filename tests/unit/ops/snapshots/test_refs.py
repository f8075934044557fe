"""ops/refs.py: branch and tag create, replace, drop and list on a table icectl writes (no Spark;
Spark's DDL on twin tables is in tests/interop/test_refs_properties_vs_spark.py).

Hostile cases: tag/branch confusion, unknown snapshots and refs, bad retention, main, and other
writers creating, moving or dropping the same ref while a command runs: never overwritten.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icectl.catalog.hadoop import FileSystemOperations
from icectl.errors import CommitConflictError, ExitCode, IcectlError, NotFoundError, RefusedError, UsageError
from icectl.ops.snapshots.refs import RefRetention, create_ref, drop_ref, list_refs, replace_ref
from icectl.spec.snapshots import SnapshotRef
from icectl.table import Table, load_table
from unit.ops.lifecycle.test_upgrade import icectl


@pytest.fixture
def table_dir(tmp_path: Path) -> Path:
    """A v2 table with three appends (snapshots s1 <- s2 <- s3, main at s3)."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long", "--format-version", "2")
    for i in range(3):
        f = tmp_path / f"f{i}.parquet"
        pq.write_table(pa.table({"id": pa.array([i], pa.int64())}), f)
        icectl("add-files", str(d), str(f))
    return d


def snapshots(t: Table) -> list[int]:
    return [s.snapshot_id for s in sorted(t.metadata.snapshots, key=lambda s: s.sequence_number)]


def versions(d: Path) -> list[str]:
    return sorted(os.listdir(d / "metadata"))


def refs_on_disk(d: Path) -> dict[str, Any]:
    return json.loads((d / "metadata" / f"v{int((d / 'metadata' / 'version-hint.text').read_text())}"
                       ".metadata.json").read_text())["refs"]


def test_create_branch_with_retention_from_a_snapshot(table_dir: Path) -> None:
    t = load_table(str(table_dir))
    s1 = snapshots(t)[0]
    res = create_ref(t, "b", "branch", snapshot_id=s1,
                     retention=RefRetention(min_snapshots_to_keep=3, max_snapshot_age_ms=7 * 86_400_000,
                                            max_ref_age_ms=30 * 86_400_000))
    assert res.changed and res.commit.commit_attempts == 1 and res.before is None
    assert refs_on_disk(table_dir)["b"] == {"snapshot-id": s1, "type": "branch", "min-snapshots-to-keep": 3,
                                            "max-snapshot-age-ms": 604_800_000, "max-ref-age-ms": 2_592_000_000}
    assert res.title.endswith("(retain-last 3, max-snapshot-age 1w, max-ref-age 30d)")


def test_create_defaults_to_the_current_snapshot_and_from_a_ref(table_dir: Path) -> None:
    t = load_table(str(table_dir))
    s1, _, s3 = snapshots(t)
    create_ref(t, "t1", "tag", snapshot_id=s1)
    create_ref(t, "b", "branch")
    create_ref(t, "t2", "tag", ref="t1")
    refs = refs_on_disk(table_dir)
    assert refs["b"] == {"snapshot-id": s3, "type": "branch"}
    assert refs["t2"] == {"snapshot-id": s1, "type": "tag"}


def test_dry_run_writes_nothing_and_says_what_would_change(table_dir: Path) -> None:
    t = load_table(str(table_dir))
    before = versions(table_dir)
    res = create_ref(t, "t", "tag", retention=RefRetention(max_ref_age_ms=86_400_000), dry_run=True)
    assert versions(table_dir) == before
    assert res.data["would_write"] == ["a new table metadata file (the next version)"]
    assert res.data["after"]["max_ref_age_ms"] == 86_400_000 and res.data["before"] is None
    assert "metadata_location" not in res.data


@pytest.mark.parametrize("kind", ["branch", "tag"])
def test_create_of_an_existing_name_is_refused_unless_if_not_exists(table_dir: Path, kind: str) -> None:
    t = load_table(str(table_dir))
    s1, s2, _ = snapshots(t)
    create_ref(t, "x", "tag", snapshot_id=s1)  # a tag of that name blocks a branch too (Java: "Ref x already exists")
    before = versions(table_dir)
    with pytest.raises(RefusedError, match="tag x exists already") as info:
        create_ref(t, "x", kind, snapshot_id=s2)  # type: ignore[arg-type]
    assert info.value.exit_code == ExitCode.REFUSED
    res = create_ref(t, "x", kind, snapshot_id=s2, retention=RefRetention(max_ref_age_ms=5),  # type: ignore[arg-type]
                     if_not_exists=True)
    assert not res.changed and res.reason == "tag x exists already"
    assert versions(table_dir) == before and refs_on_disk(table_dir)["x"] == {"snapshot-id": s1, "type": "tag"}


def test_replace_keeps_the_retention_not_given(table_dir: Path) -> None:
    t = load_table(str(table_dir))
    s1, s2, s3 = snapshots(t)
    create_ref(t, "b", "branch", snapshot_id=s1,
               retention=RefRetention(min_snapshots_to_keep=2, max_ref_age_ms=1000))
    res = replace_ref(t, "b", "branch", snapshot_id=s2, retention=RefRetention(max_snapshot_age_ms=60_000))
    assert res.before is not None and res.before.snapshot_id == s1
    assert refs_on_disk(table_dir)["b"] == {"snapshot-id": s2, "type": "branch", "min-snapshots-to-keep": 2,
                                            "max-snapshot-age-ms": 60_000, "max-ref-age-ms": 1000}
    # CREATE OR REPLACE of an existing branch is a replace: retention kept too
    create_ref(t, "b", "branch", replace=True)
    assert refs_on_disk(table_dir)["b"]["snapshot-id"] == s3
    assert refs_on_disk(table_dir)["b"]["min-snapshots-to-keep"] == 2
    # and of a missing one a create
    create_ref(t, "t", "tag", snapshot_id=s1, replace=True)
    assert refs_on_disk(table_dir)["t"] == {"snapshot-id": s1, "type": "tag"}


def test_replace_main_moves_the_current_snapshot_and_logs_it(table_dir: Path) -> None:
    t = load_table(str(table_dir))
    s1, _, _ = snapshots(t)
    log_before = len(t.metadata.snapshot_log)
    replace_ref(t, "main", "branch", snapshot_id=s1)
    fresh = load_table(str(table_dir)).metadata
    assert fresh.current_snapshot_id == s1
    assert len(fresh.snapshot_log) == log_before + 1 and fresh.snapshot_log[-1].snapshot_id == s1


def test_replace_to_where_it_is_writes_nothing(table_dir: Path) -> None:
    t = load_table(str(table_dir))
    before = versions(table_dir)
    res = replace_ref(t, "main", "branch")
    assert not res.changed and versions(table_dir) == before and "commit_attempts" not in res.data


@pytest.mark.parametrize("call, error, words", [
    (lambda t, s: replace_ref(t, "nope", "branch", snapshot_id=s), NotFoundError, "has no branch 'nope' to replace"),
    (lambda t, s: replace_ref(t, "main", "tag", snapshot_id=s), RefusedError, "'main' is a branch, not a tag"),
    (lambda t, s: replace_ref(t, "tg", "branch", snapshot_id=s), RefusedError, "'tg' is a tag, not a branch"),
    (lambda t, s: create_ref(t, "tg", "branch", snapshot_id=s, replace=True), RefusedError, "is a tag, not a branch"),
    (lambda t, s: drop_ref(t, "tg", "branch"), RefusedError, "'tg' is a tag, not a branch: not dropped"),
    (lambda t, s: drop_ref(t, "br", "tag"), RefusedError, "'br' is a branch, not a tag: not dropped"),
    (lambda t, s: drop_ref(t, "main", "tag"), RefusedError, "'main' is a branch, not a tag"),
    (lambda t, s: drop_ref(t, "main", "branch", if_exists=True), RefusedError, "cannot drop main"),
    (lambda t, s: drop_ref(t, "nope", "tag"), NotFoundError, "has no tag 'nope'"),
    (lambda t, s: create_ref(t, "n", "branch", snapshot_id=12345), NotFoundError, "snapshot 12345 not found"),
    (lambda t, s: create_ref(t, "n", "tag", ref="nope"), NotFoundError, "no branch or tag named 'nope'"),
    (lambda t, s: create_ref(t, "n", "tag", snapshot_id=s, ref="main"), UsageError, "either --snapshot or --ref"),
    (lambda t, s: create_ref(t, "n", "tag", retention=RefRetention(min_snapshots_to_keep=1)), UsageError,
     "tags do not support --retain-last"),
    (lambda t, s: create_ref(t, "n", "tag", retention=RefRetention(max_snapshot_age_ms=1)), UsageError,
     "tags do not support --max-snapshot-age"),
    (lambda t, s: create_ref(t, "n", "branch", retention=RefRetention(min_snapshots_to_keep=0)), UsageError,
     "--retain-last must be greater than 0"),
    (lambda t, s: create_ref(t, "n", "branch", retention=RefRetention(max_ref_age_ms=-5)), UsageError,
     "--max-ref-age must be greater than 0"),
    (lambda t, s: create_ref(t, " n", "branch"), UsageError, "starts or ends with blanks"),
    (lambda t, s: create_ref(t, "n", "bookmark"), UsageError, "not 'bookmark'"),  # type: ignore[arg-type]
    (lambda t, s: create_ref(t, "n", "tag", replace=True, if_not_exists=True), UsageError, "--if-not-exists"),
])
def test_refusals_change_nothing(table_dir: Path, call: Any, error: type[IcectlError], words: str) -> None:
    t = load_table(str(table_dir))
    s1 = snapshots(t)[0]
    create_ref(t, "tg", "tag", snapshot_id=s1)
    create_ref(t, "br", "branch", snapshot_id=s1)
    before, refs = versions(table_dir), refs_on_disk(table_dir)
    with pytest.raises(error) as info:
        call(t, s1)
    assert words in info.value.one_line() and "\n" not in info.value.one_line()
    assert versions(table_dir) == before and refs_on_disk(table_dir) == refs


def test_drop_and_if_exists(table_dir: Path) -> None:
    t = load_table(str(table_dir))
    create_ref(t, "b", "branch")
    create_ref(t, "t", "tag")
    assert drop_ref(t, "b", "branch").changed
    assert drop_ref(t, "t", "tag").changed
    assert set(refs_on_disk(table_dir)) == {"main"}
    before = versions(table_dir)
    res = drop_ref(t, "t", "tag", if_exists=True)
    assert not res.changed and res.reason == "no tag t" and versions(table_dir) == before


@pytest.mark.parametrize("format_version", [2, 4])
def test_a_branch_on_an_empty_table_starts_with_an_empty_snapshot(tmp_path: Path, format_version: int) -> None:
    """Java's createBranch(name) without a current snapshot: one commit adds an empty append on the
    new branch (a manifest list, or a root on v4, listing nothing) with the retention given; main
    stays absent; a tag still has nothing to point at."""
    d = tmp_path / "e"
    icectl("create", str(d), "--schema", "id long", "--format-version", "2")
    if format_version == 4:
        icectl("upgrade", str(d), "--to", "3")
        icectl("upgrade", str(d), "--to", "4", "--yes")
    t = load_table(str(d))
    with pytest.raises(RefusedError, match="has no snapshot yet"):
        create_ref(t, "t", "tag")
    before = versions(d)
    plan = create_ref(t, "b", "branch", retention=RefRetention(min_snapshots_to_keep=3), dry_run=True)
    assert plan.changed and versions(d) == before and len(plan.would_write) == 2
    res = create_ref(t, "b", "branch", retention=RefRetention(min_snapshots_to_keep=3, max_ref_age_ms=86_400_000))
    new = sorted(set(versions(d)) - set(before))
    assert len([n for n in new if n.endswith(".metadata.json")]) == 1 and len(new) == 2  # one commit, one index
    md = load_table(str(d)).metadata
    assert set(md.refs) == {"b"} and md.current_snapshot() is None
    ref = md.refs["b"]
    assert (ref.min_snapshots_to_keep, ref.max_ref_age_ms) == (3, 86_400_000)
    (snap,) = md.snapshots
    assert snap.snapshot_id == ref.snapshot_id == res.after.snapshot_id and snap.parent_snapshot_id is None
    assert snap.summary["operation"] == "append" and snap.summary["total-data-files"] == "0"
    index = snap.root_manifest if format_version == 4 else snap.manifest_list
    assert index and os.path.exists(index)
    with pytest.raises(RefusedError, match="exists already"):
        create_ref(load_table(str(d)), "b", "branch")
    icectl("validate", str(d), expect=0)  # exit 7 on a finding at error severity


# --------------------------------------------------------------------------- concurrent writers


def test_an_empty_table_branch_never_overwrites_another_writers_work(tmp_path: Path) -> None:
    """Loaded while the table was empty: a branch of that name created meanwhile is refused (exit 6),
    a first snapshot on main meanwhile is a conflict (exit 5); neither writer's commit is lost."""
    d = tmp_path / "e"
    icectl("create", str(d), "--schema", "id long")
    stale = load_table(str(d))
    create_ref(load_table(str(d)), "b", "branch", retention=RefRetention(min_snapshots_to_keep=9))
    with pytest.raises(RefusedError, match="created meanwhile"):
        create_ref(stale, "b", "branch")
    assert load_table(str(d)).metadata.refs["b"].min_snapshots_to_keep == 9
    stale = load_table(str(d))
    f = tmp_path / "one.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), f)
    icectl("add-files", str(d), str(f))
    with pytest.raises(CommitConflictError, match="first snapshot meanwhile"):
        create_ref(stale, "c", "branch")
    md = load_table(str(d)).metadata
    assert "c" not in md.refs and md.current_snapshot() is not None and len(md.snapshots) == 2


def test_a_ref_created_meanwhile_is_not_overwritten(table_dir: Path) -> None:
    """Our table was loaded before another writer created the branch: create fails (exit 6), the
    other writer's branch stays; with --if-not-exists nothing changes either."""
    ours = load_table(str(table_dir))
    s1, _, s3 = snapshots(ours)
    create_ref(load_table(str(table_dir)), "b", "branch", snapshot_id=s1,
               retention=RefRetention(min_snapshots_to_keep=7))
    theirs = refs_on_disk(table_dir)["b"]
    with pytest.raises(RefusedError, match="created meanwhile"):
        create_ref(ours, "b", "branch", snapshot_id=s3)
    assert refs_on_disk(table_dir)["b"] == theirs
    ours = load_table(str(table_dir))
    ours.metadata = ours.metadata.replace(refs={"main": ours.metadata.refs["main"]})  # as loaded before
    res = create_ref(ours, "b", "branch", snapshot_id=s3, if_not_exists=True)
    assert not res.changed and "created meanwhile" in (res.reason or "")
    assert refs_on_disk(table_dir)["b"] == theirs


def test_a_ref_created_between_refresh_and_swap_is_not_overwritten(table_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The race inside one attempt: the other writer commits after our refresh, before our swap.
    The swap (assert-ref-snapshot-id, version file create) loses, the retry sees the ref: refused."""
    ours = load_table(str(table_dir))
    s1, _, s3 = snapshots(ours)
    real = FileSystemOperations.commit_change
    raced: list[bool] = []

    def racing(self: FileSystemOperations, current: Any, change: Any) -> Any:
        if not raced:
            raced.append(True)
            create_ref(load_table(str(table_dir)), "b", "tag", snapshot_id=s1)
        return real(self, current, change)

    monkeypatch.setattr(FileSystemOperations, "commit_change", racing)
    with pytest.raises(RefusedError, match="tag b was created meanwhile"):
        create_ref(ours, "b", "branch", snapshot_id=s3)
    assert raced and refs_on_disk(table_dir)["b"] == {"snapshot-id": s1, "type": "tag"}


def test_replace_or_drop_of_a_ref_moved_meanwhile_is_a_conflict(table_dir: Path) -> None:
    ours = load_table(str(table_dir))
    s1, s2, s3 = snapshots(ours)
    create_ref(ours, "b", "branch", snapshot_id=s1)
    stale = load_table(str(table_dir))
    replace_ref(load_table(str(table_dir)), "b", "branch", snapshot_id=s2)  # another writer moves it
    with pytest.raises(CommitConflictError, match="changed meanwhile") as info:
        replace_ref(stale, "b", "branch", snapshot_id=s3)
    assert info.value.exit_code == ExitCode.CONFLICT
    with pytest.raises(CommitConflictError, match="changed meanwhile"):
        drop_ref(stale, "b", "branch")
    assert refs_on_disk(table_dir)["b"] == {"snapshot-id": s2, "type": "branch"}


def test_unrelated_concurrent_commit_is_retried(table_dir: Path) -> None:
    """Another writer changes something else (a tag) meanwhile: our create goes on, both refs live."""
    ours = load_table(str(table_dir))
    s1, _, s3 = snapshots(ours)
    create_ref(load_table(str(table_dir)), "other", "tag", snapshot_id=s1)
    res = create_ref(ours, "b", "branch", snapshot_id=s3)
    assert res.changed
    assert set(refs_on_disk(table_dir)) == {"main", "other", "b"}


# --------------------------------------------------------------------------- list


def test_list_marks_defaults_and_main(table_dir: Path) -> None:
    t = load_table(str(table_dir))
    create_ref(t, "b", "branch", retention=RefRetention(min_snapshots_to_keep=4, max_ref_age_ms=2 * 86_400_000))
    create_ref(t, "t", "tag")
    icectl("properties", "set", str(table_dir), "history.expire.max-snapshot-age-ms=43200000",
           "history.expire.max-ref-age-ms=604800000")
    t = load_table(str(table_dir))
    res = list_refs(t)
    rows = {r["name"]: r for r in res.rows}
    assert list(rows) == ["main", "b", "t"]
    assert rows["main"]["retain_last"] == "1 (default)" and rows["main"]["max_ref_age"] == "never (main)"
    assert rows["main"]["max_snapshot_age"] == "12h (default)"
    assert rows["b"]["retain_last"] == "4" and rows["b"]["max_ref_age"] == "2d"
    assert rows["b"]["min_snapshots_to_keep"] == 4 and rows["b"]["max_snapshot_age_ms"] is None
    assert rows["t"]["retain_last"] == "-" and rows["t"]["max_ref_age"] == "1w (default)"
    assert [r["name"] for r in list_refs(t, "tag").rows] == ["t"]
    assert [r["name"] for r in list_refs(t, "branch").rows] == ["main", "b"]
    assert res.json_head()["defaults"]["history.expire.max-ref-age-ms"] == 604_800_000


def test_snapshot_ref_values_round_trip() -> None:
    assert RefRetention(max_ref_age_ms=5).applied_to(SnapshotRef(1, "tag", max_ref_age_ms=9)).max_ref_age_ms == 5
    assert RefRetention().applied_to(SnapshotRef(1, "tag", max_ref_age_ms=9)).max_ref_age_ms == 9
