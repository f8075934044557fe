"""Read-only views of a table, named and shaped like Spark's Iceberg metadata tables.

Each function takes a loaded :class:`~icectl.table.Table` and returns a result object
(:mod:`icectl.results`); row views stream their rows. Columns carry the names Spark uses
(``snapshots``, ``history``, ``refs``, ``manifests``, ``all_manifests``, ``files``, ``entries``,
``partitions``, ``metadata_log_entries``) so users can compare the two directly.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from enum import Enum
from typing import Any

from icectl.codec.puffin import decode_deletion_vector
from icectl.errors import CorruptInputError, IcectlError, NotFoundError
from icectl.ops.inspect_files import (
    FILE_FIELDS,
    METRIC_FIELDS,
    PartitionMapper,
    file_row,
    file_rows_json,
    human_value,
)
from icectl.ops.results import SchemaBrief, SnapshotBrief, SortOrderBrief, SpecBrief, TableOverview, TableViewMeta
from icectl.results import UNSET, RowsResult
from icectl.spec.durations import human_duration
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import NestedField, StructType
from icectl.spec.snapshots import Snapshot, ancestors_of
from icectl.table import Table
from icectl.table.scan import iter_entries, manifests_of


class ContentFilter(str, Enum):
    ALL = "all"
    DATA = "data"
    DELETES = "deletes"


CONTENT_NAMES = {0: "data", 1: "position_deletes", 2: "equality_deletes"}
STATUS_NAMES = {0: "EXISTING", 1: "ADDED", 2: "DELETED"}


def _ts(ms: int | None) -> str | None:
    """Milliseconds since the epoch as an ISO UTC timestamp (what Spark shows as a timestamp)."""
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).isoformat(
        timespec="milliseconds")


def _meta(table: Table, **extra: Any) -> TableViewMeta:
    return TableViewMeta(table=table.identifier, metadata_location=table.metadata_location, **extra)


# --------------------------------------------------------------------------- metadata-only views


def table_overview(table: Table) -> TableOverview:
    """Format, location, ids, current schema/spec/sort order, properties and totals."""
    md = table.metadata
    snap = md.current_snapshot()
    summary = snap.summary if snap else {}
    totals = {k: summary[k] for k in ("total-records", "total-data-files", "total-delete-files",
                                      "total-files-size", "total-position-deletes",
                                      "total-equality-deletes") if k in summary}
    return TableOverview(
        title=f"Table {table.identifier}",
        table=table.identifier,
        metadata_location=table.metadata_location,
        format_version=md.format_version,
        table_uuid=md.table_uuid,
        location=md.location,
        last_updated=_ts(md.last_updated_ms),
        last_sequence_number=md.last_sequence_number,
        current_snapshot_id=md.current_snapshot_id,
        current_snapshot=None if snap is None else SnapshotBrief(
            snap.snapshot_id, _ts(snap.timestamp_ms), snap.operation, snap.sequence_number),
        snapshot_count=len(md.snapshots),
        refs={name: f"{r.type} -> {r.snapshot_id}" for name, r in md.refs.items()},
        schema=SchemaBrief(md.current_schema_id,
                           [f"{f.field_id}: {f.name} {f.field_type}{' not null' if f.required else ''}"
                            for f in md.schema().fields]),
        partition_spec=SpecBrief(md.default_spec_id,
                                 [f"{f.name}={f.transform}({', '.join(_source_names(md, f.source_ids))})"
                                  for f in md.spec().fields]),
        sort_order=SortOrderBrief(md.default_sort_order_id,
                                  [f"{f.transform}({', '.join(_source_names(md, f.source_ids))}) "
                                   f"{f.direction} {f.null_order}" for f in md.sort_order().fields]),
        properties=dict(md.properties),
        totals=totals,
        next_row_id=md.next_row_id if md.format_version >= 3 else UNSET,
    )


def _source_names(md: TableMetadata, source_ids: tuple[int, ...]) -> list[str]:
    out = []
    for sid in source_ids:
        name = md.schema().column_name(sid)
        if name is None:
            for s in md.schemas:
                name = s.column_name(sid)
                if name:
                    break
        out.append(name or f"<dropped field {sid}>")
    return out


def schema_rows(table: Table, schema_id: int | None = None) -> RowsResult:
    md = table.metadata
    schema = md.schema() if schema_id is None else md.schema_by_id(schema_id)
    if schema is None:
        raise NotFoundError(f"schema {schema_id} not found in table {table.identifier}",
                            path=table.metadata_location)

    def rows() -> Iterator[dict[str, Any]]:
        for fid in schema.field_ids():
            f = schema.find_field(fid)
            assert f is not None
            row: dict[str, Any] = {
                "field_id": f.field_id, "name": schema.column_name(fid), "type": str(f.field_type),
                "required": f.required, "doc": f.doc,
                "identifier": fid in schema.identifier_field_ids}
            if f.has_initial_default:
                row["initial_default"] = f.initial_default
            if f.has_write_default:
                row["write_default"] = f.write_default
            yield row

    cols = ["field_id", "name", "type", "required", "identifier", "doc"]
    if md.format_version >= 3:
        cols += ["initial_default", "write_default"]
    return RowsResult("schema", f"Schema {schema.schema_id} of {table.identifier}", cols, rows(),
                      _meta(table, schema_id=schema.schema_id))


def snapshot_rows(table: Table) -> RowsResult:
    """Spark's ``snapshots``: committed_at, snapshot_id, parent_id, operation, manifest_list, summary."""
    md = table.metadata
    cols = ["committed_at", "snapshot_id", "parent_id", "operation", "sequence_number", "manifest_list",
            "summary"]
    if md.format_version >= 3:
        cols[-1:-1] = ["first_row_id", "added_rows"]

    def rows() -> Iterator[dict[str, Any]]:
        for s in md.snapshots:
            row = {"committed_at": _ts(s.timestamp_ms), "snapshot_id": s.snapshot_id,
                   "parent_id": s.parent_snapshot_id, "operation": s.operation,
                   "sequence_number": s.sequence_number,
                   "manifest_list": s.manifest_list or s.root_manifest,
                   # Java parses "operation" out of the summary map; Spark shows the rest.
                   "summary": {k: v for k, v in s.summary.items() if k != "operation"}}
            if md.format_version >= 3:
                row["first_row_id"] = s.first_row_id
                row["added_rows"] = s.added_rows
            yield row

    return RowsResult("snapshots", f"Snapshots of {table.identifier}", cols, rows(), _meta(table))


def history_rows(table: Table) -> RowsResult:
    """Spark's ``history``: the snapshot log with whether each entry is an ancestor of current."""
    md = table.metadata
    by_id = {s.snapshot_id: s for s in md.snapshots}
    ancestry = {s.snapshot_id for s in ancestors_of(md.current_snapshot_id, by_id)}

    def rows() -> Iterator[dict[str, Any]]:
        for e in md.snapshot_log:
            snap = by_id.get(e.snapshot_id)
            yield {"made_current_at": _ts(e.timestamp_ms), "snapshot_id": e.snapshot_id,
                   "parent_id": snap.parent_snapshot_id if snap else None,
                   "is_current_ancestor": e.snapshot_id in ancestry}

    return RowsResult("history", f"History of {table.identifier}",
                      ["made_current_at", "snapshot_id", "parent_id", "is_current_ancestor"], rows(),
                      _meta(table))


class Millis(int):
    """Milliseconds that JSON writes as the number and a terminal shows with the duration people
    read: ``432000000 (5d)`` (``json`` encodes an int subclass as ``int``; the terminal's cell is ``str``)."""

    def __str__(self) -> str:
        return f"{int(self)} ({human_duration(int(self))})"


def _millis(ms: int | None) -> Millis | None:
    return None if ms is None else Millis(ms)


def ref_rows(table: Table) -> RowsResult:
    """Spark's ``refs``; retention in milliseconds, shown with its duration on a terminal."""
    md = table.metadata
    rows = [{"name": name, "type": r.type.upper(), "snapshot_id": r.snapshot_id,
             "max_reference_age_in_ms": _millis(r.max_ref_age_ms), "min_snapshots_to_keep": r.min_snapshots_to_keep,
             "max_snapshot_age_in_ms": _millis(r.max_snapshot_age_ms)}
            for name, r in sorted(md.refs.items())]
    return RowsResult("refs", f"Refs of {table.identifier}",
                      ["name", "type", "snapshot_id", "max_reference_age_in_ms", "min_snapshots_to_keep",
                       "max_snapshot_age_in_ms"], rows, _meta(table))


def metadata_log_rows(table: Table) -> RowsResult:
    """Spark's ``metadata_log_entries``: previous files, then the current one.

    ``latest_snapshot_id`` is the snapshot current at that time, found from the snapshot log as
    Iceberg does (the last log entry not after the metadata file's timestamp).
    """
    md = table.metadata
    entries = [(e.timestamp_ms, e.metadata_file) for e in md.metadata_log]
    entries.append((md.last_updated_ms, table.metadata_location))
    log = sorted(md.snapshot_log, key=lambda e: e.timestamp_ms)
    by_id = {s.snapshot_id: s for s in md.snapshots}

    def rows() -> Iterator[dict[str, Any]]:
        for ts, path in entries:
            latest = None
            for e in log:
                if e.timestamp_ms <= ts:
                    latest = e.snapshot_id
            snap = by_id.get(latest) if latest is not None else None
            yield {"timestamp": _ts(ts), "file": path, "latest_snapshot_id": latest,
                   "latest_schema_id": snap.schema_id if snap else None,
                   "latest_sequence_number": snap.sequence_number if snap else None}

    return RowsResult("metadata_log_entries", f"Metadata log of {table.identifier}",
                      ["timestamp", "file", "latest_snapshot_id", "latest_schema_id", "latest_sequence_number"],
                      rows(), _meta(table))


# --------------------------------------------------------------------------- manifest views


def _snapshot_or_none(table: Table, snapshot_id: int | None, ref: str | None) -> Snapshot | None:
    return table.snapshot(snapshot_id, ref)


def _partition_summaries(md: TableMetadata, m: ManifestFile) -> list[dict[str, Any]]:
    if not m.partitions:
        return []
    spec = md.spec_by_id(m.partition_spec_id)
    ptype = md.partition_type(spec) if spec else StructType(())
    out = []
    for f, s in zip(ptype.fields, m.partitions, strict=False):
        try:
            lower, upper = s.decoded_bounds(f.field_type)
        except IcectlError:
            lower, upper = s.lower_bound, s.upper_bound
        # Spark shows summary bounds as the transform's human string, whatever the type.
        out.append({"contains_null": s.contains_null, "contains_nan": s.contains_nan,
                    "lower_bound": _human_string(f, lower), "upper_bound": _human_string(f, upper)})
    return out


def _human_string(f: NestedField, value: Any) -> str | None:
    if value is None:
        return None
    h = human_value(f, value)
    if isinstance(h, bool):
        return "true" if h else "false"
    return str(h)


def _manifest_row(md: TableMetadata, m: ManifestFile) -> dict[str, Any]:
    is_data = m.content == ManifestContent.DATA
    row = {
        "content": int(m.content), "path": m.manifest_path, "length": m.manifest_length,
        "partition_spec_id": m.partition_spec_id, "added_snapshot_id": m.added_snapshot_id,
        "sequence_number": m.sequence_number, "min_sequence_number": m.min_sequence_number,
        "added_data_files_count": m.added_files_count if is_data else 0,
        "existing_data_files_count": m.existing_files_count if is_data else 0,
        "deleted_data_files_count": m.deleted_files_count if is_data else 0,
        "added_delete_files_count": 0 if is_data else m.added_files_count,
        "existing_delete_files_count": 0 if is_data else m.existing_files_count,
        "deleted_delete_files_count": 0 if is_data else m.deleted_files_count,
        "added_rows_count": m.added_rows_count, "existing_rows_count": m.existing_rows_count,
        "deleted_rows_count": m.deleted_rows_count,
        "partition_summaries": _partition_summaries(md, m),
    }
    if md.format_version >= 3:
        row["first_row_id"] = m.first_row_id
    return row


MANIFEST_COLUMNS = ["content", "path", "length", "partition_spec_id", "added_snapshot_id",
                    "added_data_files_count", "existing_data_files_count", "deleted_data_files_count",
                    "added_delete_files_count", "existing_delete_files_count", "deleted_delete_files_count",
                    "partition_summaries"]


def manifest_rows(table: Table, *, snapshot_id: int | None = None, ref: str | None = None,
                  all_snapshots: bool = False) -> RowsResult:
    """Spark's ``manifests`` (one snapshot) or ``all_manifests`` (every snapshot, with
    ``reference_snapshot_id``)."""
    md = table.metadata
    if all_snapshots:
        def rows_all() -> Iterator[dict[str, Any]]:
            for s in md.snapshots:
                for m in manifests_of(md, s, table.io):
                    yield {**_manifest_row(md, m), "reference_snapshot_id": s.snapshot_id}

        return RowsResult("all_manifests", f"Manifests of every snapshot of {table.identifier}",
                          [*MANIFEST_COLUMNS, "reference_snapshot_id"], rows_all(), _meta(table))
    snap = _snapshot_or_none(table, snapshot_id, ref)
    manifests = manifests_of(md, snap, table.io) if snap else []
    return RowsResult("manifests", f"Manifests of {table.identifier}", MANIFEST_COLUMNS,
                      (_manifest_row(md, m) for m in manifests),
                      _meta(table, snapshot_id=snap.snapshot_id if snap else None))


# --------------------------------------------------------------------------- file views


def _file_columns(md: TableMetadata, metrics: bool) -> list[str]:
    cols = ["content", "file_path", "file_format", "spec_id", "partition", "record_count",
            "file_size_in_bytes"]
    if metrics:
        cols += [*METRIC_FIELDS, "readable_metrics"]
    cols += ["split_offsets", "equality_ids", "sort_order_id"]
    if md.format_version >= 3:
        cols.append("first_row_id")
    if md.format_version >= 2:
        cols.append("referenced_data_file")
    if md.format_version >= 3:
        cols += ["content_offset", "content_size_in_bytes"]
    return cols


def _wanted_fields(metrics: bool) -> set[str]:
    return set(FILE_FIELDS) | (set(METRIC_FIELDS) if metrics else set())


def file_rows(table: Table, *, snapshot_id: int | None = None, ref: str | None = None,
              content: ContentFilter = ContentFilter.ALL, metrics: bool = False) -> RowsResult:
    """Spark's ``files``: the live (ADDED or EXISTING) files of a snapshot, data then deletes."""
    md = table.metadata
    snap = _snapshot_or_none(table, snapshot_id, ref)
    manifests = manifests_of(md, snap, table.io) if snap else []
    if content == ContentFilter.DATA:
        manifests = [m for m in manifests if m.content == ManifestContent.DATA]
    elif content == ContentFilter.DELETES:
        manifests = [m for m in manifests if m.content == ManifestContent.DELETES]
    mapper = PartitionMapper(md)

    def rows() -> Iterator[dict[str, Any]]:
        for m, e in iter_entries(md, table.io, manifests, fields=_wanted_fields(metrics), live_only=True):
            yield file_row(md, mapper, m, e.data_file, metrics)

    def json_text(encode: Callable[[Any], str]) -> Iterator[str]:
        return file_rows_json(md, table.io, manifests, mapper, encode)

    return RowsResult("files", f"Files of {table.identifier}", _file_columns(md, metrics), rows(),
                      _meta(table, snapshot_id=snap.snapshot_id if snap else None),
                      json_text=None if metrics else json_text)


def entry_rows(table: Table, *, snapshot_id: int | None = None, ref: str | None = None,
               metrics: bool = False) -> RowsResult:
    """Spark's ``entries``: every entry of the snapshot's manifests, DELETED ones included."""
    md = table.metadata
    snap = _snapshot_or_none(table, snapshot_id, ref)
    manifests = manifests_of(md, snap, table.io) if snap else []
    mapper = PartitionMapper(md)

    def rows() -> Iterator[dict[str, Any]]:
        for m, e in iter_entries(md, table.io, manifests, fields=_wanted_fields(metrics)):
            yield _entry_row(md, mapper, m, e, metrics)

    return RowsResult("entries", f"Manifest entries of {table.identifier}",
                      ["status", "snapshot_id", "sequence_number", "file_sequence_number", "manifest_path",
                       "data_file"], rows(), _meta(table, snapshot_id=snap.snapshot_id if snap else None))


def _entry_row(md: TableMetadata, mapper: PartitionMapper, m: ManifestFile, e: ManifestEntry,
               metrics: bool) -> dict[str, Any]:
    return {"status": int(e.status), "snapshot_id": e.snapshot_id, "sequence_number": e.sequence_number,
            "file_sequence_number": e.file_sequence_number, "manifest_path": m.manifest_path,
            "data_file": file_row(md, mapper, m, e.data_file, metrics)}


def partition_rows(table: Table, *, snapshot_id: int | None = None, ref: str | None = None) -> RowsResult:
    """Spark's ``partitions``: per unified partition, counts of live data and delete files."""
    md = table.metadata
    snap = _snapshot_or_none(table, snapshot_id, ref)
    manifests = manifests_of(md, snap, table.io) if snap else []
    mapper = PartitionMapper(md)
    partitioned = bool(mapper.unified.fields)
    by_id = {s.snapshot_id: s for s in md.snapshots}
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    fields = {"content", "partition", "record_count", "file_size_in_bytes"}
    for m, e in iter_entries(md, table.io, manifests, fields=fields, live_only=True):
        f = e.data_file
        # Iceberg 1.10 keys partitions by spec too: a v1 value and an unpartitioned spec's null differ.
        key = (m.partition_spec_id, *mapper.key(m.partition_spec_id, f.partition)) if partitioned else ()
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "partition": mapper.to_dict(m.partition_spec_id, f.partition), "spec_id": 0,
                "record_count": 0, "file_count": 0, "total_data_file_size_in_bytes": 0,
                "position_delete_record_count": 0, "position_delete_file_count": 0,
                "equality_delete_record_count": 0, "equality_delete_file_count": 0,
                "last_updated_at": None, "last_updated_snapshot_id": None, "_ms": None}
        s = by_id.get(e.snapshot_id) if e.snapshot_id is not None else None
        if s is not None and (g["_ms"] is None or s.timestamp_ms > g["_ms"]):
            g["_ms"], g["last_updated_at"], g["last_updated_snapshot_id"] = (
                s.timestamp_ms, _ts(s.timestamp_ms), s.snapshot_id)
        g["spec_id"] = m.partition_spec_id
        if f.content == DataFileContent.DATA:
            g["record_count"] += f.record_count
            g["file_count"] += 1
            g["total_data_file_size_in_bytes"] += f.file_size_in_bytes
        elif f.content == DataFileContent.POSITION_DELETES:
            g["position_delete_record_count"] += f.record_count
            g["position_delete_file_count"] += 1
        else:
            g["equality_delete_record_count"] += f.record_count
            g["equality_delete_file_count"] += 1
    cols = ["record_count", "file_count", "total_data_file_size_in_bytes", "position_delete_record_count",
            "position_delete_file_count", "equality_delete_record_count", "equality_delete_file_count",
            "last_updated_at", "last_updated_snapshot_id"]
    if partitioned:
        cols = ["partition", "spec_id", *cols]
    rows = [{k: v for k, v in g.items() if k in cols} for g in groups.values()]
    return RowsResult("partitions", f"Partitions of {table.identifier}", cols, rows,
                      _meta(table, snapshot_id=snap.snapshot_id if snap else None))


def dv_rows(table: Table, *, snapshot_id: int | None = None, ref: str | None = None) -> RowsResult:
    """Deletion vectors of a snapshot, each blob read from its Puffin file, checked and counted."""
    md = table.metadata
    snap = _snapshot_or_none(table, snapshot_id, ref)
    manifests = [m for m in (manifests_of(md, snap, table.io) if snap else [])
                 if m.content == ManifestContent.DELETES]

    def rows() -> Iterator[dict[str, Any]]:
        for _m, e in iter_entries(md, table.io, manifests, fields=set(FILE_FIELDS), live_only=True):
            f = e.data_file
            if not f.is_dv:
                continue
            row: dict[str, Any] = {
                "puffin_path": f.file_path, "referenced_data_file": f.referenced_data_file,
                "content_offset": f.content_offset, "content_size_in_bytes": f.content_size_in_bytes,
                "record_count": f.record_count, "sequence_number": e.sequence_number}
            try:
                if f.content_offset is None or f.content_size_in_bytes is None:
                    raise CorruptInputError("DV entry lacks content_offset/content_size_in_bytes")
                blob = table.io.read_range(f.file_path, f.content_offset, f.content_size_in_bytes)
                positions = decode_deletion_vector(blob)
                row["cardinality"] = len(positions)
                row["min_position"] = positions.min() if len(positions) else None
                row["max_position"] = positions.max() if len(positions) else None
                row["status"] = "ok" if len(positions) == f.record_count else "cardinality != record_count"
            except IcectlError as err:
                row.update(cardinality=None, min_position=None, max_position=None, status=err.message)
            yield row

    return RowsResult("dvs", f"Deletion vectors of {table.identifier}",
                      ["puffin_path", "referenced_data_file", "content_offset", "content_size_in_bytes",
                       "record_count", "cardinality", "min_position", "max_position", "sequence_number",
                       "status"], rows(), _meta(table, snapshot_id=snap.snapshot_id if snap else None))
