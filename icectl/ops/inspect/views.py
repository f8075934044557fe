"""Read-only views of a table, named and shaped like Spark's Iceberg metadata tables.

Each function takes a loaded :class:`~icectl.table.Table` and returns a result object
(:mod:`icectl.results`); row views stream their rows. Columns carry the names Spark uses
(``snapshots``, ``history``, ``refs``, ``manifests``, ``all_manifests``, ``files``, ``entries``,
``partitions``, ``metadata_log_entries``) so users can compare the two directly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import Enum
from typing import Any

from icectl.codec.puffin import decode_deletion_vector
from icectl.engine import Engine, active
from icectl.errors import CorruptInputError, IcectlError
from icectl.ops.inspect.distributed import (
    ViewTask,
    engine_json,
    engine_partitions,
    engine_rows,
    fold_partition_tables,
)
from icectl.ops.inspect.files import (
    FILE_FIELDS,
    METRIC_FIELDS,
    PartitionMapper,
    entry_row,
    entry_rows_json,
    file_row,
    file_rows_json,
    human_value,
)
from icectl.ops.inspect.metadata import (  # re-exported: callers use icectl.ops.inspect.views for every view
    Millis,
    history_rows,
    metadata_log_rows,
    partition_fields,
    ref_rows,
    schema_rows,
    snapshot_rows,
    table_overview,
    view_meta,
)
from icectl.results import Column, RowsResult
from icectl.spec.manifest import ManifestContent, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import NestedField, StructType
from icectl.spec.snapshots import Snapshot
from icectl.table import Table
from icectl.table.scan import iter_entries, iter_manifest_tables, manifests_of

__all__ = [
    "CONTENT_NAMES", "STATUS_NAMES", "ContentFilter", "Millis", "dv_rows", "entry_rows", "file_rows",
    "history_rows", "manifest_rows", "metadata_log_rows", "partition_rows", "ref_rows", "schema_rows",
    "snapshot_rows", "table_overview",
]


class ContentFilter(str, Enum):
    ALL = "all"
    DATA = "data"
    DELETES = "deletes"


CONTENT_NAMES = {0: "data", 1: "position_deletes", 2: "equality_deletes"}
STATUS_NAMES = {0: "EXISTING", 1: "ADDED", 2: "DELETED"}
MANIFEST_CONTENT_NAMES = {0: "data", 1: "deletes"}
SHORT_CONTENT = {1: "pos del", 2: "eq del"}  # a terminal's names; --where takes Spark's


def _files_count(kind: str) -> Column:
    # A manifest counts either data or delete files: one terminal column for both.
    return Column("count", f"{kind} files",
                  value=lambda r: r.get(f"{kind}_data_files_count", 0) + r.get(f"{kind}_delete_files_count", 0))


# How a terminal shows the manifest views' columns, and which it shows by default.
MANIFEST_INFO = {
    "content": Column("enum", labels=MANIFEST_CONTENT_NAMES), "partition_spec_id": Column("id", "spec"),
    "added_data_files_count": Column("count", "added data files"),
    "existing_data_files_count": Column("count", "existing data files"),
    "deleted_data_files_count": Column("count", "deleted data files"),
    "added_delete_files_count": Column("count", "added delete files"),
    "existing_delete_files_count": Column("count", "existing delete files"),
    "deleted_delete_files_count": Column("count", "deleted delete files"),
    "reference_snapshot_id": Column("id"), "added_snapshot_id": Column("id"),
    "added_files": _files_count("added"), "existing_files": _files_count("existing"),
    "deleted_files": _files_count("deleted"),
}
MANIFEST_TERMINAL = ["content", "path", "length", "added_snapshot_id", "added_files", "existing_files", "deleted_files",
                     "partition_spec_id"]
FILE_INFO = {"content": Column("enum", labels=CONTENT_NAMES, short=SHORT_CONTENT), "spec_id": Column("id", "spec"),
             "record_count": Column("count", "records"), "file_size_in_bytes": Column("bytes", "size"),
             "file_format": Column("text", "format")}
FILE_TERMINAL = ["content", "file_path", "record_count", "file_size_in_bytes", "partition"]
ENTRY_INFO = {"status": Column("enum", labels=STATUS_NAMES),
              "content": Column("enum", labels=CONTENT_NAMES, short=SHORT_CONTENT),
              "data_file.content": Column("enum", "content", labels=CONTENT_NAMES, short=SHORT_CONTENT),
              "data_file.file_path": Column("path", "file_path"), "data_file.partition": Column("struct", "partition"),
              "data_file.record_count": Column("count", "records"),
              "data_file.file_size_in_bytes": Column("bytes", "size"), "sequence_number": Column("count", "seq"),
              "file_sequence_number": Column("count", "file seq")}
ENTRY_TERMINAL = ["status", "snapshot_id", "sequence_number", "file_sequence_number", "data_file.content",
                  "data_file.file_path", "data_file.record_count", "data_file.file_size_in_bytes",
                  "data_file.partition"]
PARTITION_INFO = {
    "spec_id": Column("id", "spec"), "record_count": Column("count", "records"),
    "file_count": Column("count", "files"), "total_data_file_size_in_bytes": Column("bytes", "data size"),
    "position_delete_record_count": Column("count", "position deletes"),
    "position_delete_file_count": Column("count", "position delete files"),
    "equality_delete_record_count": Column("count", "equality deletes"),
    "equality_delete_file_count": Column("count", "equality delete files"),
    "last_updated_at": Column("timestamp", "last updated at"),
    "last_updated_snapshot_id": Column("id", "last updated snapshot"),
}
PARTITION_TERMINAL = ["partition", "spec_id", "record_count", "file_count", "total_data_file_size_in_bytes",
                      "position_delete_file_count", "equality_delete_file_count", "last_updated_at",
                      "last_updated_snapshot_id"]
DV_INFO = {"content_size_in_bytes": Column("bytes", "size"), "record_count": Column("count", "records"),
           "min_position": Column("count", "min pos"), "max_position": Column("count", "max pos"),
           "content_offset": Column("count", "offset")}
DV_TERMINAL = ["referenced_data_file", "cardinality", "record_count", "status", "content_size_in_bytes", "puffin_path"]


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


MANIFEST_COLUMNS = ["content", "path", "length", "partition_spec_id", "added_snapshot_id", "sequence_number",
                    "min_sequence_number", "added_data_files_count", "existing_data_files_count",
                    "deleted_data_files_count", "added_delete_files_count", "existing_delete_files_count",
                    "deleted_delete_files_count", "added_rows_count", "existing_rows_count", "deleted_rows_count",
                    "partition_summaries"]


def _manifest_columns(md: TableMetadata) -> list[str]:
    return [*MANIFEST_COLUMNS, "first_row_id"] if md.format_version >= 3 else list(MANIFEST_COLUMNS)


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
                          [*_manifest_columns(md), "reference_snapshot_id"], rows_all(), view_meta(table),
                          column_info=MANIFEST_INFO, terminal_columns=["reference_snapshot_id", *MANIFEST_TERMINAL],
                          location=md.location)
    snap = _snapshot_or_none(table, snapshot_id, ref)
    manifests = manifests_of(md, snap, table.io) if snap else []
    return RowsResult("manifests", f"Manifests of {table.identifier}", _manifest_columns(md),
                      (_manifest_row(md, m) for m in manifests),
                      view_meta(table, snapshot_id=snap.snapshot_id if snap else None),
                      column_info=MANIFEST_INFO, terminal_columns=MANIFEST_TERMINAL, location=md.location)


# --------------------------------------------------------------------------- file views


def _file_columns(md: TableMetadata, metrics: bool) -> list[str]:
    cols = ["content", "file_path", "file_format", "spec_id", "partition", "record_count",
            "file_size_in_bytes"]
    if metrics:
        cols += [*METRIC_FIELDS, "readable_metrics"]
    cols += ["split_offsets", "equality_ids", "sort_order_id", "key_metadata"]
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
              content: ContentFilter = ContentFilter.ALL, metrics: bool = False,
              engine: Engine | None = None) -> RowsResult:
    """Spark's ``files``: the live (ADDED or EXISTING) files of a snapshot, data then deletes.
    ``engine``: where the manifests are decoded (None: :func:`icectl.engine.active`)."""
    md = table.metadata
    snap = _snapshot_or_none(table, snapshot_id, ref)
    manifests = manifests_of(md, snap, table.io) if snap else []
    if content == ContentFilter.DATA:
        manifests = [m for m in manifests if m.content == ManifestContent.DATA]
    elif content == ContentFilter.DELETES:
        manifests = [m for m in manifests if m.content == ManifestContent.DELETES]
    mapper = PartitionMapper(md)
    run_on = engine or active()

    def rows() -> Iterator[dict[str, Any]]:
        for m, e in iter_entries(md, table.io, manifests, fields=_wanted_fields(metrics), live_only=True):
            yield file_row(md, mapper, m, e.data_file, metrics)

    def json_text(encode: Callable[[Any], str]) -> Iterator[str | bytes]:
        return file_rows_json(md, table.io, manifests, mapper, encode, metrics)

    if not run_on.runs_in_process:  # each manifest's rows built where the engine decodes it
        task = ViewTask(md, table.io, metrics)
        rows = lambda: engine_rows(run_on, task, manifests)  # noqa: E731
        json_text = lambda encode: engine_json(run_on, task, manifests, encode)  # noqa: E731
    return RowsResult("files", f"Files of {table.identifier}", _file_columns(md, metrics), rows(),
                      view_meta(table, snapshot_id=snap.snapshot_id if snap else None),
                      json_text=json_text, column_info=FILE_INFO, terminal_columns=FILE_TERMINAL,
                      fields=partition_fields(md, "partition"), location=md.location)


def entry_rows(table: Table, *, snapshot_id: int | None = None, ref: str | None = None,
               metrics: bool = False, engine: Engine | None = None) -> RowsResult:
    """Spark's ``entries``: every entry of the snapshot's manifests, DELETED ones included.
    ``engine``: where the manifests are decoded (None: :func:`icectl.engine.active`)."""
    md = table.metadata
    snap = _snapshot_or_none(table, snapshot_id, ref)
    manifests = manifests_of(md, snap, table.io) if snap else []
    mapper = PartitionMapper(md)
    run_on = engine or active()

    def rows() -> Iterator[dict[str, Any]]:
        for m, e in iter_entries(md, table.io, manifests, fields=_wanted_fields(metrics)):
            yield entry_row(md, mapper, m, e, metrics)

    def json_text(encode: Callable[[Any], str]) -> Iterator[str | bytes]:
        return entry_rows_json(md, table.io, manifests, mapper, encode, metrics)

    if not run_on.runs_in_process:  # each manifest's rows built where the engine decodes it
        task = ViewTask(md, table.io, metrics, entries=True)
        rows = lambda: engine_rows(run_on, task, manifests)  # noqa: E731
        json_text = lambda encode: engine_json(run_on, task, manifests, encode)  # noqa: E731
    return RowsResult("entries", f"Manifest entries of {table.identifier}",
                      ["status", "snapshot_id", "sequence_number", "file_sequence_number", "manifest_path",
                       "data_file"], rows(), view_meta(table, snapshot_id=snap.snapshot_id if snap else None),
                      json_text=json_text,
                      column_info=ENTRY_INFO, terminal_columns=ENTRY_TERMINAL, location=md.location,
                      fields={**partition_fields(md, "data_file", "partition"),
                              **{f: ("data_file", f) for f in ("content", "file_path", "file_format", "partition",
                                                                "record_count", "file_size_in_bytes")}})


def partition_rows(table: Table, *, snapshot_id: int | None = None, ref: str | None = None,
                   engine: Engine | None = None) -> RowsResult:
    """Spark's ``partitions``: per unified partition, counts of live data and delete files.
    ``engine``: where the manifests are decoded (None: :func:`icectl.engine.active`)."""
    md = table.metadata
    snap = _snapshot_or_none(table, snapshot_id, ref)
    manifests = manifests_of(md, snap, table.io) if snap else []
    mapper = PartitionMapper(md)
    partitioned = bool(mapper.unified.fields)
    run_on = engine or active()
    if run_on.runs_in_process:
        groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        fold_partition_tables(groups, mapper, {s.snapshot_id: s for s in md.snapshots},
                              iter_manifest_tables(md, table.io, manifests))
    else:  # per-manifest partial sums on the engine, merged here in manifest order
        groups = engine_partitions(run_on, ViewTask(md, table.io), manifests)
    cols = ["record_count", "file_count", "total_data_file_size_in_bytes", "position_delete_record_count",
            "position_delete_file_count", "equality_delete_record_count", "equality_delete_file_count",
            "last_updated_at", "last_updated_snapshot_id"]
    if partitioned:
        cols = ["partition", "spec_id", *cols]
    rows = [{k: v for k, v in g.items() if k in cols} for g in groups.values()]
    return RowsResult("partitions", f"Partitions of {table.identifier}", cols, rows,
                      view_meta(table, snapshot_id=snap.snapshot_id if snap else None), column_info=PARTITION_INFO,
                      terminal_columns=[c for c in PARTITION_TERMINAL if c in cols], location=md.location,
                      fields=partition_fields(md, "partition") if partitioned else {})


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
                       "status"], rows(), view_meta(table, snapshot_id=snap.snapshot_id if snap else None),
                      column_info=DV_INFO, terminal_columns=DV_TERMINAL, location=md.location)
