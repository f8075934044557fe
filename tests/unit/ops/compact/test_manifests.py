"""`icectl compact` on tables icectl writes itself (fast, no Spark): rules, options, refusals,
row ids, concurrency and the CLI. Spark judges the result in test_compact_vs_spark.py."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.forge import ref_change
from typer.testing import CliRunner

from icectl.catalog.operations import CommitStateUnknownError
from icectl.cli.app import app
from icectl.config import parse_config
from icectl.errors import CommitConflictError, IcectlError, UsageError
from icectl.ops.compact import plan as compact_plan
from icectl.ops.compact.manifests import CompactPlan, compact
from icectl.ops.compact.plan import CompactOptions
from icectl.ops.create.table import SchemaSource, create
from icectl.ops.files.add_files import add_files
from icectl.spec.manifest import ManifestContent
from icectl.spec.snapshots import SnapshotRef
from icectl.storage import FileIO
from icectl.table import load_table, snapshot_writer
from icectl.table.commit import commit
from icectl.table.scan import iter_entries, manifests_of

runner = CliRunner()


def _parquet(path: Path, i: int, part: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "part": pa.array([part], pa.int32()),
                             "payload": [f"row {i} " + "x" * (i % 13)]}), path)
    return str(path)


def _append(table_dir: str, src: Path, i: int, part: int, branch: str = "main") -> None:
    add_files(load_table(table_dir), [_parquet(src / f"{branch}-{i:04d}.parquet", i, part)], branch=branch,
              create_branch=True)


def make_table(tmp_path: Path, n: int, *, fv: int = 2, partition_by: str = "", parts: int = 1,
               name: str = "t") -> str:
    """``n`` single-file appends: one manifest each (add-files never merges)."""
    d = str(tmp_path / "wh" / "db" / name)
    create(d, SchemaSource(ddl="id long, part int, payload string"), config=parse_config({}), io=FileIO(),
           partition_by=partition_by, format_version=fv)
    for i in range(n):
        _append(d, tmp_path / "src" / name, i, (i * 5) % parts)
    return d


def live(table_dir: str, ref: str = "main") -> list[tuple[Any, ...]]:
    """Every live entry as readers see it: snapshot id, sequence numbers and all data_file fields."""
    t = load_table(table_dir)
    snap = t.metadata.snapshot_for_ref(ref)
    ms = manifests_of(t.metadata, snap, t.io)
    return sorted(((e.snapshot_id, e.sequence_number, e.file_sequence_number, repr(e.data_file))
                   for _, e in iter_entries(t.metadata, t.io, ms, live_only=True)), key=repr)


def head_manifests(table_dir: str, ref: str = "main") -> list[Any]:
    t = load_table(table_dir)
    return manifests_of(t.metadata, t.metadata.snapshot_for_ref(ref), t.io)


def metadata_files(table_dir: str) -> set[str]:
    return {p.name for p in (Path(table_dir) / "metadata").iterdir()}


# --------------------------------------------------------------------------- rules


def test_merges_keeps_every_entry_and_is_idempotent(tmp_path: Path) -> None:
    d = make_table(tmp_path, 12)
    before, parent = live(d), load_table(d).metadata.current_snapshot()
    old = head_manifests(d)
    assert len(old) == 12
    result = compact(load_table(d), CompactOptions())
    assert result.exit_code == 0
    new = head_manifests(d)
    assert len(new) == 1 and new[0].added_snapshot_id == result.data["snapshot_id"]
    assert new[0].existing_files_count == 12 and new[0].added_files_count == 0
    assert live(d) == before
    snap = load_table(d).metadata.current_snapshot()
    assert snap.parent_snapshot_id == parent.snapshot_id
    s = snap.summary
    assert (s["operation"], s["manifests-created"], s["manifests-kept"], s["manifests-replaced"],
            s["entries-processed"]) == ("replace", "1", "0", "12", "12")
    assert {k: v for k, v in s.items() if k.startswith("total-")} == \
        {k: v for k, v in parent.summary.items() if k.startswith("total-")}
    assert all(Path(m.manifest_path).exists() for m in old)  # older snapshots still use them
    # Nothing left to improve: no second commit.
    versions = metadata_files(d)
    again = compact(load_table(d), CompactOptions())
    assert again.data["manifests_replaced"] == 0 and "snapshot_id" not in again.data
    assert metadata_files(d) == versions


def test_target_size_rolls_clustered_manifests(tmp_path: Path) -> None:
    d = make_table(tmp_path, 60, partition_by="part", parts=6)
    before = live(d)
    target = 8 * 1024  # a header of ~7 KB plus ~25 entries
    result = compact(load_table(d), CompactOptions(target_size=target))
    new = head_manifests(d)
    sizes = [m.manifest_length for m in new]
    assert len(new) == result.data["manifests_created"] >= 2
    assert all(0.6 * target <= s <= 1.15 * target for s in sizes[:-1]) and sizes[-1] <= 1.15 * target, sizes
    assert live(d) == before
    # Clustered: each manifest covers a range of part values, ascending, not overlapping the next.
    t = load_table(d)
    ptype = t.metadata.spec().partition_type(t.metadata.schema())
    bounds = [m.partitions[0].decoded_bounds(ptype.fields[0].field_type) for m in new]
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(bounds)), bounds
    assert compact(load_table(d), CompactOptions(target_size=target)).data["manifests_replaced"] == 0


def test_sort_by_puts_the_chosen_field_first(tmp_path: Path) -> None:
    d = str(tmp_path / "wh" / "db" / "s")
    create(d, SchemaSource(ddl="id long, part int, payload string"), config=parse_config({}), io=FileIO(),
           partition_by="part, bucket(4, id)", format_version=2)
    for i in range(16):
        _append(d, tmp_path / "src", i, i % 2)
    compact(load_table(d), CompactOptions(sort_by=("id_bucket",)))
    t = load_table(d)
    (m,) = head_manifests(d)
    order = [e.data_file.partition for _, e in iter_entries(t.metadata, t.io, [m])]
    assert [p[1] for p in order] == sorted(p[1] for p in order)  # bucket first
    assert [p[0] for p in order] != sorted(p[0] for p in order)
    with pytest.raises(UsageError, match="nope"):
        compact(load_table(d), CompactOptions(sort_by=("nope",)))


def test_v3_row_ids_are_kept_and_no_range_is_wasted(tmp_path: Path) -> None:
    d = make_table(tmp_path, 8, fv=3)
    md = load_table(d).metadata
    next_row_id = md.next_row_id
    before = live(d)
    t = load_table(d)
    ms = manifests_of(t.metadata, t.metadata.current_snapshot(), t.io)
    ids = sorted(e.data_file.first_row_id for _, e in iter_entries(t.metadata, t.io, ms))
    assert ids == list(range(8))  # one row per file: ids 0..7, inherited from each manifest
    compact(load_table(d), CompactOptions())
    t = load_table(d)
    snap = t.metadata.current_snapshot()
    assert t.metadata.next_row_id == next_row_id
    assert snap.first_row_id == next_row_id and snap.added_rows == 0
    (m,) = head_manifests(d)
    assert m.first_row_id == 0  # explicit: the smallest of its entries', no fresh range
    assert live(d) == before


def test_min_manifests_content_and_spec_filters(tmp_path: Path) -> None:
    d = make_table(tmp_path, 5)
    r = compact(load_table(d), CompactOptions(min_manifests=6))
    assert r.data["manifests_replaced"] == 0 and "fewer than --min-manifests 6" in r.data["groups"][0]["reason"]
    assert compact(load_table(d), CompactOptions(content="deletes")).data["groups"] == []
    assert compact(load_table(d), CompactOptions(spec_id=0, content="data", min_manifests=5)) \
        .data["manifests_replaced"] == 5
    with pytest.raises(IcectlError, match="no partition spec 7"):
        compact(load_table(d), CompactOptions(spec_id=7))


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    d = make_table(tmp_path, 4)
    files = metadata_files(d)
    r = compact(load_table(d), CompactOptions(), dry_run=True)
    assert metadata_files(d) == files
    g = r.data["groups"][0]
    assert (g["action"], g["manifests_in"], g["manifests_out"], len(g["replaced"])) == ("rewrite", 4, 1, 4)
    assert r.data["would_delete"] == []
    assert len(r.data["would_write"]) == 3  # a manifest, the manifest list, the metadata file


def test_branch_is_compacted_alone(tmp_path: Path) -> None:
    d = make_table(tmp_path, 3)
    for i in range(4):
        _append(d, tmp_path / "src", 100 + i, 0, branch="dev")
    main_before, dev_before = head_manifests(d), live(d, "dev")
    compact(load_table(d), CompactOptions(branch="dev"))
    assert head_manifests(d) == main_before
    assert len(head_manifests(d, "dev")) == 1 and live(d, "dev") == dev_before


def test_empty_table_and_refusals(tmp_path: Path) -> None:
    d = str(tmp_path / "e")
    create(d, SchemaSource(ddl="id long"), config=parse_config({}), io=FileIO())
    assert compact(load_table(d), CompactOptions()).title.startswith("Nothing to compact")
    d = make_table(tmp_path, 2)
    t = load_table(d)
    sid = t.metadata.current_snapshot().snapshot_id
    commit(t, lambda md: ref_change("v1", SnapshotRef(sid, "tag")))
    res = runner.invoke(app, ["compact", d, "--branch", "v1"])
    assert res.exit_code == 6 and "is a tag" in res.stderr  # one branch_head for every writer: a tag is refused
    res = runner.invoke(app, ["compact", d, "--branch", "nope"])
    assert res.exit_code == 3 and "has no branch 'nope'" in res.stderr
    for args in (["--content", "dvs"], ["--target-size", "lots"], ["--min-manifests", "0"], ["--sort-by", "x"]):
        res = runner.invoke(app, ["compact", d, *args])
        assert res.exit_code == 2, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1


def test_a_bad_rewrite_is_never_committed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = make_table(tmp_path, 4)
    files, before = metadata_files(d), live(d)
    original = compact_plan.ManifestShape.write
    monkeypatch.setattr(compact_plan.ManifestShape, "write", lambda self, entries: original(self, list(entries)[1:]))
    with pytest.raises(IcectlError, match=r"does not hold what was written|same live files"):
        compact(load_table(d), CompactOptions())
    assert metadata_files(d) == files and live(d) == before


# --------------------------------------------------------------------------- concurrency


def test_concurrent_append_is_reapplied(tmp_path: Path) -> None:
    d = make_table(tmp_path, 5)

    def other_writer(plan: CompactPlan) -> None:
        _append(d, tmp_path / "src", 99, 0)

    r = compact(load_table(d), CompactOptions(), on_planned=other_writer)
    t = load_table(d)
    snap = t.metadata.current_snapshot()
    other = t.metadata.snapshot_by_id(snap.parent_snapshot_id)
    assert r.data["reapplied_on"] == [other.snapshot_id] and r.data["commit_attempts"] == 1
    ms = head_manifests(d)
    assert len(ms) == 2 and ms[1].added_snapshot_id == other.snapshot_id  # new first, then the kept one
    assert len(live(d)) == 6
    assert snap.summary["total-data-files"] == "6" and snap.summary["manifests-kept"] == "1"


def test_concurrent_rewrite_forces_one_new_plan_then_gives_up(tmp_path: Path) -> None:
    d = make_table(tmp_path, 5)
    calls: list[int] = []

    def rival(plan: CompactPlan) -> None:
        calls.append(1)
        if len(calls) == 1:  # another compaction replaces the manifests being replaced
            compact(load_table(d), CompactOptions())

    r = compact(load_table(d), CompactOptions(), on_planned=rival)
    assert r.data["replanned"] is True and r.data["manifests_replaced"] == 0  # the rival did the work
    assert len(head_manifests(d)) == 1

    d2 = make_table(tmp_path, 4, name="t2")
    rounds: list[int] = []

    def relentless(plan: CompactPlan) -> None:
        rounds.append(1)
        compact(load_table(d2), CompactOptions())
        _append(d2, tmp_path / "src", 200 + len(rounds), 0)  # so the next plan has work again

    with pytest.raises(CommitConflictError) as info:
        compact(load_table(d2), CompactOptions(), on_planned=relentless)
    assert info.value.exit_code == 5 and len(rounds) == 2
    # Every manifest in the metadata directory is listed by a snapshot: nothing of ours is left.
    t = load_table(d2)
    listed = {Path(m.manifest_path).name for s in t.metadata.snapshots for m in manifests_of(t.metadata, s, t.io)}
    lists = {Path(s.manifest_list).name for s in t.metadata.snapshots}
    assert {f for f in metadata_files(d2) if f.endswith(".avro")} == listed | lists


# --------------------------------------------------------------------------- CLI


def test_cli_json_and_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_table(tmp_path, 3, name="a")
    make_table(tmp_path, 1, name="b")
    monkeypatch.setenv("ICECTL_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["compact", "db.a", "--dry-run", "--json"])
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["view"] == "compact" and doc["dry_run"] is True and doc["manifests_replaced"] == 3
    res = runner.invoke(app, ["compact", "--all", "--json", "--target-size", "1MiB"])
    assert res.exit_code == 0, res.stderr
    docs = sorted((json.loads(line) for line in res.stdout.splitlines()), key=lambda x: x["table"])
    assert [(x["table"].split(".")[-1], x["manifests_replaced"]) for x in docs] == [("a", 3), ("b", 0)]
    assert docs[0]["target_size_bytes"] == 1024 * 1024
    ms = head_manifests(str(tmp_path / "wh" / "db" / "a"))
    assert len(ms) == 1 and ms[0].content == ManifestContent.DATA


def test_unknown_commit_state_keeps_the_new_manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = make_table(tmp_path, 3)
    files = metadata_files(d)

    def lost_answer(table: Any, build: Any, **kw: Any) -> Any:
        build(table.metadata)  # writes the manifest list, as a real attempt would
        raise CommitStateUnknownError("the swap may or may not have happened", location="v9.metadata.json")

    monkeypatch.setattr(snapshot_writer, "commit", lost_answer)
    with pytest.raises(CommitStateUnknownError):
        compact(load_table(d), CompactOptions())
    # The commit may have happened: deleting its manifests or manifest list could break the table.
    new = metadata_files(d) - files
    assert len(new) == 2 and any(n.startswith("snap-") for n in new)


def test_compacted_v3_table_validates_clean(tmp_path: Path) -> None:
    """Clustered manifests whose files all keep their row ids hand out no ids: their list counts
    overlap, their real row-id ranges (files with a null first_row_id) are empty."""
    from icectl.validate import validate_table

    d = make_table(tmp_path, 24, fv=3, partition_by="part", parts=3)
    compact(load_table(d), CompactOptions(target_size=8 * 1024))
    assert len(head_manifests(d)) >= 2  # several clustered manifests, each with an explicit first_row_id
    result = validate_table(load_table(d), all_snapshots=True)
    assert result.errors == 0, [f.message for f in result.findings]
