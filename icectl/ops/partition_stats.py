"""Partition statistics files (the spec's ``partition-statistics``): compute, write, register, read.

``compute_partition_stats`` is Spark's ``CALL system.compute_partition_stats(table, snapshot_id)``
(Java 1.10 ``ComputePartitionStatsSparkAction`` over ``PartitionStatsHandler.computeAndWriteStatsFile``):

* no snapshot (an empty table): nothing to compute, no file, no commit (Java's empty result);
* a table no spec of which is partitioned: refused (Java: "Table must be partitioned"), exit 2;
* the snapshot already has a registered file: that file is the answer, nothing is written (Java
  returns the existing file);
* otherwise one row per (spec id, partition tuple) over every entry of the snapshot's manifests, DELETED
  ones included, as Java's full compute: live entries add to the counters (a Puffin position delete
  file is a deletion vector: its records go to ``position_delete_record_count``, the file to
  ``dv_count``, not ``position_delete_file_count``), every entry whose snapshot the table still has
  moves ``last_updated_at``/``last_updated_snapshot_id`` to the newest such snapshot (an entry whose
  snapshot was expired updates nothing, as ``table.snapshot(id)`` is null in Java);
  ``total_record_count`` stays null (Java: "needs scanning the data"). Rows are sorted by partition,
  nulls first, as Java's ``Comparators.forType``; the few rows with equal partitions (one per spec)
  by spec id.

Java computes incrementally from an ancestor's statistics file when there is one; icectl always
computes in full, which is what Java computes when there is none. The two differ where Java's
incremental merge is wrong: in 1.10.2 it matches the previous file's rows (unified partition type)
against new ones by each spec's own partition type, so on a table whose current spec's fields are not
a prefix of the unified type, rows collapse and partitions appear twice (apache/iceberg#17915; v2_part
after one more INSERT: 24 rows become 16, one of them twice). Otherwise an incremental run also keeps
partitions whose files were all removed since, with zero counts.

The file goes to ``<location>/metadata/partition-stats-<snapshot-id>-<uuid>.parquet`` (Java's name;
always Parquet) and is registered by one commit of ``set-partition-statistics``, retried on conflicts
as every writer; a failure before the commit is known to be done deletes the file again.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from icectl.codec.partition_stats_file import read_partition_stats_file, stats_schema, write_partition_stats
from icectl.errors import IcectlError, NotFoundError, UsageError
from icectl.results import FLAT, NEXT_METADATA, UNSET, CommandResult, Committed, Unset
from icectl.spec.manifest import DataFileContent
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import unified_partition_type
from icectl.spec.schema import IcebergType, PrimitiveType, StructType
from icectl.spec.snapshots import PartitionStatisticsFile, Snapshot
from icectl.spec.updates import SetPartitionStatistics, TableChange
from icectl.storage import join
from icectl.table import Table
from icectl.table.commit import commit, discard_on_failure
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.write_guard import check_writable

if TYPE_CHECKING:
    import pyarrow as pa

_ENTRY_FIELDS = ("partition",)  # besides what is always read: content, format, counts, sizes


@dataclass(kw_only=True)
class PartitionStatsResult(CommandResult):
    """``icectl compute-partition-stats``: the file for ``snapshot_id`` (None: the table has no snapshot),
    its ``row_count`` (partitions), and whether it was written now or ``existing`` already."""

    view: ClassVar[str] = "compute_partition_stats"
    table: str
    dry_run: bool
    snapshot_id: int | None
    path: str | None
    row_count: int
    existing: bool = False
    file_size_in_bytes: int | Unset = UNSET
    would_write: list[str] | Unset = UNSET  # dry run
    commit: Committed = field(default_factory=Committed, metadata=FLAT)


# --------------------------------------------------------------------------- the rows


def partition_stats_type(md: TableMetadata) -> StructType:
    """Java ``Partitioning.partitionType(table)``: the unified partition type of every spec, limited to
    fields whose source column the current schema still has (``allActiveFieldIds``)."""
    schema = md.schema()
    unified = unified_partition_type(md.partition_specs, schema, md.schemas)
    active = {f.field_id for s in md.partition_specs for f in s.fields if schema.find_type(f.source_ids[0]) is not None}
    return StructType(tuple(f for f in unified.fields if f.field_id in active))


def is_partitioned(md: TableMetadata) -> bool:
    """Java ``Partitioning.isPartitioned``: any spec, current or not, with a non-void field."""
    return any(not s.is_unpartitioned for s in md.partition_specs)


def _new_row(partition: tuple[Any, ...], spec_id: int) -> dict[str, Any]:
    return {"partition": partition, "spec_id": spec_id, "data_record_count": 0, "data_file_count": 0,
            "total_data_file_size_in_bytes": 0, "position_delete_record_count": 0, "position_delete_file_count": 0,
            "equality_delete_record_count": 0, "equality_delete_file_count": 0, "total_record_count": None,
            "last_updated_at": None, "last_updated_snapshot_id": None, "dv_count": 0}


def compute_rows(table: Table, snapshot: Snapshot) -> list[dict[str, Any]]:
    """The file's rows for ``snapshot`` (Java's full compute), sorted as Java writes them."""
    md = table.metadata
    ptype = partition_stats_type(md)
    # Where each unified field sits in each spec's partition tuple (Java PartitionUtil.coercePartition).
    positions = {s.spec_id: [next((i for i, pf in enumerate(s.fields) if pf.field_id == f.field_id), None)
                             for f in ptype.fields] for s in md.partition_specs}
    stats: dict[tuple[int, tuple[Any, ...]], dict[str, Any]] = {}
    for manifest, entry in iter_entries(md, table.io, manifests_of(md, snapshot, table.io), fields=_ENTRY_FIELDS):
        spec_id = manifest.partition_spec_id
        f = entry.data_file
        values = f.partition or ()
        key = (spec_id, tuple(_same(v) for v in values))
        row = stats.get(key)
        if row is None:
            coerced = tuple(None if p is None or p >= len(values) else values[p] for p in positions.get(spec_id, ()))
            row = stats[key] = _new_row(coerced, spec_id)
        if entry.is_live:
            if f.content == DataFileContent.DATA:
                row["data_record_count"] += f.record_count
                row["data_file_count"] += 1
                row["total_data_file_size_in_bytes"] += f.file_size_in_bytes
            elif f.content == DataFileContent.POSITION_DELETES:
                row["position_delete_record_count"] += f.record_count
                row["dv_count" if f.is_dv else "position_delete_file_count"] += 1
            else:
                row["equality_delete_record_count"] += f.record_count
                row["equality_delete_file_count"] += 1
        snap = md.snapshot_by_id(entry.snapshot_id) if entry.snapshot_id is not None else None
        if snap is not None and (row["last_updated_at"] is None or row["last_updated_at"] < snap.timestamp_ms):
            row["last_updated_at"], row["last_updated_snapshot_id"] = snap.timestamp_ms, snap.snapshot_id
    keys = [_value_key(f.field_type) for f in ptype.fields]
    return sorted(stats.values(), key=lambda r: (tuple(k(v) for k, v in zip(keys, r["partition"], strict=True)),
                                                 r["spec_id"]))


def _same(v: Any) -> Any:
    """A partition value as a dict key that is equal where Java's comparator is 0: every NaN alike, -0.0
    apart from 0.0 (Python has NaN != NaN and -0.0 == 0.0)."""
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else (v, math.copysign(1.0, v))
    return v


def _value_key(t: IcebergType) -> Any:
    """A sort key of one partition value: nulls first, then Java's comparator for the type."""
    name = t.name if isinstance(t, PrimitiveType) else ""

    def key(v: Any) -> tuple[Any, ...]:
        if v is None:
            return (0,)
        if name in ("float", "double"):  # Float.compare: -0.0 < 0.0, NaN last
            return (1, math.isnan(v), 0.0 if math.isnan(v) else v, math.copysign(1.0, v))
        if name == "uuid":  # java.util.UUID.compareTo: signed most, then least significant halves
            return (1, int.from_bytes(v.bytes[:8], "big", signed=True), int.from_bytes(v.bytes[8:], "big", signed=True))
        return (1, v)  # strings by code point (Java's CharSeqComparator), bytes unsigned, numbers

    return key


# --------------------------------------------------------------------------- compute, write, register


def stats_file_path(table: Table, snapshot_id: int) -> str:
    """Java's name in the table's metadata folder: ``partition-stats-<snapshot-id>-<uuid>.parquet``."""
    return join(table.metadata_folder, f"partition-stats-{snapshot_id}-{uuid.uuid4()}.parquet")


def compute_partition_stats(table: Table, snapshot_id: int | None = None, *,
                            dry_run: bool = False) -> PartitionStatsResult:
    """Compute the partition statistics of ``snapshot_id`` (default: the current snapshot), write the
    file and register it (see the module's documentation)."""
    check_writable(table)  # the file goes to the metadata folder the metadata names: never through a copy
    md = table.metadata
    snap = table.snapshot(snapshot_id)  # NotFoundError (exit 3) for an unknown id
    res = PartitionStatsResult(table=table.identifier, dry_run=dry_run, snapshot_id=None, path=None, row_count=0)
    if snap is None:
        res.title = f"{table.identifier} has no snapshot: no partition statistics to compute"
        return res
    if not is_partitioned(md):
        raise UsageError(f"table {table.identifier} is not partitioned: partition statistics need partitions",
                         hint="'icectl inspect table' shows its partition spec")
    res.snapshot_id = snap.snapshot_id
    existing = next((s for s in md.partition_statistics if s.snapshot_id == snap.snapshot_id), None)
    if existing is not None:  # Java: "Returning existing statistics file"
        rows = read_partition_stats(table, snap.snapshot_id)
        res.existing, res.path = True, existing.statistics_path
        res.row_count = rows.num_rows if rows is not None else 0
        res.file_size_in_bytes = existing.file_size_in_bytes
        if rows is None:
            res.warnings = [f"the partition statistics file registered for snapshot {snap.snapshot_id} cannot be "
                            f"read: {existing.statistics_path}"]
        res.title = (f"snapshot {snap.snapshot_id} of {table.identifier} already has partition statistics: "
                     f"{existing.statistics_path}")
        return res
    schema = stats_schema(partition_stats_type(md), md.format_version)
    rows = compute_rows(table, snap)
    if not rows:  # Java: no entries at all ("empty branch case"): no file
        res.title = f"snapshot {snap.snapshot_id} of {table.identifier} has no files: no partition statistics"
        return res
    res.path, res.row_count = stats_file_path(table, snap.snapshot_id), len(rows)
    data = write_partition_stats(rows, schema)
    res.file_size_in_bytes = len(data)
    if dry_run:
        res.would_write = [res.path, NEXT_METADATA]
        res.title = f"would write {res.path} ({_partitions(len(rows))}) and register it for snapshot {snap.snapshot_id}"
        return res
    stats_file = PartitionStatisticsFile(snap.snapshot_id, res.path, len(data))

    def build(base: TableMetadata) -> TableChange:
        if base.snapshot_by_id(snap.snapshot_id) is None:  # expired by another writer meanwhile
            raise NotFoundError(f"snapshot {snap.snapshot_id} was removed from table {table.identifier} meanwhile")
        return TableChange((), (SetPartitionStatistics(stats_file),))

    written: list[str] = []
    with discard_on_failure(table.io, written):
        written.append(res.path)
        table.io.write(res.path, data)
        done = commit(table, build)
    res.commit.metadata_location, res.commit.commit_attempts = done.metadata_location, done.attempts
    res.title = f"wrote {res.path} ({_partitions(len(rows))}) for snapshot {snap.snapshot_id} of {table.identifier}"
    return res


def _partitions(n: int) -> str:
    return f"{n} partition{'' if n == 1 else 's'}"


def read_partition_stats(table: Table, snapshot_id: int) -> pa.Table | None:
    """The rows of the partition statistics file registered for ``snapshot_id``, or None when the
    table has none for it (or it cannot be read)."""
    found = next((s for s in table.metadata.partition_statistics if s.snapshot_id == snapshot_id), None)
    if found is None:
        return None
    try:
        return read_partition_stats_file(table.io.read(found.statistics_path), found.statistics_path)
    except IcectlError:
        return None


__all__ = ["PartitionStatsResult", "compute_partition_stats", "compute_rows", "is_partitioned",
           "partition_stats_type", "read_partition_stats", "stats_file_path"]
