"""Name mappings (``schema.name-mapping.default``, spec "Column Projection").

A reader meets a data file without field ids (written by anything but an Iceberg writer) and
must decide which column is which. With a name mapping it matches columns by name (the mapping
names each field id's names, aliases included); without one, Spark's reader falls back to
position, so a file whose columns are in another order is read as wrong values. Spark's
``add_files`` therefore sets a mapping before adding files (``MappingUtil.create(schema)``,
serialized by ``NameMappingParser``), and Java's schema updates extend it for new fields
(``MappingUtil.update``). This module does both, on the same JSON form:

    [ {"field-id": 1, "names": ["id"]},
      {"field-id": 2, "names": ["point"], "fields": [{"field-id": 3, "names": ["x"]}, ...]} ]

Lists map their element as ``element``, maps their key and value as ``key`` and ``value``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icectl.errors import CorruptInputError
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import DEFAULT_NAME_MAPPING
from icectl.spec.schema import IcebergType, ListType, MapType, Schema, StructType


@dataclass(frozen=True)
class MappedField:
    """One field of a mapping: its id (None is allowed by Java for a name-only entry), its names,
    and the mapping of its nested fields (None for a primitive)."""

    field_id: int | None
    names: tuple[str, ...]
    fields: tuple[MappedField, ...] | None = None


NameMapping = tuple[MappedField, ...]


def _children(t: IcebergType) -> list[tuple[int, str, IcebergType]] | None:
    """The nested fields a mapping lists under a field of type ``t`` (None for a primitive)."""
    if isinstance(t, StructType):
        return [(f.field_id, f.name, f.field_type) for f in t.fields]
    if isinstance(t, ListType):
        return [(t.element_id, "element", t.element_type)]
    if isinstance(t, MapType):
        return [(t.key_id, "key", t.key_type), (t.value_id, "value", t.value_type)]
    return None


def _create(children: list[tuple[int, str, IcebergType]]) -> NameMapping:
    out = []
    for fid, name, t in children:
        nested = _children(t)
        out.append(MappedField(fid, (name,), _create(nested) if nested is not None else None))
    return tuple(out)


def _top(schema: Schema) -> list[tuple[int, str, IcebergType]]:
    return [(f.field_id, f.name, f.field_type) for f in schema.fields]


def create(schema: Schema) -> NameMapping:
    """The mapping of ``schema`` under its current names (Java's ``MappingUtil.create``)."""
    return _create(_top(schema))


def update(mapping: NameMapping, schema: Schema) -> NameMapping:
    """``mapping`` extended to ``schema``: every field id it lacks is added under its current
    name, a renamed field gets its new name as well, and existing names and aliases stay, except a
    name the schema now gives another field at the same level (Java's ``MappingUtil.update``
    strips such reassigned names too, since a name must find one field)."""
    return _merge(mapping, _top(schema))


def _merge(existing: NameMapping, children: list[tuple[int, str, IcebergType]]) -> NameMapping:
    claimed = {name: fid for fid, name, _ in children}
    by_id = {fid: (name, t) for fid, name, t in children}
    out: list[MappedField] = []
    seen: set[int] = set()
    for f in existing:
        names = tuple(n for n in f.names if claimed.get(n, f.field_id) == f.field_id)
        nested = f.fields
        if f.field_id is not None and f.field_id in by_id:
            seen.add(f.field_id)
            name, t = by_id[f.field_id]
            if name not in names:
                names = (*names, name)
            sub = _children(t)
            if sub is not None:
                nested = _merge(f.fields or (), sub)
        out.append(MappedField(f.field_id, names, nested))
    for fid, name, t in children:
        if fid not in seen:
            sub = _children(t)
            out.append(MappedField(fid, (name,), _create(sub) if sub is not None else None))
    return tuple(out)


def to_json(mapping: NameMapping) -> str:
    """NameMappingParser's JSON (compact; readers parse it, whitespace carries nothing)."""
    return json.dumps(_to_obj(mapping), separators=(",", ":"))


def _to_obj(mapping: NameMapping) -> list[dict[str, Any]]:
    out = []
    for f in mapping:
        obj: dict[str, Any] = {}
        if f.field_id is not None:
            obj["field-id"] = f.field_id
        obj["names"] = list(f.names)
        if f.fields is not None:
            obj["fields"] = _to_obj(f.fields)
        out.append(obj)
    return out


def from_json(text: str) -> NameMapping:
    """Parse a mapping; anything NameMappingParser would refuse is :class:`CorruptInputError`."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise CorruptInputError(f"table property {DEFAULT_NAME_MAPPING} is not valid JSON: {e}",
                                hint="fix or remove the property") from None
    try:
        return _from_obj(obj)
    except RecursionError:
        raise CorruptInputError(f"table property {DEFAULT_NAME_MAPPING} is nested too deeply",
                                hint="fix or remove the property") from None


def of_properties(properties: Mapping[str, str]) -> NameMapping | None:
    """The table's ``schema.name-mapping.default``, parsed; None when it has none."""
    text = properties.get(DEFAULT_NAME_MAPPING)
    return from_json(text) if text else None


def _from_obj(obj: Any) -> NameMapping:
    if not isinstance(obj, list):
        raise CorruptInputError(f"table property {DEFAULT_NAME_MAPPING}: cannot parse non-array mapping fields",
                                hint="fix or remove the property")
    out = []
    for item in obj:
        if not isinstance(item, dict):
            raise CorruptInputError(f"table property {DEFAULT_NAME_MAPPING}: cannot parse non-object mapping field",
                                    hint="fix or remove the property")
        fid = item.get("field-id")
        names = item.get("names", [])
        if (fid is not None and (not isinstance(fid, int) or isinstance(fid, bool))) \
                or not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CorruptInputError(f"table property {DEFAULT_NAME_MAPPING}: bad mapping field {item!r:.80}",
                                    hint="fix or remove the property")
        nested = _from_obj(item["fields"]) if "fields" in item and item["fields"] is not None else None
        out.append(MappedField(fid, tuple(names), nested))
    return tuple(out)


def ensure_name_mapping(md: TableMetadata) -> tuple[TableMetadata, str]:
    """``md`` with a name mapping covering its current schema, and what was done: ``created``,
    ``extended`` or ``unchanged`` (then ``md`` itself is returned)."""
    current = md.properties.get(DEFAULT_NAME_MAPPING)
    schema = md.schema()
    if current is None:
        mapping, outcome = create(schema), "created"
    else:
        old = from_json(current)
        mapping = update(old, schema)
        if mapping == old:
            return md, "unchanged"
        outcome = "extended"
    return md.replace(properties={**md.properties, DEFAULT_NAME_MAPPING: to_json(mapping)}), outcome

