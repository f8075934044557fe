"""The metadata-only views of ``inspect``: overview, schema, snapshots, history, refs, metadata log.

They read the table metadata alone, so this module imports nothing of the manifest read path
(``icectl inspect table`` starts without pyarrow or fastavro). :mod:`icectl.ops.inspect.views` re-exports them.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

from icectl.errors import NotFoundError
from icectl.ops.inspect.result import (
    SchemaBrief,
    SnapshotBrief,
    SortOrderBrief,
    SpecBrief,
    TableOverview,
    TableViewMeta,
)
from icectl.results import UNSET, Column, RowsResult
from icectl.spec.durations import human_duration
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import ancestors_of
from icectl.table import Table


def iso_timestamp(ms: int | None) -> str | None:
    """Milliseconds since the epoch as an ISO UTC timestamp (what Spark shows as a timestamp)."""
    if ms is None:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc).isoformat(
        timespec="milliseconds")


def view_meta(table: Table, **extra: Any) -> TableViewMeta:
    return TableViewMeta(table=table.identifier, metadata_location=table.metadata_location, **extra)


def partition_fields(md: TableMetadata, *path: str) -> dict[str, tuple[str, ...]]:
    """The unified partition struct's field names -> their path in a row (for --where and --sort)."""
    return {f.name: (*path, f.name) for f in md.unified_partition_type().fields}


# A snapshot's summary figures a terminal shows by default (the raw map stays in JSON and --columns).
SNAPSHOT_TERMINAL = ["committed_at", "snapshot_id", "parent_id", "operation", "summary.added-data-files",
                     "summary.added-delete-files", "summary.added-records", "summary.total-records",
                     "summary.total-files-size"]
SNAPSHOT_INFO = {
    "summary.added-data-files": Column("count", "added files"),
    "summary.added-delete-files": Column("count", "added deletes"),
    "summary.added-records": Column("count", "added records"),
    "summary.deleted-records": Column("count", "deleted records"),
    "summary.total-records": Column("count", "total records"),
    "summary.total-data-files": Column("count", "data files"),
    "summary.total-files-size": Column("bytes", "total size"),
    "sequence_number": Column("count", "seq"), "first_row_id": Column("id"), "added_rows": Column("count"),
}


# --------------------------------------------------------------------------- metadata-only views


def table_overview(table: Table) -> TableOverview:
    """Format, location, ids, current schema/spec/sort order, properties and totals."""
    md = table.metadata
    snap = md.current_snapshot()
    summary = snap.summary if snap else {}
    totals: dict[str, str] = {k: summary[k] for k in ("total-records", "total-data-files", "total-delete-files",
                                                      "total-files-size", "total-position-deletes",
                                                      "total-equality-deletes") if k in summary}
    return TableOverview(
        title=f"Table {table.identifier}",
        table=table.identifier,
        metadata_location=table.metadata_location,
        format_version=md.format_version,
        table_uuid=md.table_uuid,
        location=md.location,
        last_updated=iso_timestamp(md.last_updated_ms),
        last_sequence_number=md.last_sequence_number,
        current_snapshot_id=md.current_snapshot_id,
        current_snapshot=None if snap is None else SnapshotBrief(
            snap.snapshot_id, iso_timestamp(snap.timestamp_ms), snap.operation, snap.sequence_number),
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
                      view_meta(table, schema_id=schema.schema_id), location=md.location,
                      column_info={"field_id": Column("id", "id"), "required": Column("bool"),
                                   "identifier": Column("bool")})


def snapshot_rows(table: Table) -> RowsResult:
    """Spark's ``snapshots``: committed_at, snapshot_id, parent_id, operation, manifest_list, summary."""
    md = table.metadata
    cols = ["committed_at", "snapshot_id", "parent_id", "operation", "sequence_number", "manifest_list",
            "summary"]
    if md.format_version >= 3:
        cols[-1:-1] = ["first_row_id", "added_rows"]

    def rows() -> Iterator[dict[str, Any]]:
        for s in md.snapshots:
            row = {"committed_at": iso_timestamp(s.timestamp_ms), "snapshot_id": s.snapshot_id,
                   "parent_id": s.parent_snapshot_id, "operation": s.operation,
                   "sequence_number": s.sequence_number,
                   "manifest_list": s.manifest_list or s.root_manifest,
                   # Java parses "operation" out of the summary map; Spark shows the rest.
                   "summary": {k: v for k, v in s.summary.items() if k != "operation"}}
            if md.format_version >= 3:
                row["first_row_id"] = s.first_row_id
                row["added_rows"] = s.added_rows
            yield row

    return RowsResult("snapshots", f"Snapshots of {table.identifier}", cols, rows(), view_meta(table),
                      column_info=SNAPSHOT_INFO, terminal_columns=SNAPSHOT_TERMINAL, location=md.location)


def history_rows(table: Table) -> RowsResult:
    """Spark's ``history``: the snapshot log with whether each entry is an ancestor of current."""
    md = table.metadata
    by_id = {s.snapshot_id: s for s in md.snapshots}
    ancestry = {s.snapshot_id for s in ancestors_of(md.current_snapshot_id, by_id)}

    def rows() -> Iterator[dict[str, Any]]:
        for e in md.snapshot_log:
            snap = by_id.get(e.snapshot_id)
            yield {"made_current_at": iso_timestamp(e.timestamp_ms), "snapshot_id": e.snapshot_id,
                   "parent_id": snap.parent_snapshot_id if snap else None,
                   "is_current_ancestor": e.snapshot_id in ancestry}

    return RowsResult("history", f"History of {table.identifier}",
                      ["made_current_at", "snapshot_id", "parent_id", "is_current_ancestor"], rows(),
                      view_meta(table), location=md.location,
                      column_info={"is_current_ancestor": Column("bool", "current ancestor")})


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
                       "max_snapshot_age_in_ms"], rows, view_meta(table), location=md.location,
                      column_info={"max_reference_age_in_ms": Column("duration", "max ref age"),
                                   "min_snapshots_to_keep": Column("count", "min snapshots to keep"),
                                   "max_snapshot_age_in_ms": Column("duration", "max snapshot age")})


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
            yield {"timestamp": iso_timestamp(ts), "file": path, "latest_snapshot_id": latest,
                   "latest_schema_id": snap.schema_id if snap else None,
                   "latest_sequence_number": snap.sequence_number if snap else None}

    return RowsResult("metadata_log_entries", f"Metadata log of {table.identifier}",
                      ["timestamp", "file", "latest_snapshot_id", "latest_schema_id", "latest_sequence_number"],
                      rows(), view_meta(table), location=md.location,
                      column_info={"latest_schema_id": Column("id", "schema"),
                                   "latest_sequence_number": Column("count", "seq")})
