"""Partition specs (spec "Partitioning", Appendix C "Partition Specs").

JSON is written in the key order of Java's ``PartitionSpecParser`` (``name``, ``transform``,
``source-id``, ``field-id``) so metadata written back is byte-identical; unknown keys are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_plus

from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.schema import UNKNOWN, IcebergType, NestedField, Schema, StructType
from icectl.spec.transforms import Transform, parse_transform

# v1 specs did not store partition field ids; Java assigned them from 1000 upwards.
PARTITION_DATA_ID_START = 1000
UNPARTITIONED_LAST_ASSIGNED_ID = PARTITION_DATA_ID_START - 1

_FIELD_KEYS = {"source-id", "source-ids", "field-id", "name", "transform"}
_SPEC_KEYS = {"spec-id", "fields"}


def _int(obj: dict[str, Any], key: str, what: str) -> int:
    if key not in obj:
        raise CorruptInputError(f"{what} is missing required field {key!r}: {obj!r}")
    value = obj[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptInputError(f"{what} field {key!r} must be an integer, got {value!r}")
    return value


def _str(obj: dict[str, Any], key: str, what: str) -> str:
    if key not in obj:
        raise CorruptInputError(f"{what} is missing required field {key!r}: {obj!r}")
    value = obj[key]
    if not isinstance(value, str):
        raise CorruptInputError(f"{what} field {key!r} must be a string, got {value!r}")
    return value


def read_source_ids(obj: dict[str, Any], what: str) -> tuple[int, ...]:
    """``source-ids`` (v3 multi-argument) or ``source-id``; shared with sort fields."""
    if "source-ids" in obj:
        ids = obj["source-ids"]
        if (not isinstance(ids, list) or not ids
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
            raise CorruptInputError(f"{what} field 'source-ids' must be a non-empty list of ints: {ids!r}")
        return tuple(ids)
    return (_int(obj, "source-id", what),)


def write_source_ids(out: dict[str, Any], source_ids: tuple[int, ...]) -> None:
    # Appendix C / E (v3): source-id for single-argument transforms, source-ids only otherwise.
    if len(source_ids) == 1:
        out["source-id"] = source_ids[0]
    else:
        out["source-ids"] = list(source_ids)


def _find_type(source_id: int, schemas: Sequence[Schema]) -> IcebergType | None:
    for schema in schemas:
        found = schema.find_type(source_id)
        if found is not None:
            return found
    return None


def escape_path_part(text: str) -> str:
    """Java ``URLEncoder.encode(s, UTF-8)``: keeps ``[A-Za-z0-9.-*_]``, space becomes ``+``."""
    return quote_plus(text, safe="*").replace("~", "%7E")  # Python keeps "~", Java does not


@dataclass(frozen=True)
class PartitionField:
    source_ids: tuple[int, ...]
    field_id: int
    name: str
    transform: Transform
    extra: tuple[tuple[str, Any], ...] = ()  # unknown JSON keys, kept for round-trips

    @property
    def source_id(self) -> int:
        """The first (for single-argument transforms, the only) source column id."""
        return self.source_ids[0]

    @classmethod
    def from_json(cls, obj: dict[str, Any], field_id: int | None = None) -> PartitionField:
        """Read a field; ``field_id`` supplies the id a v1 field without ``field-id`` gets."""
        if not isinstance(obj, dict):
            raise CorruptInputError(f"a partition field must be a JSON object, got {obj!r}")
        what = "partition field"
        if "field-id" in obj or field_id is None:
            field_id = _int(obj, "field-id", what)
        return cls(
            source_ids=read_source_ids(obj, what),
            field_id=field_id,
            name=_str(obj, "name", what),
            transform=parse_transform(_str(obj, "transform", what)),
            extra=tuple((k, v) for k, v in obj.items() if k not in _FIELD_KEYS),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "transform": str(self.transform)}
        write_source_ids(out, self.source_ids)
        out["field-id"] = self.field_id
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class PartitionSpec:
    spec_id: int = 0
    fields: tuple[PartitionField, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()

    @property
    def is_unpartitioned(self) -> bool:
        """True with no fields or only void ones (Java ``isUnpartitioned``)."""
        return all(f.transform.is_void for f in self.fields)

    @property
    def last_assigned_field_id(self) -> int:
        return max((f.field_id for f in self.fields), default=UNPARTITIONED_LAST_ASSIGNED_ID)

    def field_by_id(self, field_id: int) -> PartitionField | None:
        return next((f for f in self.fields if f.field_id == field_id), None)

    def partition_type(self, schema: Schema | None, fallback_schemas: Iterable[Schema] = ()) -> StructType:
        """The partition tuple's struct: partition field ids and names, result types, all optional.

        A source column is looked up in ``schema``, then in ``fallback_schemas`` in order (a
        column can be dropped after a spec was written). If none has it, the type is ``unknown``,
        as in Java's ``PartitionSpec.partitionType``.
        """
        schemas = ([schema] if schema is not None else []) + list(fallback_schemas)
        fields = []
        for f in self.fields:
            source_types = [_find_type(i, schemas) for i in f.source_ids]
            first = source_types[0]
            if first is None or any(t is None for t in source_types):
                result: IcebergType = UNKNOWN
            else:
                result = f.transform.result_type(first)
            fields.append(NestedField(f.field_id, f.name, result, required=False))
        return StructType(tuple(fields))

    def partition_path(self, values: Sequence[Any], schema: Schema | None = None,
                       fallback_schemas: Iterable[Schema] = ()) -> str:
        """``name=value/...`` as Java's ``partitionToPath`` (URL-escaped human strings).

        Pass the schema so identity/truncate values of date, time and timestamp columns render
        as dates and times rather than raw integers.
        """
        if len(values) != len(self.fields):
            raise ValueError(f"spec {self.spec_id} has {len(self.fields)} fields, got {len(values)} values")
        types: list[IcebergType | None]
        if schema is not None:
            types = [f.field_type for f in self.partition_type(schema, fallback_schemas).fields]
        else:
            types = [None] * len(self.fields)
        parts = []
        for f, value, value_type in zip(self.fields, values, types, strict=True):
            human = f.transform.to_human_string(value, value_type)
            parts.append(f"{escape_path_part(f.name)}={escape_path_part(human)}")
        return "/".join(parts)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PartitionSpec:
        if not isinstance(obj, dict):
            raise CorruptInputError(f"a partition spec must be a JSON object, got {obj!r}")
        spec_id = _int(obj, "spec-id", "partition spec")
        if "fields" not in obj:
            raise CorruptInputError(f"partition spec {spec_id} is missing required field 'fields'")
        spec = cls.from_fields_json(obj["fields"], spec_id)
        return cls(spec.spec_id, spec.fields, tuple((k, v) for k, v in obj.items() if k not in _SPEC_KEYS))

    @classmethod
    def from_fields_json(cls, fields: Any, spec_id: int = 0) -> PartitionSpec:
        """Read the bare field list (v1 ``partition-spec``); ids default to 1000, 1001, ..."""
        if not isinstance(fields, list):
            raise CorruptInputError(f"partition spec fields must be a JSON list, got {fields!r}")
        with_ids = sum(1 for f in fields if isinstance(f, dict) and "field-id" in f)
        if with_ids not in (0, len(fields)):  # Java refuses a mix too
            raise CorruptInputError(
                f"partition spec {spec_id} has {len(fields) - with_ids} of {len(fields)} fields "
                "without a field-id")
        parsed = tuple(PartitionField.from_json(f, PARTITION_DATA_ID_START + i) for i, f in enumerate(fields))
        return cls(spec_id, parsed)

    def fields_to_json(self) -> list[dict[str, Any]]:
        return [f.to_json() for f in self.fields]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"spec-id": self.spec_id, "fields": self.fields_to_json()}
        out.update(self.extra)
        return out

    def compatible_with(self, other: PartitionSpec) -> bool:
        """Same fields in order (source ids, transform, name), ignoring field ids (spec's equivalence)."""
        return len(self.fields) == len(other.fields) and all(
            a.source_ids == b.source_ids and str(a.transform) == str(b.transform) and a.name == b.name
            for a, b in zip(self.fields, other.fields, strict=True))


UNPARTITIONED = PartitionSpec(0, ())


def unified_partition_type(specs: Iterable[PartitionSpec], schema: Schema | None,
                           fallback_schemas: Iterable[Schema] = ()) -> StructType:
    """Every partition field of every spec, by field id ascending (Java ``Partitioning.partitionType``).

    Names come from the newest spec; a void field takes its type from a non-void field with the
    same id. Used for partition statistics and the v4 content entry's ``partition``.
    """
    specs = sorted(specs, key=lambda s: s.spec_id, reverse=True)
    unknown = [str(f.transform) for s in specs for f in s.fields if f.transform.is_unknown]
    if unknown:  # as Java: the result type of an unknown transform cannot be known
        raise UnsupportedError(f"cannot build the unified partition type: unknown transforms {unknown}")
    fallbacks = list(fallback_schemas)
    chosen: dict[int, tuple[PartitionField, NestedField]] = {}
    for spec in specs:
        struct = spec.partition_type(schema, fallbacks)
        for f in spec.fields:
            struct_field = struct.field(f.field_id)
            assert struct_field is not None
            seen = chosen.get(f.field_id)
            if seen is None:
                chosen[f.field_id] = (f, struct_field)
                continue
            old, old_struct = seen
            if old.source_ids != f.source_ids or not (
                    old.transform == f.transform or old.transform.is_void or f.transform.is_void):
                raise CorruptInputError(f"conflicting partition fields with id {f.field_id}: {old} and {f}")
            if old.transform.is_void and not f.transform.is_void:  # v1 dropped field: real type
                chosen[f.field_id] = (f, NestedField(f.field_id, old_struct.name, struct_field.field_type))
    return StructType(tuple(chosen[i][1] for i in sorted(chosen)))
