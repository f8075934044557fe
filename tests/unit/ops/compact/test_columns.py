"""Compaction planned over the Arrow form (icectl.ops.compact.columns) is the plan the entry path
makes: the same clustering order (every partition type, nulls, NaN, -0.0 beside 0.0), the same
bins with the same entries, on icectl's own manifests and on Spark's."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from icectl import processes
from icectl.codec.manifest_arrow import entries_from_table, manifest_table
from icectl.codec.manifest_reader import read_manifest
from icectl.codec.manifest_writer import write_manifest
from icectl.ops.compact import distribute
from icectl.ops.compact import manifests as compact_manifests
from icectl.ops.compact import run as compact_run
from icectl.ops.compact.columns import cluster_rows, existing_entries
from icectl.ops.compact.manifests import plan_compaction, write_compaction
from icectl.ops.compact.plan import CompactOptions, GroupPlan, cluster, sort_fields
from icectl.spec.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus
from icectl.table import load_table
from icectl.table.layout.manifest_list import as_existing

from ...codec.test_manifest_writer import PTYPE, SCHEMA, SPEC, data_file, partition
from .test_manifests import make_table


def _entries(version: int) -> list[ManifestEntry]:
    """Entries whose partitions repeat (every type, nulls, NaN), with ties only the stable order
    decides, and two tuples that differ only in -0.0 / 0.0 (equal keys, distinct encodings)."""
    out = []
    for i in range(60):
        part = partition(i % 7)
        if i >= 50:  # -0.0 and 0.0 in the double field, the rest equal
            part = (*part[:8], [-0.0, 0.0][i % 2], *part[9:])
        seq = None if version == 1 else [3, 1, 2][i % 3]
        f = data_file(i, partition=part, file_path=f"s3://b/t/data/{['b', 'a', 'c'][i % 3]}{i % 4}.parquet")
        out.append(ManifestEntry(ManifestEntryStatus((i % 5 == 0) * 2), 7, seq, seq, f))
    return out


@pytest.mark.parametrize("version", [1, 2, 3])
def test_rows_cluster_as_entries_do(version: int) -> None:
    entries = _entries(version)
    result = write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=version,
                            content=ManifestContent.DATA, snapshot_id=None)
    m = result.to_manifest_file("m.avro", len(result.data), SPEC.spec_id, 99, 0 if version == 1 else 4,
                                first_row_id=1000 if version >= 3 else None)
    table = manifest_table(result.data, manifest=m, partition_type=PTYPE, format_version=version)
    rows = table.filter(pc.not_equal(table.column("status"), 2))
    assert 0 < rows.num_rows < table.num_rows
    for first in ([], ["score"], ["region", "flag"], ["key"], ["amount"], ["payload", "tag"], ["t", "f"]):
        positions, _ = sort_fields(SPEC, first)
        got = existing_entries(cluster_rows(rows, positions, PTYPE), PTYPE)
        want = [as_existing(e) for e in cluster(entries_from_table(rows, partition_type=PTYPE), positions)]
        assert [repr(e) for e in got] == [repr(e) for e in want], first  # repr: NaN != NaN
    # the order really depends on the partition: clustering moved rows
    assert [e.data_file.file_path for e in got] != [e.data_file.file_path
                                                     for e in entries_from_table(rows, partition_type=PTYPE)]


def _shape(g: GroupPlan) -> dict[str, Any]:
    return {"spec": g.spec_id, "content": int(g.content), "rewrite": g.rewrite, "reason": g.reason,
            "live": g.live_entries, "deleted": g.deleted_entries, "per_manifest": g.live_per_manifest,
            "sort_by": g.sort_by}


def _bins(g: GroupPlan, ptype: Any) -> list[tuple[int, list[str]]]:
    out = []
    for b in g.bins:
        entries = existing_entries(b.rows, ptype) if b.rows is not None else b.entries
        out.append((b.estimated_bytes, [repr(e) for e in entries]))
    return out


@pytest.mark.parametrize(("kind", "options"), [
    ("v1_unpart", CompactOptions(min_manifests=1)),
    ("v2_part", CompactOptions(min_manifests=1, target_size=4096)),
    ("v2_part", CompactOptions(min_manifests=1, target_size=4096, sort_by=("id_bucket",))),
    ("v3_dv", CompactOptions(min_manifests=1, target_size=4096)),
    ("many_snaps", CompactOptions(min_manifests=1, target_size=2048)),
])
def test_plan_over_rows_is_the_plan_over_entries(spark_tables: Any, kind: str, options: CompactOptions,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    table = load_table(str(Path(spark_tables[kind].location)))
    over_rows = plan_compaction(table, options)
    rewritten = [g for g in over_rows.groups if g.rewrite]
    assert rewritten and all(g.rows is not None for g in rewritten)
    with monkeypatch.context() as mp:
        mp.setattr(compact_manifests, "read_live_rows", lambda *a: False)
        over_entries = plan_compaction(table, options)
    assert all(g.rows is None for g in over_entries.groups)
    md = table.metadata
    assert [_shape(g) for g in over_rows.groups] == [_shape(g) for g in over_entries.groups]
    for a, b in zip(over_rows.groups, over_entries.groups, strict=True):
        ptype = md.partition_type(a.spec_id)
        assert _bins(a, ptype) == _bins(b, ptype)
    assert sum(len(g.bins) for g in rewritten) >= 1
    assert dataclasses.replace(over_rows, groups=[], snapshot_id=0, commit_id="") == \
        dataclasses.replace(over_entries, groups=[], snapshot_id=0, commit_id="")


def _written(table: Any, plan: Any) -> list[list[str]]:
    """The plan's new manifests, written (not committed): each one's entries in file order."""
    md = table.metadata
    return [[repr(e) for e in read_manifest(table.io.read(w.manifest.manifest_path), manifest=w.manifest,
                                            partition_type=md.partition_type(w.group.spec_id),
                                            format_version=md.format_version)]
            for w in write_compaction(table, plan)]


def test_bins_encoded_in_worker_processes_are_the_bins_encoded_here(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    table = load_table(make_table(tmp_path, 24, partition_by="part", parts=5))
    # a target just above a manifest's header: 24 one-entry manifests roll into 2 bins
    options = CompactOptions(min_manifests=1, target_size=7600)
    monkeypatch.setenv("ICECTL_DECODE_PROCESSES", "0")  # no pool: threads
    here = _written(table, plan_compaction(table, options))
    used: list[bool] = []
    original = distribute.write_in_processes

    def spy(*args: Any, **kwargs: Any) -> Any:
        got = original(*args, **kwargs)
        used.append(got is not None)
        return got

    monkeypatch.setenv("ICECTL_DECODE_PROCESSES", "2")
    monkeypatch.setattr(distribute, "PROCESS_MIN_ENTRIES", 0)
    monkeypatch.setattr(compact_run, "write_in_processes", spy)
    try:
        there = _written(table, plan_compaction(table, options))
    finally:
        processes.shutdown()
    assert used == [True] and len(here) >= 2
    assert there == here
