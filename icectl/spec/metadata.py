"""Table metadata, format versions 1 to 4 (spec "Table Metadata", Appendix C, Appendix E).

Reading applies Appendix E's v1 defaults. Writing follows Java's ``TableMetadataParser`` for
the format version (key order, v1's duplicate ``schema``/``partition-spec``, ``-1`` vs ``null``
for no current snapshot, ``next-row-id`` from v3), so ``to_json(from_json(x)) == x`` for
metadata written by Iceberg Java.

Older Java writers omitted keys that today's Java always writes (``refs``, ``statistics``,
``partition-statistics``, v1's ``schemas``...). A parsed :class:`TableMetadata` remembers which
keys its file had (``source_keys``) and leaves such an optional key out again while its value
is still the default the reader filled in. Metadata built in code (``source_keys=None``) is
written exactly as Java would.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from dataclasses import dataclass, field
from typing import Any

from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.partitioning import UNPARTITIONED_LAST_ASSIGNED_ID, PartitionSpec
from icectl.spec.schema import NestedField, Schema, StructType
from icectl.spec.snapshots import (
    MAIN_BRANCH,
    EncryptedKey,
    Extra,
    MetadataLogEntry,
    PartitionStatisticsFile,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    StatisticsFile,
    as_object,
    extra_keys,
    obj_list,
    opt_int,
    opt_str,
    req_int,
    req_str,
    str_map,
)
from icectl.spec.sorting import UNSORTED, SortOrder
from icectl.spec.soundness import json_integer_problems

_TOO_DEEP = "table metadata JSON is nested too deeply to be Iceberg metadata"
_RESTORE = "the file is damaged; restore it or an earlier metadata version"
MIN_FORMAT_VERSION = 1
MAX_FORMAT_VERSION = 4  # v4 is icectl's experimental layout (shared/design/v4-layout.md)
MIN_NULL_CURRENT_SNAPSHOT_VERSION = 3  # Java writes null, not -1, for "no snapshot" from v3
MIN_ROW_LINEAGE_VERSION = 3
MIN_OPTIONAL_LOCATION_VERSION = 4  # Java main: location may come from the catalog in v4

_KNOWN_KEYS = {
    "format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms",
    "last-column-id", "schema", "schemas", "current-schema-id", "partition-spec", "partition-specs",
    "default-spec-id", "last-partition-id", "properties", "current-snapshot-id", "snapshots",
    "snapshot-log", "metadata-log", "sort-orders", "default-sort-order-id", "refs", "statistics",
    "partition-statistics", "next-row-id", "encryption-keys",
}


def _default_refs(current_snapshot_id: int | None) -> dict[str, SnapshotRef]:
    """The refs a reader assumes when the key is absent: ``main`` at the current snapshot."""
    return {} if current_snapshot_id is None else {MAIN_BRANCH: SnapshotRef(current_snapshot_id, "branch")}


class _Fields:
    """Reads a metadata object's fields, each problem one line naming the field."""

    def __init__(self, obj: dict[str, Any], what: str) -> None:
        self.obj, self.what = obj, what

    def required(self, key: str) -> Any:
        if key not in self.obj or self.obj[key] is None:
            raise CorruptInputError(f"{self.what} is missing required field {key!r}")
        return self.obj[key]

    def listed(self, key: str) -> list[Any]:
        value = self.required(key)
        if not isinstance(value, list):
            raise CorruptInputError(f"{self.what} field {key!r} must be a list, got {type(value).__name__}")
        return value


def _read_schemas(f: _Fields, version: int) -> tuple[tuple[Schema, ...], int]:
    """v1 may have only "schema"; from v2 "schemas" with "current-schema-id" is required."""
    if "schemas" in f.obj or version >= 2:
        schemas = tuple(Schema.from_json(as_object(s, "schema")) for s in f.listed("schemas"))
        current_schema_id = req_int(f.obj, "current-schema-id", f.what)
        if not any(s.schema_id == current_schema_id for s in schemas):
            raise CorruptInputError(f"{f.what}: current-schema-id {current_schema_id} is not in schemas")
        return schemas, current_schema_id
    schema = Schema.from_json(as_object(f.required("schema"), "schema"))
    return (schema,), schema.schema_id


def _read_specs(f: _Fields, version: int) -> tuple[tuple[PartitionSpec, ...], int, int]:
    """The partition specs, the default spec id and the last partition field id (v1 may have only
    "partition-spec", and no last-partition-id: computed then)."""
    if "partition-specs" in f.obj or version >= 2:
        specs = tuple(PartitionSpec.from_json(s) for s in f.listed("partition-specs"))
        default_spec_id = req_int(f.obj, "default-spec-id", f.what)
    else:
        specs, default_spec_id = (PartitionSpec.from_fields_json(f.required("partition-spec"), 0),), 0
    if not any(s.spec_id == default_spec_id for s in specs):
        raise CorruptInputError(f"{f.what}: default-spec-id {default_spec_id} is not in partition-specs")
    last_partition_id = opt_int(f.obj, "last-partition-id", f.what)
    if last_partition_id is None:
        if version >= 2:
            f.required("last-partition-id")
        last_partition_id = _computed_last_partition_id(specs)
    return specs, default_spec_id, last_partition_id


def _read_sort_orders(f: _Fields, version: int) -> tuple[tuple[SortOrder, ...], int]:
    if "sort-orders" in f.obj or version >= 2:
        sort_orders = tuple(SortOrder.from_json(o) for o in f.listed("sort-orders"))
        default_sort_order_id = req_int(f.obj, "default-sort-order-id", f.what)
    else:
        sort_orders, default_sort_order_id = (UNSORTED,), UNSORTED.order_id
    if not any(o.order_id == default_sort_order_id for o in sort_orders):
        raise CorruptInputError(f"{f.what}: default-sort-order-id {default_sort_order_id} is not in sort-orders")
    return sort_orders, default_sort_order_id


def _computed_last_partition_id(specs: tuple[PartitionSpec, ...]) -> int:
    return max((s.last_assigned_field_id for s in specs), default=UNPARTITIONED_LAST_ASSIGNED_ID)


@dataclass(frozen=True)
class TableMetadata:
    """One table metadata file. Frozen: use :meth:`replace` to derive a changed copy.

    ``properties``, ``refs`` and snapshot summaries are plain dicts; treat them as read-only.
    """

    format_version: int
    table_uuid: str | None
    location: str | None
    last_updated_ms: int
    last_column_id: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    partition_specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    last_partition_id: int
    last_sequence_number: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    current_snapshot_id: int | None = None
    snapshots: tuple[Snapshot, ...] = ()
    snapshot_log: tuple[SnapshotLogEntry, ...] = ()
    metadata_log: tuple[MetadataLogEntry, ...] = ()
    sort_orders: tuple[SortOrder, ...] = (UNSORTED,)
    default_sort_order_id: int = 0
    refs: dict[str, SnapshotRef] = field(default_factory=dict)
    statistics: tuple[StatisticsFile, ...] = ()
    partition_statistics: tuple[PartitionStatisticsFile, ...] = ()
    next_row_id: int = 0  # v3+; Java keeps 0 for older versions
    encryption_keys: tuple[EncryptedKey, ...] = ()
    extra: Extra = ()  # unknown top-level keys, written back after the known ones
    source_keys: frozenset[str] | None = field(default=None, compare=False, repr=False)
    _snapshots_by_id: dict[int, Snapshot] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        # init=False, so dataclasses.replace rebuilds the index instead of sharing a stale one.
        object.__setattr__(self, "_snapshots_by_id", {s.snapshot_id: s for s in self.snapshots})

    # -- accessors ----------------------------------------------------------------------------

    def replace(self, **changes: Any) -> TableMetadata:
        return dataclasses.replace(self, **changes)

    @property
    def snapshots_by_id(self) -> dict[int, Snapshot]:
        return self._snapshots_by_id

    def schema_by_id(self, schema_id: int) -> Schema | None:
        return next((s for s in self.schemas if s.schema_id == schema_id), None)

    def schema(self) -> Schema:
        """The current schema."""
        found = self.schema_by_id(self.current_schema_id)
        if found is None:
            raise CorruptInputError(f"current-schema-id {self.current_schema_id} is not in schemas")
        return found

    def spec_by_id(self, spec_id: int) -> PartitionSpec | None:
        return next((s for s in self.partition_specs if s.spec_id == spec_id), None)

    def partition_type(self, spec: int | PartitionSpec, *, used_by: str = "manifest") -> StructType:
        """The partition tuple type of a spec (by id or the spec itself), resolved against the
        current schema and, for source columns since dropped, the older ones."""
        found = self.spec_by_id(spec) if isinstance(spec, int) else spec
        if found is None:
            raise CorruptInputError(f"{used_by} uses partition spec {spec}, which the table metadata lacks")
        return found.partition_type(self.schema(), self.schemas)

    def unified_partition_type(self) -> StructType:
        """Every partition field any spec ever had, ordered by field id, all optional: the ``partition``
        struct of Spark's files and partitions tables and of v4 content entries.

        Names come from the newest spec, except that a field dropped v1-style (a ``void`` transform)
        keeps the name of its newest non-void version. Java's ``Partitioning.partitionType``
        (:func:`icectl.spec.partitioning.unified_partition_type`) keeps the void field's name; v4
        roots already written use these names, so they stay.
        """
        schema = self.schema()
        fields: dict[int, NestedField] = {}
        void_ids: set[int] = set()  # fields seen so far only as v1 "dropped" (void) columns
        for spec in sorted(self.partition_specs, key=lambda s: -s.spec_id):  # newest names win
            for f in spec.partition_type(schema, self.schemas).fields:
                pf = spec.field_by_id(f.field_id)
                void = pf is not None and str(pf.transform) == "void"
                if f.field_id not in fields or (f.field_id in void_ids and not void):
                    fields[f.field_id] = NestedField(f.field_id, f.name, f.field_type, False)
                    void_ids.discard(f.field_id)
                    if void:
                        void_ids.add(f.field_id)
        return StructType(tuple(f for _, f in sorted(fields.items())))

    def spec(self) -> PartitionSpec:
        """The default partition spec."""
        found = self.spec_by_id(self.default_spec_id)
        if found is None:
            raise CorruptInputError(f"default-spec-id {self.default_spec_id} is not in partition-specs")
        return found

    def sort_order_by_id(self, order_id: int) -> SortOrder | None:
        return next((o for o in self.sort_orders if o.order_id == order_id), None)

    def sort_order(self) -> SortOrder:
        """The default sort order."""
        found = self.sort_order_by_id(self.default_sort_order_id)
        if found is None:
            raise CorruptInputError(
                f"default-sort-order-id {self.default_sort_order_id} is not in sort-orders")
        return found

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        return self._snapshots_by_id.get(snapshot_id)

    def current_snapshot(self) -> Snapshot | None:
        return None if self.current_snapshot_id is None else self.snapshot_by_id(self.current_snapshot_id)

    def ref(self, name: str) -> SnapshotRef | None:
        return self.refs.get(name)

    def snapshot_for_ref(self, name: str) -> Snapshot | None:
        found = self.refs.get(name)
        return None if found is None else self.snapshot_by_id(found.snapshot_id)

    def property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)

    # -- reading ------------------------------------------------------------------------------

    @classmethod
    def from_json(cls, obj: Any) -> TableMetadata:
        """Read parsed metadata JSON, applying Appendix E's defaults for v1."""
        try:
            return cls._from_json(obj)
        except RecursionError:  # types nested deeper than the interpreter's stack
            raise CorruptInputError(_TOO_DEEP, hint=_RESTORE) from None

    @classmethod
    def _from_json(cls, obj: Any) -> TableMetadata:
        obj = as_object(obj, "table metadata")
        # Java reads every number as a long ("Cannot parse to a long value"); Python's unbounded
        # ints would only fail later, writing Avro.
        too_big = json_integer_problems(obj)
        if too_big:
            raise CorruptInputError(f"table metadata {too_big[0].message}",
                                    hint=_RESTORE)
        version = req_int(obj, "format-version", "table metadata")
        if not MIN_FORMAT_VERSION <= version <= MAX_FORMAT_VERSION:
            raise UnsupportedError(
                f"unsupported table format-version {version}: icectl reads versions "
                f"{MIN_FORMAT_VERSION} to {MAX_FORMAT_VERSION}",
                hint="upgrade icectl, or check that this is Iceberg table metadata")
        what = f"table metadata (format v{version})"
        fields = _Fields(obj, what)
        table_uuid = opt_str(obj, "table-uuid", what)
        if version >= 2 and table_uuid is None:
            fields.required("table-uuid")
        if version >= MIN_OPTIONAL_LOCATION_VERSION:
            location = opt_str(obj, "location", what)
        else:
            location = req_str(obj, "location", what)
        schemas, current_schema_id = _read_schemas(fields, version)
        specs, default_spec_id, last_partition_id = _read_specs(fields, version)
        sort_orders, default_sort_order_id = _read_sort_orders(fields, version)

        current_snapshot_id = opt_int(obj, "current-snapshot-id", what)
        if current_snapshot_id == -1:  # Java's v1/v2 spelling of "no current snapshot"
            current_snapshot_id = None

        if "refs" in obj and obj["refs"] is not None:
            refs_obj = as_object(obj["refs"], f"{what} field 'refs'")
            refs = {name: SnapshotRef.from_json(r, name) for name, r in refs_obj.items()}
        else:
            refs = _default_refs(current_snapshot_id)

        last_sequence_number = (req_int(obj, "last-sequence-number", what) if version >= 2
                                else opt_int(obj, "last-sequence-number", what) or 0)
        next_row_id = (req_int(obj, "next-row-id", what) if version >= MIN_ROW_LINEAGE_VERSION
                       else opt_int(obj, "next-row-id", what) or 0)

        return cls(
            format_version=version,
            table_uuid=table_uuid,
            location=location,
            last_updated_ms=req_int(obj, "last-updated-ms", what),
            last_column_id=req_int(obj, "last-column-id", what),
            schemas=schemas,
            current_schema_id=current_schema_id,
            partition_specs=specs,
            default_spec_id=default_spec_id,
            last_partition_id=last_partition_id,
            last_sequence_number=last_sequence_number,
            properties=str_map(obj, "properties", what),
            current_snapshot_id=current_snapshot_id,
            snapshots=tuple(Snapshot.from_json(s) for s in obj_list(obj, "snapshots", what)),
            snapshot_log=tuple(SnapshotLogEntry.from_json(e) for e in obj_list(obj, "snapshot-log", what)),
            metadata_log=tuple(MetadataLogEntry.from_json(e) for e in obj_list(obj, "metadata-log", what)),
            sort_orders=sort_orders,
            default_sort_order_id=default_sort_order_id,
            refs=refs,
            statistics=tuple(StatisticsFile.from_json(s) for s in obj_list(obj, "statistics", what)),
            partition_statistics=tuple(PartitionStatisticsFile.from_json(s)
                                       for s in obj_list(obj, "partition-statistics", what)),
            next_row_id=next_row_id,
            encryption_keys=tuple(EncryptedKey.from_json(k) for k in obj_list(obj, "encryption-keys", what)),
            extra=extra_keys(obj, _KNOWN_KEYS),
            source_keys=frozenset(obj),
        )

    # -- writing ------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The JSON object Java's ``TableMetadataParser.toJson`` writes, in its key order."""
        v = self.format_version
        out: dict[str, Any] = {}

        def put(key: str, value: Any, *, required: bool = False, java_writes: bool = True,
                is_default: bool = False) -> None:
            # Required keys always; others as Java does, except keys this file never had
            # that still hold the reader's default (older writers omitted them).
            if required:
                out[key] = value
            elif self.source_keys is None:
                if java_writes:
                    out[key] = value
            elif key in self.source_keys or (java_writes and not is_default):
                out[key] = value

        one_schema = len(self.schemas) == 1
        one_spec = len(self.partition_specs) == 1 and self.partition_specs[0].spec_id == 0
        unsorted = self.sort_orders == (UNSORTED,) and self.default_sort_order_id == UNSORTED.order_id

        put("format-version", v, required=True)
        put("table-uuid", self.table_uuid, required=v >= 2, is_default=self.table_uuid is None)
        put("location", self.location, required=v < MIN_OPTIONAL_LOCATION_VERSION,
            java_writes=self.location is not None, is_default=self.location is None)
        put("last-sequence-number", self.last_sequence_number, required=v >= 2, java_writes=False)
        put("last-updated-ms", self.last_updated_ms, required=True)
        put("last-column-id", self.last_column_id, required=True)
        # v1: Java keeps writing the current schema and default spec in their deprecated keys.
        put("schema", self.schema().to_json(), required=v == 1, java_writes=False)
        put("current-schema-id", self.current_schema_id, required=v >= 2, is_default=one_schema)
        put("schemas", [s.to_json() for s in self.schemas], required=v >= 2, is_default=one_schema)
        put("partition-spec", self.spec().fields_to_json(), required=v == 1, java_writes=False)
        put("default-spec-id", self.default_spec_id, required=v >= 2, is_default=one_spec)
        put("partition-specs", [s.to_json() for s in self.partition_specs], required=v >= 2,
            is_default=one_spec)
        put("last-partition-id", self.last_partition_id, required=v >= 2,
            is_default=self.last_partition_id == _computed_last_partition_id(self.partition_specs))
        put("default-sort-order-id", self.default_sort_order_id, required=v >= 2, is_default=unsorted)
        put("sort-orders", [o.to_json() for o in self.sort_orders], required=v >= 2, is_default=unsorted)
        put("properties", dict(self.properties), is_default=not self.properties)
        no_snapshot = None if v >= MIN_NULL_CURRENT_SNAPSHOT_VERSION else -1
        put("current-snapshot-id",
            no_snapshot if self.current_snapshot_id is None else self.current_snapshot_id,
            is_default=self.current_snapshot_id is None)
        put("next-row-id", self.next_row_id, required=v >= MIN_ROW_LINEAGE_VERSION, java_writes=False)
        put("encryption-keys", [k.to_json() for k in self.encryption_keys],
            java_writes=bool(self.encryption_keys), is_default=not self.encryption_keys)
        put("refs", {name: r.to_json() for name, r in self.refs.items()},
            is_default=self.refs == _default_refs(self.current_snapshot_id))
        put("snapshots", [s.to_json() for s in self.snapshots], is_default=not self.snapshots)
        put("statistics", [s.to_json() for s in self.statistics], is_default=not self.statistics)
        put("partition-statistics", [s.to_json() for s in self.partition_statistics],
            is_default=not self.partition_statistics)
        put("snapshot-log", [e.to_json() for e in self.snapshot_log], is_default=not self.snapshot_log)
        put("metadata-log", [e.to_json() for e in self.metadata_log], is_default=not self.metadata_log)
        out.update(self.extra)
        return out

    def to_json_bytes(self) -> bytes:
        """UTF-8 JSON as Java 1.10 writes metadata files: compact, non-ASCII left unescaped."""
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def parse_table_metadata(text: str | bytes) -> TableMetadata:
    """Parse a metadata file's content (gzip-compressed bytes are detected and inflated)."""
    return TableMetadata.from_json(metadata_json(text))


def metadata_json(text: str | bytes) -> Any:
    """A metadata file's content as decoded JSON, not yet checked (for a look before the model is
    built, which costs eight times the JSON decoding)."""
    if isinstance(text, (bytes, bytearray)):
        if text[:2] == b"\x1f\x8b":  # gzip magic: .gz.metadata.json / .metadata.json.gz files
            try:
                text = gzip.decompress(text)
            except (OSError, EOFError) as e:
                raise CorruptInputError(f"table metadata is not valid gzip: {e}") from None
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptInputError(f"table metadata is not UTF-8 text: {e}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise CorruptInputError(
            f"table metadata is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise CorruptInputError(_TOO_DEEP, hint=_RESTORE) from None
    except ValueError as e:  # e.g. an integer literal longer than Python's digit limit
        raise CorruptInputError(f"table metadata is not valid JSON: {e}") from None
    return obj
