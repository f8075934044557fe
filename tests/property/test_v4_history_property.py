"""A random history of single-file commits on an upgraded v4 table (hypothesis).

Each step is an add-files (a few files: root entries; past the threshold: a new leaf), a
remove-files (by path or by partition) on ``main`` or a second branch, or an expire-snapshots
with a random policy (cutoff at a random snapshot's commit time, retain-last 1-3). The test
tracks the live files of every branch and of every snapshot itself, from the operations it
applied, never by reading them back through the v4 reader; after every step icectl's view of
each branch must equal the model; after an expiry every data file a retained snapshot has (by
the model) exists, every other data file the test added is deleted, and the roots on disk are
exactly the retained v4 snapshots' roots. At the end every snapshot must still read and every
file it reaches must exist. (Compaction, issue 7 part 4, joins this history when it exists.)
"""

from __future__ import annotations

import datetime
import itertools
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from support.forge import ref_change
from support.v4_reader import live_data_files

from icectl.config import Config
from icectl.ops.create.table import SchemaSource, create
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.files.add_files import add_files
from icectl.ops.files.remove_files import remove_files
from icectl.ops.inspect.views import file_rows
from icectl.ops.lifecycle.upgrade import upgrade
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.spec.snapshots import SnapshotRef
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.table.scan import iter_entries, manifests_of

_counter = itertools.count()


def _parquet(d: Path, day: int, rows: int) -> str:
    n = next(_counter)
    path = d / f"p{n}.parquet"
    ts = datetime.datetime(2024, 3, day, 1, tzinfo=datetime.timezone.utc)
    pq.write_table(pa.table({"id": pa.array(range(n * 100, n * 100 + rows), pa.int64()),
                             "ts": pa.array([ts] * rows, pa.timestamp("us", tz="UTC"))}), path)
    return str(path)


STEP = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["main", "dev"]), st.integers(1, 5), st.integers(1, 3)),
    st.tuples(st.just("remove"), st.sampled_from(["main", "dev"]), st.integers(0, 10_000), st.integers(1, 3)),
    st.tuples(st.just("where"), st.sampled_from(["main", "dev"]), st.integers(1, 3), st.just(0)),
    st.tuples(st.just("expire"), st.just(""), st.integers(0, 10_000), st.integers(1, 3)),
)


def _check_expired(d: Path, snap_model: dict[int, frozenset[str]], added: set[str]) -> None:
    """Data files: present iff a retained snapshot has them (by the model); roots: exactly the
    retained snapshots'."""
    md = load_table(str(d)).metadata
    retained = {s.snapshot_id for s in md.snapshots}
    assert retained <= snap_model.keys()
    keep = set().union(*(snap_model[i] for i in retained))
    assert {p for p in added if os.path.exists(p)} == keep
    roots = {os.path.join(d, "metadata", n) for n in os.listdir(d / "metadata") if n.startswith("root-")}
    assert roots == {s.root_manifest for s in md.snapshots if s.root_manifest}


@settings(max_examples=12 if os.environ.get("CI") else 20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=10, max_size=25))
def test_random_single_file_commits(tmp_path_factory: pytest.TempPathFactory,
                                    steps: list[tuple[str, str, int, int]]) -> None:
    d = tmp_path_factory.mktemp("hist") / "t"
    create(str(d), SchemaSource("id long, ts timestamptz"), config=Config(catalogs={}), io=FileIO(),
           partition_by="days(ts)", properties={V4_ROOT_MAX_ADDED_FILES.name: "3"}, format_version=2)
    base = d / "data"  # inside the table: expire deletes only the table's own files
    base.mkdir(parents=True, exist_ok=True)
    t = load_table(str(d))
    first = [_parquet(base, 1, 3), _parquet(base, 2, 4)]
    add_files(t, first)
    t = load_table(str(d))
    head = t.metadata.current_snapshot_id
    assert head is not None
    commit(t, lambda md: ref_change("dev", SnapshotRef(head, "branch")))
    upgrade(load_table(str(d)), 4)
    day_of = {p: day for p, day in zip(first, (1, 2), strict=True)}
    model = {"main": set(first), "dev": set(first)}
    added = set(first)  # every data file the test put in the table
    snap_model: dict[int, frozenset[str]] = {}  # snapshot id -> its live data files

    def record() -> None:
        refs = load_table(str(d)).metadata.refs
        for name, files in model.items():
            snap_model[refs[name].snapshot_id] = frozenset(files)

    snap_model[head] = frozenset(first)
    record()
    for op, branch, a, b in steps:
        t = load_table(str(d))
        live = sorted(model.get(branch, ()))
        if op == "add":
            paths = [_parquet(base, b, 2) for _ in range(a)]
            day_of.update(dict.fromkeys(paths, b))
            add_files(t, paths, branch=branch)
            model[branch] |= set(paths)
            added |= set(paths)
        elif op == "remove" and live:
            victims = {live[(a + i * 7) % len(live)] for i in range(b)}
            remove_files(t, sorted(victims), branch=branch)
            model[branch] -= victims
        elif op == "where":
            out = remove_files(t, where=[f"ts_day=2024-03-0{a}"], branch=branch)
            gone = {p for p in model[branch] if day_of[p] == a}
            assert {f["file_path"] for f in out.data["files"]} == gone
            model[branch] -= gone
        elif op == "expire":
            by_time = sorted(t.metadata.snapshots, key=lambda s: s.timestamp_ms)
            cutoff = by_time[a % len(by_time)].timestamp_ms
            out = expire_snapshots(t, ExpirePolicy(older_than_ms=cutoff, retain_last=b))
            assert out.exit_code == 0, out.data
            _check_expired(d, snap_model, added)
        if op != "expire":
            record()
        note(f"{op} {branch} {a} {b}")
        t = load_table(str(d))
        for name, expected in model.items():
            got = {r["file_path"] for r in file_rows(t, ref=name).rows}
            assert got == expected, (name, op)
            # The independent reader of the merged spec (no icectl code) sees the same live files.
            assert set(live_data_files(t.metadata_location, t.metadata.refs[name].snapshot_id)) == expected
    # Every snapshot still reads and reaches only files that exist.
    print(f"[history] {len(steps)} steps, {len(load_table(str(d)).metadata.snapshots)} snapshots, "
          f"live main={len(model['main'])} dev={len(model['dev'])}")
    t = load_table(str(d))
    for s in t.metadata.snapshots:
        ms = manifests_of(t.metadata, s, t.io)
        reached = {m.manifest_path for m in ms}
        reached |= {e.data_file.file_path for _, e in iter_entries(t.metadata, t.io, ms, live_only=True)}
        assert all(os.path.exists(p) for p in reached), s.snapshot_id
