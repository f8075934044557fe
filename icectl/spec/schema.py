"""Iceberg schemas and data types (spec: "Schemas and Data Types", Appendix C).

Types are small frozen dataclasses; ``parse_type`` / ``type_to_json`` convert the
JSON form. A :class:`Schema` keeps unknown JSON keys so it is written back as read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from icectl.errors import CorruptInputError

# Field ids above this are reserved for metadata columns (spec "Reserved Field IDs").
MAX_USER_FIELD_ID = 2147483447


class IcebergType:
    """Base of every Iceberg type."""

    is_primitive: bool = True

    def __str__(self) -> str:  # the spec's JSON/DDL spelling
        raise NotImplementedError


@dataclass(frozen=True)
class PrimitiveType(IcebergType):
    name: str

    def __str__(self) -> str:
        return self.name


BOOLEAN = PrimitiveType("boolean")
INT = PrimitiveType("int")
LONG = PrimitiveType("long")
FLOAT = PrimitiveType("float")
DOUBLE = PrimitiveType("double")
DATE = PrimitiveType("date")
TIME = PrimitiveType("time")
TIMESTAMP = PrimitiveType("timestamp")
TIMESTAMPTZ = PrimitiveType("timestamptz")
TIMESTAMP_NS = PrimitiveType("timestamp_ns")
TIMESTAMPTZ_NS = PrimitiveType("timestamptz_ns")
STRING = PrimitiveType("string")
UUID = PrimitiveType("uuid")
BINARY = PrimitiveType("binary")
UNKNOWN = PrimitiveType("unknown")
VARIANT = PrimitiveType("variant")  # semi-structured: neither primitive nor nested in the spec

_SIMPLE = {t.name: t for t in (BOOLEAN, INT, LONG, FLOAT, DOUBLE, DATE, TIME, TIMESTAMP, TIMESTAMPTZ,
                               TIMESTAMP_NS, TIMESTAMPTZ_NS, STRING, UUID, BINARY, UNKNOWN, VARIANT)}


@dataclass(frozen=True)
class DecimalType(PrimitiveType):
    precision: int = 38
    scale: int = 0

    def __init__(self, precision: int, scale: int) -> None:
        object.__setattr__(self, "name", "decimal")
        object.__setattr__(self, "precision", precision)
        object.__setattr__(self, "scale", scale)

    def __str__(self) -> str:
        return f"decimal({self.precision}, {self.scale})"


@dataclass(frozen=True)
class FixedType(PrimitiveType):
    length: int = 0

    def __init__(self, length: int) -> None:
        object.__setattr__(self, "name", "fixed")
        object.__setattr__(self, "length", length)

    def __str__(self) -> str:
        return f"fixed[{self.length}]"


@dataclass(frozen=True)
class GeometryType(PrimitiveType):
    crs: str | None = None  # None: the default OGC:CRS84

    def __init__(self, crs: str | None = None) -> None:
        object.__setattr__(self, "name", "geometry")
        object.__setattr__(self, "crs", crs)

    def __str__(self) -> str:
        return f"geometry({self.crs})" if self.crs else "geometry"


@dataclass(frozen=True)
class GeographyType(PrimitiveType):
    crs: str | None = None
    algorithm: str | None = None  # None: the default "spherical"

    def __init__(self, crs: str | None = None, algorithm: str | None = None) -> None:
        object.__setattr__(self, "name", "geography")
        object.__setattr__(self, "crs", crs)
        object.__setattr__(self, "algorithm", algorithm)

    def __str__(self) -> str:
        if self.algorithm:
            return f"geography({self.crs or 'OGC:CRS84'}, {self.algorithm})"
        return f"geography({self.crs})" if self.crs else "geography"


@dataclass(frozen=True)
class NestedField:
    """A struct field, with the v3 default values kept in their JSON single-value form."""

    field_id: int
    name: str
    field_type: IcebergType
    required: bool = False
    doc: str | None = None
    initial_default: Any = None
    write_default: Any = None
    has_initial_default: bool = False  # distinguishes an explicit JSON null from an absent key
    has_write_default: bool = False
    extra: tuple[tuple[str, Any], ...] = ()  # unknown JSON keys, kept for round-trips

    @property
    def optional(self) -> bool:
        return not self.required


@dataclass(frozen=True)
class StructType(IcebergType):
    fields: tuple[NestedField, ...] = ()
    is_primitive = False

    def __str__(self) -> str:
        inner = ", ".join(f"{f.name}: {f.field_type}" for f in self.fields)
        return f"struct<{inner}>"

    def field(self, field_id: int) -> NestedField | None:
        for f in self.fields:
            if f.field_id == field_id:
                return f
        return None


@dataclass(frozen=True)
class ListType(IcebergType):
    element_id: int
    element_type: IcebergType
    element_required: bool = False
    is_primitive = False

    def __str__(self) -> str:
        return f"list<{self.element_type}>"


@dataclass(frozen=True)
class MapType(IcebergType):
    key_id: int
    key_type: IcebergType
    value_id: int
    value_type: IcebergType
    value_required: bool = False
    is_primitive = False

    def __str__(self) -> str:
        return f"map<{self.key_type}, {self.value_type}>"


_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\[\s*(\d+)\s*\]$")
_GEOMETRY = re.compile(r"^geometry\s*(?:\(\s*([^,()]*?)\s*\))?$")
_GEOGRAPHY = re.compile(r"^geography\s*(?:\(\s*([^,()]*?)\s*(?:,\s*([A-Za-z]+)\s*)?\))?$")


def parse_primitive(text: str) -> PrimitiveType:
    """Parse a primitive type string such as ``long`` or ``decimal(9, 2)``."""
    s = text.strip()
    if s in _SIMPLE:
        return _SIMPLE[s]
    if m := _DECIMAL.match(s):
        return DecimalType(int(m.group(1)), int(m.group(2)))
    if m := _FIXED.match(s):
        return FixedType(int(m.group(1)))
    if m := _GEOMETRY.match(s):
        return GeometryType(m.group(1) or None)
    if m := _GEOGRAPHY.match(s):
        return GeographyType(m.group(1) or None, m.group(2) or None)
    raise CorruptInputError(f"unknown Iceberg type {text!r}")


_FIELD_KEYS = {"id", "name", "required", "type", "doc", "initial-default", "write-default"}


def parse_type(obj: Any) -> IcebergType:
    """Parse the JSON form of a type (Appendix C)."""
    if isinstance(obj, str):
        return parse_primitive(obj)
    if not isinstance(obj, dict):
        raise CorruptInputError(f"invalid type JSON: {obj!r}")
    kind = obj.get("type")
    try:
        if kind == "struct":
            return StructType(tuple(parse_field(f) for f in obj["fields"]))
        if kind == "list":
            return ListType(int(obj["element-id"]), parse_type(obj["element"]),
                            bool(obj.get("element-required", False)))
        if kind == "map":
            return MapType(int(obj["key-id"]), parse_type(obj["key"]), int(obj["value-id"]),
                           parse_type(obj["value"]), bool(obj.get("value-required", False)))
    except KeyError as e:
        raise CorruptInputError(f"{kind} type is missing key {e.args[0]!r}") from None
    raise CorruptInputError(f"unknown nested type {kind!r}")


def parse_field(obj: dict[str, Any]) -> NestedField:
    try:
        return NestedField(
            field_id=int(obj["id"]),
            name=str(obj["name"]),
            field_type=parse_type(obj["type"]),
            required=bool(obj["required"]),
            doc=obj.get("doc"),
            initial_default=obj.get("initial-default"),
            write_default=obj.get("write-default"),
            has_initial_default="initial-default" in obj,
            has_write_default="write-default" in obj,
            extra=tuple((k, v) for k, v in obj.items() if k not in _FIELD_KEYS),
        )
    except KeyError as e:
        raise CorruptInputError(f"schema field is missing key {e.args[0]!r}: {obj!r}") from None


def type_to_json(t: IcebergType) -> Any:
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [field_to_json(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {"type": "list", "element-id": t.element_id, "element": type_to_json(t.element_type),
                "element-required": t.element_required}
    if isinstance(t, MapType):
        return {"type": "map", "key-id": t.key_id, "key": type_to_json(t.key_type),
                "value-id": t.value_id, "value": type_to_json(t.value_type),
                "value-required": t.value_required}
    return str(t)


def field_to_json(f: NestedField) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f.field_id, "name": f.name, "required": f.required,
                           "type": type_to_json(f.field_type)}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.has_initial_default:
        out["initial-default"] = f.initial_default
    if f.has_write_default:
        out["write-default"] = f.write_default
    out.update(f.extra)
    return out


@dataclass(frozen=True)
class Schema:
    """A table schema: a struct with an id and optional identifier fields."""

    fields: tuple[NestedField, ...]
    schema_id: int = 0
    identifier_field_ids: tuple[int, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()
    has_identifier_field_ids: bool = False  # Java writes an empty list; keep its presence
    # Derived indexes, rebuilt for every instance (also after dataclasses.replace).
    _index: dict[int, NestedField] = field(init=False, compare=False, repr=False)
    _names: dict[int, str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {})
        object.__setattr__(self, "_names", {})
        for name, f in _walk(self.fields, ""):
            self._index[f.field_id] = f
            self._names[f.field_id] = name

    @property
    def struct(self) -> StructType:
        return StructType(self.fields)

    def find_field(self, field_id: int) -> NestedField | None:
        """The field with this id anywhere in the schema (nested fields included)."""
        return self._index.get(field_id)

    def find_type(self, field_id: int) -> IcebergType | None:
        f = self._index.get(field_id)
        return f.field_type if f else None

    def column_name(self, field_id: int) -> str | None:
        """Dotted full name of a field, as Spark shows it (``point.x``, ``tags.element``)."""
        return self._names.get(field_id)

    def field_ids(self) -> list[int]:
        return list(self._index)

    def highest_field_id(self) -> int:
        return max(self.all_ids(), default=0)

    def all_ids(self) -> Iterator[int]:
        """Every id the schema assigns: fields, list elements, map keys and values."""
        yield from _all_ids(StructType(self.fields))

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Schema:
        if obj.get("type", "struct") != "struct" or "fields" not in obj:
            raise CorruptInputError("a schema must be a struct with 'fields'")
        known = {"type", "fields", "schema-id", "identifier-field-ids"}
        return cls(
            fields=tuple(parse_field(f) for f in obj["fields"]),
            schema_id=int(obj.get("schema-id", 0)),
            identifier_field_ids=tuple(obj.get("identifier-field-ids", ()) or ()),
            extra=tuple((k, v) for k, v in obj.items() if k not in known),
            has_identifier_field_ids="identifier-field-ids" in obj,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "struct", "schema-id": self.schema_id}
        if self.has_identifier_field_ids or self.identifier_field_ids:
            out["identifier-field-ids"] = list(self.identifier_field_ids)
        out["fields"] = [field_to_json(f) for f in self.fields]
        out.update(self.extra)
        return out


def _walk(fields: tuple[NestedField, ...], prefix: str) -> Iterator[tuple[str, NestedField]]:
    for f in fields:
        name = f"{prefix}{f.name}"
        yield name, f
        yield from _walk_type(f.field_type, name + ".")


def _walk_type(t: IcebergType, prefix: str) -> Iterator[tuple[str, NestedField]]:
    # List elements and map keys/values get synthetic fields so lookups by id work for them too.
    if isinstance(t, StructType):
        yield from _walk(t.fields, prefix)
    elif isinstance(t, ListType):
        yield from _walk((NestedField(t.element_id, "element", t.element_type, t.element_required),),
                         prefix)
    elif isinstance(t, MapType):
        yield from _walk((NestedField(t.key_id, "key", t.key_type, True),
                          NestedField(t.value_id, "value", t.value_type, t.value_required)), prefix)


def _all_ids(t: IcebergType) -> Iterator[int]:
    if isinstance(t, StructType):
        for f in t.fields:
            yield f.field_id
            yield from _all_ids(f.field_type)
    elif isinstance(t, ListType):
        yield t.element_id
        yield from _all_ids(t.element_type)
    elif isinstance(t, MapType):
        yield t.key_id
        yield from _all_ids(t.key_type)
        yield t.value_id
        yield from _all_ids(t.value_type)
