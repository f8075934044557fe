"""Rules on the table metadata JSON alone (spec "Table Metadata", "Snapshots", "Schemas", Appendix E)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from icectl.errors import IcectlError
from icectl.spec.metadata import MAX_FORMAT_VERSION, MIN_FORMAT_VERSION, TableMetadata
from icectl.spec.schema import (
    MAX_USER_FIELD_ID,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    Schema,
    StructType,
)
from icectl.spec.soundness import json_integer_problems, metadata_problems
from icectl.spec.transforms import Transform
from icectl.spec.values import from_json_single_value
from icectl.validate.context import Context
from icectl.validate.rules import Reporter, Severity, rule

E, W = Severity.ERROR, Severity.WARNING

FORMAT_VERSION = rule("metadata.format-version", E, "format-version is one icectl supports (1 to 4)",
                      "Format Versioning")
REQUIRED_FIELDS = rule("metadata.required-fields", E,
                       "the table and every snapshot have the fields their format version requires",
                       "Table Metadata Fields; Snapshots; Appendix E")
SNAPSHOT_IDS_UNIQUE = rule("metadata.snapshot-ids-unique", E, "no two snapshots share a snapshot-id", "Snapshots")
SEQUENCE_NUMBER_BOUND = rule("metadata.sequence-number-bound", E,
                             "every snapshot's sequence-number is <= last-sequence-number", "Sequence Numbers")
SEQUENCE_NUMBER_PARENT = rule("metadata.sequence-number-after-parent", E,
                              "every snapshot's sequence-number is greater than its parent's (v2+)",
                              "Sequence Numbers")
CURRENT_SNAPSHOT_MAIN = rule("metadata.current-snapshot-is-main", E,
                             "current-snapshot-id equals the snapshot of the main branch", "Snapshot References")
REFS_EXIST = rule("metadata.refs-exist", E,
                  "current-snapshot-id and every branch and tag name a snapshot of the table",
                  "Snapshot References")
PARENT_CYCLE = rule("metadata.snapshot-parent-cycle", E,
                    "no snapshot is its own ancestor through parent-snapshot-id links", "Snapshots")
NUMBER_RANGE = rule("metadata.number-range", E,
                    "every number fits a signed 64-bit long; sequence numbers, timestamps and row ids are "
                    ">= 0", "Table Metadata Fields; Snapshots")
SNAPSHOT_LOG_ORDER = rule("metadata.snapshot-log-ordered", E,
                          "snapshot-log is ordered by timestamp (Java's one-minute tolerance)", "Table Metadata Fields")
METADATA_LOG_ORDER = rule("metadata.metadata-log-ordered", E,
                          "metadata-log is ordered by timestamp (Java's one-minute tolerance)", "Table Metadata Fields")
LAST_COLUMN_ID = rule("metadata.last-column-id", E, "last-column-id is >= every field id of every schema",
                      "Table Metadata Fields")
FIELD_IDS_UNIQUE = rule("metadata.field-ids-unique", E,
                        "field ids (incl. list elements, map keys and values) are unique within a schema",
                        "Schemas and Data Types")
RESERVED_FIELD_IDS = rule("metadata.reserved-field-ids", E,
                          f"no schema field uses a reserved id (> {MAX_USER_FIELD_ID})", "Reserved Field IDs")
IDENTIFIER_FIELDS = rule("metadata.identifier-fields", E,
                         "identifier fields exist, are required primitives (not float/double) and not nested "
                         "in optional structs, lists or maps", "Identifier Field IDs")
IDS_UNIQUE = rule("metadata.ids-unique", E, "schema ids, partition spec ids and sort order ids are each unique",
                  "Table Metadata Fields")
SNAPSHOT_SCHEMA = rule("metadata.snapshot-schema-exists", E, "a snapshot's schema-id names a schema of the table",
                       "Snapshots")
PARTITION_FIELD_IDS = rule("metadata.partition-field-ids", E,
                           "partition field ids are unique within a spec and, from v2, one id means one "
                           "field across specs", "Partition Evolution")
LAST_PARTITION_ID = rule("metadata.last-partition-id", E, "last-partition-id is >= every partition field id",
                         "Table Metadata Fields")
PARTITION_TRANSFORMS = rule("metadata.partition-transforms", E,
                            "partition fields name existing source columns and transforms valid for their types",
                            "Partition Transforms")
SORT_ORDERS = rule("metadata.sort-orders", E,
                   "sort fields name existing columns with valid transforms; order-id 0 is the unsorted order",
                   "Sorting")
DEFAULT_VALUES = rule("metadata.default-values", E,
                      "initial-default and write-default are v3+ only and parse as values of the field's type",
                      "Default values")
NEXT_ROW_ID = rule("metadata.next-row-id", E,
                   "v3: next-row-id is >= every snapshot's first-row-id + added-rows", "Row Lineage")
ROW_ID_RANGES = rule("metadata.snapshot-row-id-ranges", E,
                     "v3: snapshots' row-id ranges [first-row-id, first-row-id + added-rows) do not overlap",
                     "Row Lineage")

_TABLE_REQUIRED = {
    1: ("format-version", "location", "last-updated-ms", "last-column-id"),
    2: ("format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms", "last-column-id",
        "schemas", "current-schema-id", "partition-specs", "default-spec-id", "last-partition-id",
        "sort-orders", "default-sort-order-id"),
}
_TABLE_REQUIRED[3] = (*_TABLE_REQUIRED[2], "next-row-id")
_TABLE_REQUIRED[4] = tuple(k for k in _TABLE_REQUIRED[3] if k != "location")  # v4: the catalog may give it
_SNAPSHOT_REQUIRED = {1: ("snapshot-id", "timestamp-ms"),
                      2: ("snapshot-id", "sequence-number", "timestamp-ms", "manifest-list", "summary")}
_SNAPSHOT_REQUIRED[3] = (*_SNAPSHOT_REQUIRED[2], "first-row-id")
_LOG_TOLERANCE_MS = 60_000  # Java's TableMetadata accepts log entries this much out of order


def check_raw(rep: Reporter, raw: Any, path: str) -> None:
    """Checks on the JSON before it is modelled (so metadata too broken to load is still reported)."""
    if not isinstance(raw, dict):
        return  # the parser's own error (exit 4) says it best
    for p in json_integer_problems(raw):  # the loader refuses these: report them before it does
        rep.report(NUMBER_RANGE, path, p.message, entry=p.entry, **p.values)
    version = raw.get("format-version")
    if not isinstance(version, int) or not MIN_FORMAT_VERSION <= version <= MAX_FORMAT_VERSION:
        rep.report(FORMAT_VERSION, path, f"format-version {version!r} is not one of "
                   f"{MIN_FORMAT_VERSION}..{MAX_FORMAT_VERSION}", format_version=version)
        return
    missing = [k for k in _TABLE_REQUIRED[version] if raw.get(k) is None]
    if version == 1:
        if raw.get("schema") is None and raw.get("schemas") is None:
            missing.append("schema")
        if raw.get("partition-spec") is None and raw.get("partition-specs") is None:
            missing.append("partition-spec")
    for key in missing:
        rep.report(REQUIRED_FIELDS, path, f"format v{version} table metadata lacks required field {key!r}",
                   entry=key, format_version=version, field=key)
    snapshots = raw.get("snapshots")
    snaps = [s for s in snapshots if isinstance(s, dict)] if isinstance(snapshots, list) else []
    for i, snap in enumerate(snapshots if isinstance(snapshots, list) else []):
        if not isinstance(snap, dict):
            continue
        where = f"snapshots[{i}]"
        required = list(_SNAPSHOT_REQUIRED[min(version, 3)])
        if version == 1 and snap.get("manifest-list") is None and snap.get("manifests") is None:
            required.append("manifest-list")
        if version >= 4 and snap.get("root-manifest") is not None:  # v4: a root manifest replaces the list
            required.remove("manifest-list")
        if "first-row-id" in required and not _after_v3_upgrade(snap, snaps):
            required.remove("first-row-id")  # spec "Row Lineage for Upgraded Tables": older snapshots keep none
        if version >= 2 and _v1_snapshot(snap, snaps):  # Appendix E: v1 snapshots read as sequence number 0
            required = [k for k in required if k not in ("sequence-number", "summary")]
        for key in required:
            if snap.get(key) is None:
                rep.report(REQUIRED_FIELDS, path, f"format v{version} snapshot {snap.get('snapshot-id')} lacks "
                           f"required field {key!r}", entry=where, snapshot_id=snap.get("snapshot-id"), field=key)
        summary = snap.get("summary")
        if version >= 2 and isinstance(summary, dict) and "operation" not in summary:
            rep.report(REQUIRED_FIELDS, path, f"snapshot {snap.get('snapshot-id')} summary lacks 'operation'",
                       entry=where, snapshot_id=snap.get("snapshot-id"), field="summary.operation")
        if version >= 2 and snap.get("manifests") is not None:
            rep.report(REQUIRED_FIELDS, path, f"format v{version} snapshot {snap.get('snapshot-id')} has v1 "
                       "'manifests' (must use manifest-list)", entry=where, field="manifests")


def _v1_snapshot(snap: dict[str, Any], snaps: list[dict[str, Any]]) -> bool:
    """Whether a snapshot without a sequence-number was written while the table was v1: it is older
    than every snapshot that has one (an upgrade keeps v1 snapshots as they were)."""
    if snap.get("sequence-number") is not None:
        return False
    ts = snap.get("timestamp-ms")
    later = [s.get("timestamp-ms") for s in snaps if s.get("sequence-number") is not None]
    return isinstance(ts, int) and all(isinstance(t, int) and ts <= t for t in later)


def _after_v3_upgrade(snap: dict[str, Any], snaps: list[dict[str, Any]]) -> bool:
    """Whether a snapshot was committed after the table became v3: a snapshot with row lineage
    (first-row-id) has a lower or equal sequence number. Snapshots of a table created as v3 all have one."""
    seq = snap.get("sequence-number")
    lineage = [s.get("sequence-number") for s in snaps if s.get("first-row-id") is not None]
    return bool(lineage) and isinstance(seq, int) and any(isinstance(x, int) and x <= seq for x in lineage)


def check_metadata(ctx: Context) -> None:
    md, rep, path = ctx.metadata, ctx.reporter, ctx.metadata_location
    _sound(ctx, md, path)
    _snapshots(ctx, md, path)
    _refs(ctx, md, path)
    if md.format_version >= 3:
        _row_id_ranges(ctx, md, path)
    for name, log, rule_ in (("snapshot-log", md.snapshot_log, SNAPSHOT_LOG_ORDER),
                             ("metadata-log", md.metadata_log, METADATA_LOG_ORDER)):
        for i in range(1, len(log)):
            if log[i].timestamp_ms + _LOG_TOLERANCE_MS < log[i - 1].timestamp_ms:
                rep.report(rule_, path, f"{name}[{i}] timestamp {log[i].timestamp_ms} is before "
                           f"{name}[{i - 1}] timestamp {log[i - 1].timestamp_ms}", entry=f"{name}[{i}]",
                           previous=log[i - 1].timestamp_ms, timestamp=log[i].timestamp_ms)
    for label, ids in (("schema", [s.schema_id for s in md.schemas]),
                       ("partition spec", [s.spec_id for s in md.partition_specs]),
                       ("sort order", [o.order_id for o in md.sort_orders])):
        for dup in sorted({i for i in ids if ids.count(i) > 1}):
            rep.report(IDS_UNIQUE, path, f"{label} id {dup} is used {ids.count(dup)} times", entry=label, id=dup)
    for schema in md.schemas:
        _schema(ctx, md, schema, path)
    _partition_specs(ctx, md, path)
    _sort_orders(ctx, md, path)


def _snapshots(ctx: Context, md: TableMetadata, path: str) -> None:
    rep = ctx.reporter
    by_id = md.snapshots_by_id
    for s in md.snapshots:
        where = f"snapshot {s.snapshot_id}"
        parent = by_id.get(s.parent_snapshot_id) if s.parent_snapshot_id is not None else None
        # Two snapshots at 0 are both from v1 (Appendix E: a v1 snapshot reads as sequence number 0).
        if (md.format_version >= 2 and parent is not None and s.sequence_number <= parent.sequence_number
                and not s.sequence_number == parent.sequence_number == 0):
            rep.report(SEQUENCE_NUMBER_PARENT, path, f"snapshot {s.snapshot_id} has sequence-number "
                       f"{s.sequence_number}, not greater than its parent {parent.snapshot_id}'s "
                       f"{parent.sequence_number}", entry=where, sequence_number=s.sequence_number,
                       parent_sequence_number=parent.sequence_number)
        if s.schema_id is not None and md.schema_by_id(s.schema_id) is None:
            rep.report(SNAPSHOT_SCHEMA, path, f"snapshot {s.snapshot_id} names schema-id {s.schema_id}, "
                       "which the table lacks", entry=where, schema_id=s.schema_id)
        if md.format_version >= 3 and s.first_row_id is not None:
            end = s.first_row_id + (s.added_rows or 0)
            if md.next_row_id < end:
                rep.report(NEXT_ROW_ID, path, f"next-row-id {md.next_row_id} is below snapshot {s.snapshot_id}'s "
                           f"first-row-id {s.first_row_id} + added-rows {s.added_rows or 0}", entry=where,
                           next_row_id=md.next_row_id, first_row_id=s.first_row_id, added_rows=s.added_rows)


# Kinds of icectl.spec.soundness problems and the rules reporting them (the write gate refuses on
# each); current-snapshot-is-main (stricter) and ids-unique have their own checks below.
_SOUND_RULES = {"snapshot-ids-unique": SNAPSHOT_IDS_UNIQUE, "sequence-number-bound": SEQUENCE_NUMBER_BOUND,
                "refs-exist": REFS_EXIST, "snapshot-parent-cycle": PARENT_CYCLE, "number-range": NUMBER_RANGE}


def _sound(ctx: Context, md: TableMetadata, path: str) -> None:
    for p in metadata_problems(md):
        r = _SOUND_RULES.get(p.kind)
        if r is None:
            continue
        if p.kind == "number-range" and not isinstance(p.values.get("value"), int):
            continue  # beyond int64: check_raw reported it where the JSON has it
        ctx.reporter.report(r, path, p.message, entry=p.entry, **p.values)


def _row_id_ranges(ctx: Context, md: TableMetadata, path: str) -> None:
    ranges = sorted((s.first_row_id, s.first_row_id + (s.added_rows or 0), s.snapshot_id) for s in md.snapshots
                    if s.first_row_id is not None and (s.added_rows or 0) > 0)
    for (a_start, a_end, a_id), (b_start, b_end, b_id) in itertools.pairwise(ranges):
        if b_start < a_end:
            ctx.reporter.report(ROW_ID_RANGES, path, f"snapshot {b_id}'s row ids [{b_start}, {b_end}) overlap "
                                f"snapshot {a_id}'s [{a_start}, {a_end})", entry=f"snapshot {b_id}",
                                range=[b_start, b_end], overlaps=[a_start, a_end], other_snapshot_id=a_id)


def _refs(ctx: Context, md: TableMetadata, path: str) -> None:
    rep = ctx.reporter
    main = md.refs.get("main")
    main_id = main.snapshot_id if main is not None else None
    if main_id != md.current_snapshot_id:
        rep.report(CURRENT_SNAPSHOT_MAIN, path, f"current-snapshot-id {md.current_snapshot_id} differs from "
                   f"the main branch's snapshot {main_id}", entry="current-snapshot-id",
                   current_snapshot_id=md.current_snapshot_id, main=main_id)


def _walk(fields: tuple[NestedField, ...], in_optional: bool,
          in_collection: bool) -> Iterator[tuple[NestedField, bool, bool]]:
    """(field, under an optional struct?, under a list or map?) for every field, list element, map key/value."""
    for f in fields:
        yield f, in_optional, in_collection
        yield from _walk_type(f.field_type, in_optional or f.optional, in_collection)


def _walk_type(t: IcebergType, in_optional: bool, in_collection: bool) -> Iterator[tuple[NestedField, bool, bool]]:
    if isinstance(t, StructType):
        yield from _walk(t.fields, in_optional, in_collection)
    elif isinstance(t, ListType):
        yield from _walk((NestedField(t.element_id, "element", t.element_type, t.element_required),),
                         in_optional, True)
    elif isinstance(t, MapType):
        yield from _walk((NestedField(t.key_id, "key", t.key_type, True),
                          NestedField(t.value_id, "value", t.value_type, t.value_required)), in_optional, True)


def _schema(ctx: Context, md: TableMetadata, schema: Schema, path: str) -> None:
    rep = ctx.reporter
    where = f"schema {schema.schema_id}"
    ids = list(schema.all_ids())
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        rep.report(FIELD_IDS_UNIQUE, path, f"schema {schema.schema_id} uses field id {dup} {ids.count(dup)} times",
                   entry=where, field_id=dup)
    for i in sorted(set(ids)):
        if i > md.last_column_id:
            rep.report(LAST_COLUMN_ID, path, f"schema {schema.schema_id} field id {i} is above last-column-id "
                       f"{md.last_column_id}", entry=where, field_id=i, last_column_id=md.last_column_id)
        if i > MAX_USER_FIELD_ID:
            rep.report(RESERVED_FIELD_IDS, path, f"schema {schema.schema_id} field id {i} is reserved "
                       f"(> {MAX_USER_FIELD_ID})", entry=where, field_id=i)
    placement = {f.field_id: (f, opt, coll) for f, opt, coll in _walk(schema.fields, False, False)}
    for fid in schema.identifier_field_ids:
        found = placement.get(fid)
        problem = None
        if found is None:
            problem = "does not exist"
        else:
            f, in_optional, in_collection = found
            if not isinstance(f.field_type, PrimitiveType) or f.field_type.name in ("float", "double", "variant"):
                problem = f"has type {f.field_type}, not an allowed primitive"
            elif not f.required:
                problem = "is optional"
            elif in_optional or in_collection:
                problem = "is nested in an optional struct, a list or a map"
        if problem:
            rep.report(IDENTIFIER_FIELDS, path, f"schema {schema.schema_id} identifier field {fid} {problem}",
                       entry=where, field_id=fid)
    for f, _opt, _coll in _walk(schema.fields, False, False):
        for key, present, value in (("initial-default", f.has_initial_default, f.initial_default),
                                    ("write-default", f.has_write_default, f.write_default)):
            if not present or value is None:
                continue
            if md.format_version < 3:
                rep.report(DEFAULT_VALUES, path, f"field {f.field_id} ({f.name}) has {key} in a format "
                           f"v{md.format_version} table (v3+ only)", entry=where, field_id=f.field_id, key=key)
                continue
            try:
                from_json_single_value(f.field_type, value)
            except IcectlError as e:
                rep.report(DEFAULT_VALUES, path, f"field {f.field_id} ({f.name}) {key} {value!r} is not a "
                           f"{f.field_type}: {e.message}", entry=where, field_id=f.field_id, key=key, value=value)


def _source_type(md: TableMetadata, source_id: int) -> IcebergType | None:
    """The type of a column in the current schema, else in the newest older schema that has it."""
    for schema in (md.schema_by_id(md.current_schema_id), *reversed(md.schemas)):
        t = schema.find_type(source_id) if schema is not None else None
        if t is not None:
            return t
    return None


def _transform_problem(md: TableMetadata, transform: Transform, source_ids: tuple[int, ...]) -> str | None:
    if transform.is_unknown:
        return None  # the spec lets readers carry transforms they do not know
    for sid in source_ids:
        t = _source_type(md, sid)
        if t is None:
            return f"source column {sid} is in no schema"
        if not transform.can_transform(t):
            return f"transform {transform} cannot apply to source column {sid} of type {t}"
    return None


def _partition_specs(ctx: Context, md: TableMetadata, path: str) -> None:
    rep = ctx.reporter
    meaning: dict[int, tuple[tuple[int, ...], str, int]] = {}
    for spec in md.partition_specs:
        where = f"partition spec {spec.spec_id}"
        ids = [f.field_id for f in spec.fields]
        for dup in sorted({i for i in ids if ids.count(i) > 1}):
            rep.report(PARTITION_FIELD_IDS, path, f"partition spec {spec.spec_id} uses field id {dup} twice",
                       entry=where, field_id=dup)
        for f in spec.fields:
            if f.field_id > md.last_partition_id:
                rep.report(LAST_PARTITION_ID, path, f"partition field {f.name!r} id {f.field_id} is above "
                           f"last-partition-id {md.last_partition_id}", entry=where, field_id=f.field_id,
                           last_partition_id=md.last_partition_id)
            problem = _transform_problem(md, f.transform, f.source_ids)
            if problem:
                rep.report(PARTITION_TRANSFORMS, path, f"partition field {f.name!r}: {problem}", entry=where,
                           field=f.name, transform=str(f.transform), source_ids=list(f.source_ids))
            seen = meaning.get(f.field_id)
            if (md.format_version >= 2 and seen is not None and not f.transform.is_void
                    and not seen[1] == "void" and (seen[0], seen[1]) != (f.source_ids, str(f.transform))):
                rep.report(PARTITION_FIELD_IDS, path, f"partition field id {f.field_id} means "
                           f"{seen[1]}({list(seen[0])}) in spec {seen[2]} but {f.transform}({list(f.source_ids)}) "
                           f"in spec {spec.spec_id}", entry=where, field_id=f.field_id)
            if seen is None:
                meaning[f.field_id] = (f.source_ids, str(f.transform), spec.spec_id)


def _sort_orders(ctx: Context, md: TableMetadata, path: str) -> None:
    rep = ctx.reporter
    for order in md.sort_orders:
        where = f"sort order {order.order_id}"
        if (order.order_id == 0) != (not order.fields):
            rep.report(SORT_ORDERS, path, f"sort order {order.order_id} has {len(order.fields)} fields; "
                       "order-id 0 is reserved for the unsorted order, and only it", entry=where,
                       order_id=order.order_id, fields=len(order.fields))
        for f in order.fields:
            problem = _transform_problem(md, f.transform, f.source_ids)
            if problem:
                rep.report(SORT_ORDERS, path, f"sort order {order.order_id}: {problem}", entry=where,
                           transform=str(f.transform), source_ids=list(f.source_ids))
