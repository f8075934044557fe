"""A new table's first metadata, built as Iceberg Java's ``TableMetadata.newTableMetadata`` builds it.

Pure: no I/O. The CLI parses the schema (``icectl.ops.create.ddl`` / ``icectl.ops.create.schema_file``), calls
:func:`new_table_metadata` and hands the result to the commit protocol.

What Java does on create, and this module repeats (Iceberg 1.10.2):

* column ids are always reassigned by ``TypeUtil.assignFreshIds``: all fields of a struct
  first, then each field's type depth-first; a list's element id, a map's key then value id,
  before their inner types. ``last-column-id`` is the last id handed out.
* the partition spec is rebuilt on the fresh ids (spec id 0, field ids 1000, 1001, ...), sources
  looked up by column name; ``last-partition-id`` is 999 for an unpartitioned table.
* the sort order becomes order 1 (the only entry of ``sort-orders``), or the unsorted order 0.
* reserved properties (``format-version``, ``uuid``, ...) are dropped, and
  ``write.parquet.compression-codec=zstd`` is added unless given, in Java's HashMap key order.
* no snapshots, no refs, sequence number 0, ``next-row-id`` 0.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from icectl.errors import CorruptInputError, UnsupportedError, UsageError
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import (
    PARTITION_DATA_ID_START,
    UNPARTITIONED_LAST_ASSIGNED_ID,
    PartitionField,
    PartitionSpec,
)
from icectl.spec.properties import COMMIT_PROPERTIES, FORMAT_VERSION_PROPERTY, RESERVED_PROPERTIES
from icectl.spec.schema import (
    DOUBLE,
    FLOAT,
    TIMESTAMP_NS,
    TIMESTAMPTZ_NS,
    UNKNOWN,
    VARIANT,
    GeographyType,
    GeometryType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    Schema,
    StructType,
)
from icectl.spec.sorting import UNSORTED, NullOrder, SortDirection, SortField, SortOrder
from icectl.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from icectl.spec.values import from_json_single_value

MIN_CREATE_FORMAT_VERSION = 1
MAX_CREATE_FORMAT_VERSION = 3  # v4 tables come from `icectl upgrade`, never from create
MIN_V3_FORMAT_VERSION = 3  # nanosecond timestamps, variant, unknown, geo types, default values
INITIAL_SORT_ORDER_ID = 1

PARQUET_COMPRESSION = "write.parquet.compression-codec"
PARQUET_COMPRESSION_DEFAULT = "zstd"  # Java sets it on every new table since 1.4.0
_COMMIT_PROPERTIES = tuple(p.name for p in COMMIT_PROPERTIES)
_METRICS_COLUMN_PREFIX = "write.metadata.metrics.column."

K = TypeVar("K", str, int)

_V3_TYPES = (TIMESTAMP_NS, TIMESTAMPTZ_NS, VARIANT, UNKNOWN)
_NULL_DEFAULT_ONLY = (VARIANT, UNKNOWN)  # spec: these (and geo types) must default to null


# --------------------------------------------------------------------------- fresh column ids


def assign_fresh_ids(schema: Schema, schema_id: int = 0,
                     next_id: Callable[[], int] | None = None) -> tuple[Schema, int]:
    """``TypeUtil.assignFreshIds``: the same schema with ids 1, 2, ... and the last id assigned.

    Docs and defaults are kept; identifier fields are carried over by name; unknown JSON keys
    are dropped (Java does not keep them either).
    """
    counter = [0]

    def default_next() -> int:
        counter[0] += 1
        return counter[0]

    fields = _fresh_struct(schema.fields, next_id or default_next)
    fresh = Schema(fields, schema_id=schema_id)
    if schema.identifier_field_ids:
        by_name = {fresh.column_name(i): i for i in fresh.field_ids()}
        names = []
        for old in schema.identifier_field_ids:
            name = schema.column_name(old)
            if name is None or name not in by_name:
                raise UsageError(f"identifier field id {old} is not a column of the schema")
            names.append(name)
        # refreshIdentifierFields goes through a HashSet of names, then a HashSet of ids: that
        # order is the order Java writes identifier-field-ids in.
        ids = java_hash_map_order([by_name[n] for n in java_hash_map_order(names)])
        fresh = replace(fresh, identifier_field_ids=tuple(ids))
    return fresh, max(counter[0], fresh.highest_field_id())


def _fresh_struct(fields: Sequence[NestedField], next_id: Callable[[], int]) -> tuple[NestedField, ...]:
    new_ids = [next_id() for _ in fields]  # this struct's fields first, then their types
    return tuple(replace(f, field_id=new_id, field_type=_fresh_type(f.field_type, next_id), extra=())
                 for f, new_id in zip(fields, new_ids, strict=True))


def _fresh_type(t: IcebergType, next_id: Callable[[], int]) -> IcebergType:
    if isinstance(t, StructType):
        return StructType(_fresh_struct(t.fields, next_id))
    if isinstance(t, ListType):
        element_id = next_id()
        return ListType(element_id, _fresh_type(t.element_type, next_id), t.element_required)
    if isinstance(t, MapType):
        key_id, value_id = next_id(), next_id()  # both ids before either type, key type first
        key_type = _fresh_type(t.key_type, next_id)
        return MapType(key_id, key_type, value_id, _fresh_type(t.value_type, next_id), t.value_required)
    return t


# --------------------------------------------------------------------------- schema checks


def check_schema(schema: Schema, format_version: int) -> None:
    """What Java checks when a schema enters table metadata; raises UsageError naming the column."""
    ids = list(schema.all_ids())
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise UsageError(f"the schema assigns field ids more than once: {dupes}")
    names = [schema.column_name(i) for i in schema.field_ids()]
    dup_names = sorted({n for n in names if n is not None and names.count(n) > 1})
    if dup_names:
        raise UsageError(f"the schema has more than one column named {', '.join(map(repr, dup_names))}")
    problems: list[str] = []
    for field_id in schema.field_ids():
        f = schema.find_field(field_id)
        assert f is not None
        name = schema.column_name(field_id)
        problems += _field_problems(name or f.name, f, format_version)
    if problems:
        raise UsageError(f"invalid schema for format v{format_version}: {'; '.join(problems)}")
    for field_id in schema.identifier_field_ids:
        _check_identifier_field(schema, field_id)


def needs_v3(t: IcebergType) -> bool:
    """Types added in format v3 (``Schema.MIN_FORMAT_VERSIONS``)."""
    return t in _V3_TYPES or isinstance(t, (GeometryType, GeographyType))


def may_have_default(t: IcebergType) -> bool:
    """Nested types (as Java's ``castDefault``), unknown, variant and geo types default to null only."""
    return t.is_primitive and t not in _NULL_DEFAULT_ONLY and not isinstance(t, (GeometryType, GeographyType))


def _field_problems(name: str, f: NestedField, format_version: int) -> list[str]:
    t = f.field_type
    out = []
    if not name:
        out.append("a column has an empty name")
    if needs_v3(t) and format_version < MIN_V3_FORMAT_VERSION:
        out.append(f"{name}: type {t} needs format v3 or later")
    if t == UNKNOWN and f.required:  # Java refuses it in NestedField; spec: must be optional
        out.append(f"{name}: a column of type unknown must be optional")
    has_default = (f.has_initial_default and f.initial_default is not None) or (
        f.has_write_default and f.write_default is not None)
    if not has_default:
        return out
    if format_version < MIN_V3_FORMAT_VERSION:
        out.append(f"{name}: default values need format v3 or later")
    elif not may_have_default(t):
        out.append(f"{name}: a {t} column can only default to null")
    else:
        for key, value in (("initial-default", f.initial_default), ("write-default", f.write_default)):
            try:
                from_json_single_value(t, value)
            except (CorruptInputError, UnsupportedError) as e:
                out.append(f"{name}: invalid {key}: {e}")
    return out


def _check_identifier_field(schema: Schema, field_id: int) -> None:
    """``Schema.validateIdentifierField``: required primitive, not float/double, no list/map parent."""
    f = schema.find_field(field_id)
    if f is None:
        raise UsageError(f"identifier field id {field_id} is not in the schema")
    name = schema.column_name(field_id)
    if not isinstance(f.field_type, PrimitiveType) or f.field_type == VARIANT:
        raise UsageError(f"identifier field {name} must be of a primitive type, not {f.field_type}")
    if not f.required:
        raise UsageError(f"identifier field {name} must be required (not null)")
    if f.field_type in (FLOAT, DOUBLE):
        raise UsageError(f"identifier field {name} must not be float or double")
    for parent in _parents(schema, field_id):
        if not isinstance(parent.field_type, StructType):
            raise UsageError(f"identifier field {name} must not be nested in a {parent.field_type}")
        if not parent.required:
            raise UsageError(f"identifier field {name} must not be nested in optional field {parent.name}")


def _parents(schema: Schema, field_id: int) -> list[NestedField]:
    """The fields enclosing ``field_id``, outermost first (lists and maps included)."""
    path: list[NestedField] = []

    def walk(fields: Iterable[NestedField], trail: list[NestedField]) -> bool:
        for f in fields:
            if f.field_id == field_id:
                path.extend(trail)
                return True
            if walk(_children(f.field_type), [*trail, f]):
                return True
        return False

    walk(schema.fields, [])
    return path


def _children(t: IcebergType) -> list[NestedField]:
    if isinstance(t, StructType):
        return list(t.fields)
    if isinstance(t, ListType):
        return [NestedField(t.element_id, "element", t.element_type, t.element_required)]
    if isinstance(t, MapType):
        return [NestedField(t.key_id, "key", t.key_type, True),
                NestedField(t.value_id, "value", t.value_type, t.value_required)]
    return []


# --------------------------------------------------------------------------- partition specs


_NAME_SUFFIX: dict[type, str] = {BucketTransform: "bucket", TruncateTransform: "trunc", YearTransform: "year",
                                 MonthTransform: "month", DayTransform: "day", HourTransform: "hour",
                                 VoidTransform: "null"}


def default_partition_name(column_name: str, transform: Transform) -> str:
    """The name Java's ``PartitionSpec.Builder`` gives: ``ts_day``, ``id_bucket``, ``name_trunc``."""
    if isinstance(transform, IdentityTransform):
        return column_name
    suffix = _NAME_SUFFIX.get(type(transform))
    if suffix is None:
        raise UsageError(f"transform {transform} cannot be used to create a table")
    return f"{column_name}_{suffix}"


@dataclass(frozen=True)
class PartitionRequest:
    """One partition field to add: the source column, the transform, an optional explicit name."""

    source_id: int
    transform: Transform
    name: str | None = None


def _dedup_name(transform: Transform) -> str | None:
    # Java checks redundancy for identity and the time transforms only (year..hour share "time").
    if isinstance(transform, IdentityTransform):
        return "identity"
    if isinstance(transform, (YearTransform, MonthTransform, DayTransform, HourTransform)):
        return "time"
    return None


def build_partition_spec(schema: Schema, requests: Sequence[PartitionRequest], spec_id: int = 0,
                         *, first_field_id: int = PARTITION_DATA_ID_START) -> PartitionSpec:
    """Java's ``PartitionSpec.builderFor(schema).identity(..)/bucket(..)/...build()``."""
    names: set[str] = set()
    dedup: dict[tuple[int, str], PartitionField] = {}
    fields: list[PartitionField] = []
    for i, req in enumerate(requests):
        column = schema.column_name(req.source_id)
        if column is None:
            raise UsageError(f"cannot find source column with id {req.source_id}")
        name = req.name if req.name is not None else default_partition_name(column, req.transform)
        same_source_ok = isinstance(req.transform, (IdentityTransform, VoidTransform))
        _check_partition_name(schema, name, req.source_id if same_source_ok else None, names)
        field = PartitionField((req.source_id,), first_field_id + i, name, req.transform)
        key = _dedup_name(req.transform)
        if key is not None:
            earlier = dedup.get((req.source_id, key))
            if earlier is not None:
                raise UsageError(f"redundant partition field {name} ({req.transform}({column})) conflicts "
                                 f"with {earlier.name} ({earlier.transform}({column}))")
            dedup[(req.source_id, key)] = field
        fields.append(field)
    spec = PartitionSpec(spec_id, tuple(fields))
    check_partition_spec(spec, schema)
    return spec


def _check_partition_name(schema: Schema, name: str, source_id: int | None, taken: set[str]) -> None:
    """``Builder.checkAndAddPartitionName``: unique, non-empty, no clash with another column."""
    existing = _find_by_name(schema, name)
    if source_id is not None:
        if existing is not None and existing != source_id:
            raise UsageError(f"partition name {name!r} is the name of a different column")
    elif existing is not None:
        raise UsageError(f"partition name {name!r} is already a column name; choose another name")
    if not name:
        raise UsageError("a partition field name must not be empty")
    if name in taken:
        raise UsageError(f"partition name {name!r} is used more than once")
    taken.add(name)


def _find_by_name(schema: Schema, name: str) -> int | None:
    return next((i for i in schema.field_ids() if schema.column_name(i) == name), None)


def check_partition_spec(spec: PartitionSpec, schema: Schema) -> None:
    """``PartitionSpec.checkCompatibility``: primitive sources the transform accepts, struct parents."""
    for f in spec.fields:
        if f.transform.is_void:
            continue
        if f.transform.is_unknown:
            raise UsageError(f"partition field {f.name}: unknown transform {f.transform}")
        for source_id in f.source_ids:
            _check_source(schema, source_id, f.transform, f"partition field {f.name}")


def _check_source(schema: Schema, source_id: int, transform: Transform, what: str) -> None:
    f = schema.find_field(source_id)
    if f is None:
        raise UsageError(f"{what}: cannot find source column with id {source_id}")
    name = schema.column_name(source_id)
    t = f.field_type
    if not t.is_primitive or t == VARIANT:
        raise UsageError(f"{what}: cannot use column {name} of non-primitive type {t}")
    if not transform.can_transform(t):
        raise UsageError(f"{what}: transform {transform} cannot be applied to column {name} of type {t}")
    for parent in _parents(schema, source_id):
        if not isinstance(parent.field_type, StructType):
            raise UsageError(f"{what}: column {name} is inside a {parent.field_type}; only struct "
                             "fields can be used")


# --------------------------------------------------------------------------- sort orders


@dataclass(frozen=True)
class SortRequest:
    source_id: int
    transform: Transform
    direction: SortDirection = "asc"
    null_order: NullOrder | None = None  # None: Java's default, nulls first for asc, last for desc


def build_sort_order(schema: Schema, requests: Sequence[SortRequest],
                     order_id: int = INITIAL_SORT_ORDER_ID) -> SortOrder:
    """Java's ``SortOrder.builderFor(schema).asc(..)/desc(..)``; no fields gives the unsorted order."""
    if not requests:
        return UNSORTED
    fields = []
    for req in requests:
        null_order = req.null_order or ("nulls-first" if req.direction == "asc" else "nulls-last")
        fields.append(SortField((req.source_id,), req.transform, req.direction, null_order))
    order = SortOrder(order_id, tuple(fields))
    check_sort_order(order, schema)
    return order


def check_sort_order(order: SortOrder, schema: Schema) -> None:
    """``SortOrder.checkCompatibility`` (plus: no void, no column inside a list or map)."""
    for i, f in enumerate(order.fields):
        what = f"sort field {i + 1}"
        if f.transform.is_void or f.transform.is_unknown:
            raise UsageError(f"{what}: transform {f.transform} cannot order rows")
        for source_id in f.source_ids:
            _check_source(schema, source_id, f.transform, what)


# --------------------------------------------------------------------------- properties


def _java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")  # String.hashCode runs over UTF-16 code units
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_bucket(key: str | int, capacity: int) -> int:
    h = _java_string_hash(key) if isinstance(key, str) else key & 0xFFFFFFFF  # Integer.hashCode
    return (h ^ (h >> 16)) & (capacity - 1)  # HashMap.hash spreads the high bits


def _table_size_for(n: int) -> int:
    size = 1
    while size < n:
        size *= 2
    return size


def java_hash_map_order(keys: Sequence[K], capacity: int | None = None) -> list[K]:
    """Iteration order of a ``java.util.HashMap``/``HashSet`` of strings or ints filled in this order.

    Buckets in index order, insertion order within a bucket (resizes keep it). ``capacity``
    None means a default map grown by puts (16, doubled past 3/4 full).
    """
    if capacity is None:
        capacity = 16
        while len(keys) > capacity * 3 // 4:
            capacity *= 2
    return sorted(keys, key=lambda k: java_hash_bucket(k, capacity))  # stable: keeps bucket order


def persisted_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """``TableMetadata.persistedProperties`` then ``Builder.setProperties``, in Java's key order."""
    persisted = {PARQUET_COMPRESSION: PARQUET_COMPRESSION_DEFAULT}
    persisted.update((k, v) for k, v in properties.items() if k not in RESERVED_PROPERTIES)
    first = java_hash_map_order(list(persisted))  # Maps.newHashMap() grown by put
    # Builder's map gets putAll into an empty HashMap: pre-sized to tableSizeFor(n / 0.75 + 1).
    final = java_hash_map_order(first, _table_size_for(int(len(first) / 0.75 + 1)))
    return {k: persisted[k] for k in final}


def _check_properties(properties: Mapping[str, str], schema: Schema) -> None:
    for key in _COMMIT_PROPERTIES:  # PropertyUtil.validateCommitProperties
        if key in properties:
            try:
                value = int(properties[key])
            except ValueError:
                raise UsageError(f"table property {key} must be an integer, got {properties[key]!r}") from None
            if value < 0:
                raise UsageError(f"table property {key} must not be negative, got {value}")
    columns = {schema.column_name(i) for i in schema.field_ids()}
    for key in properties:  # MetricsConfig.validateReferencedColumns
        if key.startswith(_METRICS_COLUMN_PREFIX) and key[len(_METRICS_COLUMN_PREFIX):] not in columns:
            raise UsageError(f"table property {key} names column {key[len(_METRICS_COLUMN_PREFIX):]!r}, "
                             "which is not in the schema")


# --------------------------------------------------------------------------- new table metadata


def new_table_metadata(*, schema: Schema, location: str | None, partition_spec: PartitionSpec | None,
                       sort_order: SortOrder | None, properties: dict[str, str], format_version: int,
                       table_uuid: str | None = None, now_ms: int | None = None,
                       fresh_ids: bool = True) -> TableMetadata:
    """The metadata of a new, empty table, as Java's ``TableMetadata.newTableMetadata`` makes it.

    ``partition_spec`` and ``sort_order`` refer to ``schema``'s ids; they are rebuilt on the
    fresh ids by column name. ``fresh_ids=False`` keeps the schema's own ids (for files
    already written with field ids); Java always reassigns.
    """
    if not MIN_CREATE_FORMAT_VERSION <= format_version <= MAX_CREATE_FORMAT_VERSION:
        hint = "create a v3 table and run `icectl upgrade`" if format_version == 4 else None
        raise UsageError(f"cannot create a table with format version {format_version}: icectl creates "
                         f"versions {MIN_CREATE_FORMAT_VERSION} to {MAX_CREATE_FORMAT_VERSION}", hint=hint)
    declared = properties.get(FORMAT_VERSION_PROPERTY)
    if declared is not None and declared.strip() != str(format_version):
        raise UsageError(f"table property format-version={declared!r} contradicts format version "
                         f"{format_version}")
    if location == "":  # None: the catalog's server chooses it (REST)
        raise UsageError("a table location is required")
    check_schema(schema, format_version)  # on the caller's ids, so messages name what was given
    if fresh_ids:
        fresh, last_column_id = assign_fresh_ids(schema, 0)
    else:
        fresh, last_column_id = replace(schema, schema_id=0, extra=()), schema.highest_field_id()
    check_schema(fresh, format_version)
    id_map = _id_map(schema, fresh)

    spec = _rebuild_spec(partition_spec, fresh, id_map)
    order = _rebuild_sort_order(sort_order, fresh, id_map)
    persisted = persisted_properties(properties)
    _check_properties(persisted, schema)

    return TableMetadata(
        format_version=format_version,
        table_uuid=table_uuid or str(uuid.uuid4()),
        location=location,
        last_updated_ms=now_ms if now_ms is not None else int(time.time() * 1000),
        last_column_id=last_column_id,
        schemas=(fresh,),
        current_schema_id=fresh.schema_id,
        partition_specs=(spec,),
        default_spec_id=spec.spec_id,
        last_partition_id=max(spec.last_assigned_field_id, UNPARTITIONED_LAST_ASSIGNED_ID),
        last_sequence_number=0,
        properties=persisted,
        current_snapshot_id=None,
        sort_orders=(order,),
        default_sort_order_id=order.order_id,
        refs={},
        next_row_id=0,
    )


def _id_map(old: Schema, new: Schema) -> dict[int, int]:
    """Old id -> fresh id; the two schemas have the same shape, so walk them side by side."""
    out: dict[int, int] = {}

    def walk(a: Sequence[NestedField], b: Sequence[NestedField]) -> None:
        for fa, fb in zip(a, b, strict=True):
            out[fa.field_id] = fb.field_id
            walk(_children(fa.field_type), _children(fb.field_type))

    walk(old.fields, new.fields)
    return out


def _rebuild_spec(spec: PartitionSpec | None, schema: Schema, id_map: Mapping[int, int]) -> PartitionSpec:
    # newTableMetadata: builder.add(freshSourceId, name, transform) for each field, ids from 1000.
    if spec is None or not spec.fields:
        return PartitionSpec(0, ())
    names: set[str] = set()
    fields = []
    for i, f in enumerate(spec.fields):
        sources = []
        for source_id in f.source_ids:
            if source_id not in id_map:
                raise UsageError(f"partition field {f.name}: source column id {source_id} is not in the schema")
            sources.append(id_map[source_id])
        _check_partition_name(schema, f.name, sources[0], names)
        fields.append(PartitionField(tuple(sources), PARTITION_DATA_ID_START + i, f.name, f.transform))
    fresh = PartitionSpec(0, tuple(fields))
    check_partition_spec(fresh, schema)
    return fresh


def _rebuild_sort_order(order: SortOrder | None, schema: Schema, id_map: Mapping[int, int]) -> SortOrder:
    if order is None or order.is_unsorted:
        return UNSORTED
    fields = []
    for f in order.fields:
        missing = [i for i in f.source_ids if i not in id_map]
        if missing:
            raise UsageError(f"sort field {f.transform}: source column id {missing[0]} is not in the schema")
        fields.append(SortField(tuple(id_map[i] for i in f.source_ids), f.transform, f.direction, f.null_order))
    fresh = SortOrder(INITIAL_SORT_ORDER_ID, tuple(fields))
    check_sort_order(fresh, schema)
    return fresh
