"""`icectl health`: the figures of the current snapshot's manifests and files, each manifest read once.

One pass over the snapshot's manifests gives the data and delete file figures, and the entries of
the manifest groups that `icectl compact` would read: which groups those are is decided from the
manifest list alone (:func:`icectl.ops.compact.plan.decide`), and only their live entries are kept,
as compact keeps them, so "how many manifests compact would merge" is compact's own plan
(cluster, roll, improves) without a second read of any manifest.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from icectl.ops.compact.manifests import compact
from icectl.ops.compact.plan import (
    CompactOptions,
    GroupPlan,
    ManifestShape,
    cluster,
    decide,
    group_manifests,
    improves,
    roll,
    sort_fields,
    table_target_size,
)
from icectl.ops.inspect.files import PartitionMapper
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.table import Table
from icectl.table.commit import new_snapshot_id
from icectl.table.layout.manifest_list import as_existing
from icectl.table.scan import iter_entries

# The data_file fields the figures need (manifests compact would read are decoded whole).
FIGURE_FIELDS = frozenset({"content", "file_path", "file_format", "partition", "record_count", "file_size_in_bytes"})
TOP_PARTITIONS = 10
# Histogram bounds as fractions of the target file size: 1/512 (1 MiB at the 512 MiB default),
# 1/64, 1/16, 1/8, 1/4, 1/2, the small-file bound, the target, 1.5x; then everything above.
HISTOGRAM_FRACTIONS = (1 / 512, 1 / 64, 1 / 16, 1 / 8, 1 / 4, 1 / 2, None, 1.0, 1.5)


def histogram_bounds(target: int, small_bytes: int) -> list[int]:
    """Upper bounds of the size histogram's buckets (the last bucket has none)."""
    bounds = {small_bytes if f is None else max(1, int(target * f)) for f in HISTOGRAM_FRACTIONS}
    return sorted(bounds)


@dataclass
class FileFigures:
    """Running totals of one snapshot's live files."""

    bounds: list[int]
    small_bytes: int
    data_count: int = 0
    data_bytes: int = 0
    data_records: int = 0
    small_count: int = 0
    buckets: list[list[int]] = field(default_factory=list)  # [count, bytes] per bucket
    position_deletes: int = 0
    equality_deletes: int = 0
    dvs: int = 0
    delete_records: int = 0
    delete_bytes: int = 0
    by_partition: dict[tuple[int, Any], list[int]] = field(default_factory=dict)  # -> [files, records]

    def __post_init__(self) -> None:
        self.buckets = [[0, 0] for _ in range(len(self.bounds) + 1)]

    def add(self, m: ManifestFile, e: ManifestEntry) -> None:
        f = e.data_file
        size = f.file_size_in_bytes
        if f.content == DataFileContent.DATA:
            self.data_count += 1
            self.data_bytes += size
            self.data_records += f.record_count
            self.small_count += size < self.small_bytes
            b = self.buckets[_bucket(self.bounds, size)]
            b[0] += 1
            b[1] += size
            return
        if f.is_dv:
            self.dvs += 1
        elif f.content == DataFileContent.POSITION_DELETES:
            self.position_deletes += 1
        else:
            self.equality_deletes += 1
        self.delete_records += f.record_count
        self.delete_bytes += size  # a DV's Puffin file counts once per DV, as Spark's files table shows it
        part = self.by_partition.setdefault((m.partition_spec_id, f.partition), [0, 0])
        part[0] += 1
        part[1] += f.record_count

    @property
    def delete_count(self) -> int:
        return self.position_deletes + self.equality_deletes + self.dvs

    def data_section(self, target: int) -> dict[str, Any]:
        lowers = [0, *self.bounds]
        return {
            "count": self.data_count, "total_bytes": self.data_bytes, "record_count": self.data_records,
            "target_file_size_bytes": target, "small_file_bytes": self.small_bytes,
            "small_file_count": self.small_count, "small_file_ratio": _ratio(self.small_count, self.data_count),
            "mean_bytes": self.data_bytes // self.data_count if self.data_count else 0,
            "size_histogram": [{"lower_bytes": lo, "upper_bytes": hi, "count": c, "total_bytes": b,
                                "small": hi is not None and hi <= self.small_bytes}
                               for lo, hi, (c, b) in zip(lowers, [*self.bounds, None], self.buckets, strict=True)]}

    def delete_section(self, top: list[dict[str, Any]]) -> dict[str, Any]:
        return {"position_delete_file_count": self.position_deletes,
                "equality_delete_file_count": self.equality_deletes, "dv_count": self.dvs,
                "delete_file_count": self.delete_count, "delete_record_count": self.delete_records,
                "total_bytes": self.delete_bytes,
                "delete_file_ratio": _ratio(self.delete_count, self.data_count),
                "deleted_row_ratio": _ratio(self.delete_records, self.data_records),
                "top_partitions": top}

    def top_partitions(self, md: TableMetadata) -> list[dict[str, Any]]:
        mapper = PartitionMapper(md)
        ranked = sorted(self.by_partition.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))[:TOP_PARTITIONS]
        return [{"partition": mapper.to_dict(spec_id, values), "spec_id": spec_id, "delete_files": files,
                 "delete_records": records} for (spec_id, values), (files, records) in ranked]


def _bucket(bounds: list[int], size: int) -> int:
    for i, upper in enumerate(bounds):
        if size < upper:
            return i
    return len(bounds)


def _ratio(n: int, d: int) -> float:
    return n / d if d else 0.0


@dataclass
class Candidates:
    """The (spec, content) groups compact would read: their manifests and, once read, live entries."""

    groups: dict[tuple[int, int], list[ManifestFile]]
    shapes: dict[tuple[int, int], ManifestShape]
    target: int
    live: dict[tuple[int, int], list[ManifestEntry]] = field(default_factory=dict)
    per_manifest: dict[str, int] = field(default_factory=dict)

    @property
    def paths(self) -> set[str]:
        return {m.manifest_path for ms in self.groups.values() for m in ms}

    def add(self, m: ManifestFile, e: ManifestEntry) -> None:
        self.live.setdefault((m.partition_spec_id, int(m.content)), []).append(e)
        self.per_manifest[m.manifest_path] = self.per_manifest.get(m.manifest_path, 0) + 1

    def mergeable(self) -> int:
        """Manifests compact's plan replaces: groups whose rolled entries make fewer manifests
        (or split an oversized one), as :func:`~icectl.ops.compact.manifests.plan_compaction` decides."""
        total = 0
        for key, ms in self.groups.items():
            shape = self.shapes[key]
            group = GroupPlan(key[0], ManifestContent(key[1]), ms, True, "")
            group.live_per_manifest = {m.manifest_path: self.per_manifest[m.manifest_path]
                                       for m in ms if m.manifest_path in self.per_manifest}
            positions, _ = sort_fields(shape.spec, ())
            group.bins, capacity = roll([as_existing(e) for e in cluster(self.live.get(key, []), positions)],
                                        shape, self.target)
            if improves(group, capacity):
                total += len(ms)
        return total


def compact_candidates(md: TableMetadata, manifests: list[ManifestFile]) -> Candidates:
    """The groups compact's plan would read (decided from the manifest list alone)."""
    target = table_target_size(md)
    snapshot_id = new_snapshot_id(md)
    groups: dict[tuple[int, int], list[ManifestFile]] = {}
    shapes: dict[tuple[int, int], ManifestShape] = {}
    for (spec_id, content), ms in sorted(group_manifests(manifests, CompactOptions()).items()):
        spec = md.spec_by_id(spec_id)
        if spec is None:
            continue  # compact refuses such a table; the figures still count its files
        shape = ManifestShape(md, spec, md.partition_type(spec_id), ManifestContent(content), snapshot_id)
        if decide(ms, target, None, len(shape.encode([])))[0]:
            groups[spec_id, content], shapes[spec_id, content] = ms, shape
    return Candidates(groups, shapes, target)


def read_figures(table: Table, md: TableMetadata, manifests: list[ManifestFile], figures: FileFigures) -> int:
    """Fill ``figures`` from the live entries of ``manifests``; return how many manifests compact would merge."""
    # v4 compacts leaves and root-level files with a plan of its own: asked after the pass (it
    # reads the leaves it would rewrite once more; v4 is experimental).
    candidates = compact_candidates(md, manifests) if md.format_version < 4 else None
    wanted = candidates.paths if candidates else set()
    projected = [m for m in manifests if m.manifest_path not in wanted]
    whole = [m for m in manifests if m.manifest_path in wanted]
    for m, e in _live(iter_entries(md, table.io, projected, fields=FIGURE_FIELDS)):
        figures.add(m, e)
    for m, e in _live(iter_entries(md, table.io, whole)):
        figures.add(m, e)
        if candidates is not None:
            candidates.add(m, e)
    if candidates is None:
        return compact(table, CompactOptions(), dry_run=True).manifests_replaced
    return candidates.mergeable()


def _live(pairs: Iterable[tuple[ManifestFile, ManifestEntry]]) -> Iterable[tuple[ManifestFile, ManifestEntry]]:
    return ((m, e) for m, e in pairs if e.is_live)


def operations(counter: Counter[str]) -> dict[str, int]:
    return dict(sorted(counter.items()))


def bucket_edges(first: int, last: int, n: int) -> list[int]:
    """``n`` equal buckets over [first, last] as n+1 edges (the last bucket includes ``last``)."""
    width = max(1, math.ceil((last - first + 1) / n))
    return [first + i * width for i in range(n + 1)]
