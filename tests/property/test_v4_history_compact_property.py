"""A random history on an upgraded v4 table with compaction among the commits (hypothesis).

Steps: add-files (a few files: root entries; past the threshold: a new leaf), remove-files (by
path or by partition), compact (default or small target size, so leaves are also split and kept)
on ``main`` or a second branch, and expire-snapshots with a random policy. The test tracks the
live files of every branch and every snapshot from the operations it applied, never by reading
them back through the v4 reader. After every step icectl's view of each branch equals the model;
after a compaction the compacted head's root holds only live leaves, every branch's live entries
are unchanged (sequence numbers, row ids included) and running it again is a no-op; after an
expiry a data file exists iff a retained snapshot has it; after every step `validate
--all-snapshots` finds no error. At the end every snapshot still reads
and every file it reaches exists.
"""

from __future__ import annotations

import datetime
import itertools
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from support.forge import ref_change
from support.v4_reader import live_data_files

from icectl.config import Config
from icectl.ops.compact.manifests import compact
from icectl.ops.compact.plan import CompactOptions
from icectl.ops.create.table import SchemaSource, create
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.files.add_files import add_files
from icectl.ops.files.remove_files import remove_files
from icectl.ops.inspect.tree import tree_rows
from icectl.ops.inspect.views import file_rows
from icectl.ops.lifecycle.upgrade import upgrade
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.spec.snapshots import SnapshotRef
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.table.scan import iter_entries, manifests_of
from icectl.validate import validate_table

_names = itertools.count()
TARGETS = (None, 6 * 1024, 12 * 1024)  # the default 8 MiB, and sizes a few dozen entries fill

STEP = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["main", "dev"]), st.integers(1, 6), st.integers(1, 3)),
    st.tuples(st.just("remove"), st.sampled_from(["main", "dev"]), st.integers(0, 10_000), st.integers(1, 3)),
    st.tuples(st.just("where"), st.sampled_from(["main", "dev"]), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("compact"), st.sampled_from(["main", "dev"]), st.integers(0, len(TARGETS) - 1), st.just(0)),
    st.tuples(st.just("expire"), st.just(""), st.integers(0, 10_000), st.integers(1, 3)),
)


def _parquet(d: Path, day: int, rows: int) -> str:
    n = next(_names)
    path = d / f"h{n}.parquet"
    ts = datetime.datetime(2024, 3, day, 1, tzinfo=datetime.timezone.utc)
    pq.write_table(pa.table({"id": pa.array(range(n * 100, n * 100 + rows), pa.int64()),
                             "ts": pa.array([ts] * rows, pa.timestamp("us", tz="UTC"))}), path)
    return str(path)


def _live_entries(d: Path, ref: str) -> Counter[tuple[Any, ...]]:
    t = load_table(str(d))
    snap = t.metadata.snapshot_for_ref(ref)
    ms = manifests_of(t.metadata, snap, t.io)
    return Counter((e.data_file.file_path, int(e.data_file.content), e.snapshot_id, e.sequence_number,
                    e.file_sequence_number, e.data_file.partition, e.data_file.record_count,
                    e.data_file.first_row_id) for _, e in iter_entries(t.metadata, t.io, ms, live_only=True))


# 25 examples take about 43 s on 2 cores; CI runs 8 (see tests/README.md, "Hypothesis profiles").
@settings(max_examples=8 if os.environ.get("CI") else 25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=10, max_size=30))
def test_random_history_with_compaction(tmp_path_factory: pytest.TempPathFactory,
                                        steps: list[tuple[str, str, int, int]]) -> None:
    run_history(tmp_path_factory, steps)


# One example of 150-200 commits takes ~28 s on 2 cores; CI runs one of 100-120 (derandomized), locally
# two of 150-200.
LONG = (100, 120) if os.environ.get("CI") else (150, 200)


@settings(max_examples=1 if os.environ.get("CI") else 2, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=LONG[0], max_size=LONG[1]))
def test_long_random_history_with_compaction(tmp_path_factory: pytest.TempPathFactory,
                                             steps: list[tuple[str, str, int, int]]) -> None:
    """Hundreds of commits on one table (the issue's "long history")."""
    run_history(tmp_path_factory, steps)


def run_history(tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str, int, int]]) -> None:
    d = tmp_path_factory.mktemp("histc") / "t"
    create(str(d), SchemaSource("id long, ts timestamptz"), config=Config(catalogs={}), io=FileIO(),
           partition_by="days(ts)", properties={V4_ROOT_MAX_ADDED_FILES.name: "3"}, format_version=2)
    src = d / "data"  # inside the table: expire deletes only the table's own files
    src.mkdir(parents=True, exist_ok=True)
    first = [_parquet(src, 1, 3), _parquet(src, 2, 4)]
    add_files(load_table(str(d)), first)
    t = load_table(str(d))
    head = t.metadata.current_snapshot_id
    assert head is not None
    commit(t, lambda md: ref_change("dev", SnapshotRef(head, "branch")))
    upgrade(load_table(str(d)), 4)
    day_of = dict(zip(first, (1, 2), strict=True))
    model = {"main": set(first), "dev": set(first)}
    added = set(first)
    snap_model: dict[int, frozenset[str]] = {head: frozenset(first)}

    def record() -> None:
        refs = load_table(str(d)).metadata.refs
        for name, files in model.items():
            snap_model[refs[name].snapshot_id] = frozenset(files)

    record()
    compactions = 0
    for op, branch, a, b in steps:
        t = load_table(str(d))
        live = sorted(model.get(branch, ()))
        if op == "add":
            paths = [_parquet(src, b, 2) for _ in range(a)]
            day_of.update(dict.fromkeys(paths, b))
            add_files(t, paths, branch=branch)
            model[branch] |= set(paths)
            added |= set(paths)
        elif op == "remove" and live:
            victims = {live[(a + i * 7) % len(live)] for i in range(b)}
            remove_files(t, sorted(victims), branch=branch)
            model[branch] -= victims
        elif op == "where":
            gone = {p for p in model[branch] if day_of[p] == a}
            out = remove_files(t, where=[f"ts_day=2024-03-0{a}"], branch=branch)
            assert {f["file_path"] for f in out.data["files"]} == gone
            model[branch] -= gone
        elif op == "compact":
            options = CompactOptions(branch=branch, target_size=TARGETS[a])
            before = {name: _live_entries(d, name) for name in model}
            out = compact(t, options)
            assert out.exit_code == 0, out.data
            compactions += "snapshot_id" in out.data
            for name in model:
                assert _live_entries(d, name) == before[name], name
            rows = tree_rows(load_table(str(d)), ref=branch).rows
            assert all(r["content_type"] in ("DATA_MANIFEST", "DELETE_MANIFEST") and r["status"] != "DELETED"
                       for r in rows), rows
            again = compact(load_table(str(d)), options)
            assert "snapshot_id" not in again.data, again.data
        elif op == "expire":
            by_time = sorted(t.metadata.snapshots, key=lambda s: s.timestamp_ms)
            out = expire_snapshots(t, ExpirePolicy(older_than_ms=by_time[a % len(by_time)].timestamp_ms,
                                                   retain_last=b))
            assert out.exit_code == 0, out.data
            md = load_table(str(d)).metadata
            keep = set().union(*(snap_model[s.snapshot_id] for s in md.snapshots))
            assert {p for p in added if os.path.exists(p)} == keep
        if op != "expire":
            record()
        note(f"{op} {branch} {a} {b}")
        t = load_table(str(d))
        for name, expected in model.items():
            assert {r["file_path"] for r in file_rows(t, ref=name).rows} == expected, (name, op)
            # The independent reader of the merged spec (no icectl code) sees the same live files.
            head = t.metadata.refs[name].snapshot_id
            assert set(live_data_files(t.metadata_location, head)) == expected, (name, op)
        checked = validate_table(t, all_snapshots=True)
        assert checked.errors == 0, [(f.rule, f.message) for f in checked.findings if str(f.severity) == "error"]
    print(f"[history+compact] {len(steps)} steps, {compactions} compactions, "
          f"{len(load_table(str(d)).metadata.snapshots)} snapshots")
    t = load_table(str(d))
    for s in t.metadata.snapshots:
        ms = manifests_of(t.metadata, s, t.io)
        reached = {m.manifest_path for m in ms}
        entries = [e for _, e in iter_entries(t.metadata, t.io, ms, live_only=True)]
        reached |= {e.data_file.file_path for e in entries}
        assert all(os.path.exists(p) for p in reached), s.snapshot_id
        if s.snapshot_id in snap_model:
            assert {e.data_file.file_path for e in entries} == snap_model[s.snapshot_id]
