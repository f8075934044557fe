"""icectl/spec/schema.py: types in the spec's JSON spelling (Appendix C), field ids, schema JSON round trips."""

from __future__ import annotations

import json

import pytest

from icectl.errors import CorruptInputError
from icectl.spec.schema import (
    DOUBLE,
    LONG,
    STRING,
    TIMESTAMPTZ_NS,
    UUID,
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    ListType,
    MapType,
    NestedField,
    Schema,
    StructType,
    parse_primitive,
    parse_type,
)

# Appendix C's examples, put together: a struct with v3 defaults, a list and a map, and a nested struct.
SCHEMA_JSON = {
    "type": "struct",
    "schema-id": 3,
    "identifier-field-ids": [1],
    "fields": [
        {"id": 1, "name": "id", "required": True, "type": "uuid",
         "initial-default": "0db3e2a8-9d1d-42b9-aa7b-74ebe558dceb",
         "write-default": "ec5911be-b0a7-458c-8438-c9a3e53cffae"},
        {"id": 2, "name": "data", "required": False,
         "type": {"type": "list", "element-id": 3, "element": "string", "element-required": True}},
        {"id": 6, "name": "prices", "required": False, "doc": "per currency",
         "type": {"type": "map", "key-id": 4, "key": "string", "value-id": 5, "value": "double",
                  "value-required": False}},
        {"id": 7, "name": "point", "required": False,
         "type": {"type": "struct", "fields": [
             {"id": 8, "name": "x", "required": True, "type": "decimal(9, 2)"},  # Java's spelling
             {"id": 9, "name": "tags", "required": False,
              "type": {"type": "list", "element-id": 10, "element": "fixed[16]", "element-required": False}}]}},
    ],
}


@pytest.mark.parametrize(("text", "expected"), [
    ("decimal(9,2)", DecimalType(9, 2)),
    ("decimal(9, 2)", DecimalType(9, 2)),  # Appendix C accepts both spellings
    ("fixed[16]", FixedType(16)),
    ("timestamptz_ns", TIMESTAMPTZ_NS),
    ("geometry(srid:4326)", GeometryType("srid:4326")),
    ("geography(srid:4326,spherical)", GeographyType("srid:4326", "spherical")),
    ("geometry", GeometryType(None)),
])
def test_primitive_types_parse_from_the_spec_spellings(text: str, expected: object) -> None:
    assert parse_primitive(text) == expected


@pytest.mark.parametrize("text", ["decimal(9)", "fixed(16)", "varchar", "Long", "list<string>"])
def test_an_unknown_type_is_corrupt_input(text: str) -> None:
    with pytest.raises(CorruptInputError, match="unknown Iceberg type"):
        parse_primitive(text)


def test_list_and_map_keep_their_ids_and_requiredness() -> None:
    data, prices = SCHEMA_JSON["fields"][1], SCHEMA_JSON["fields"][2]  # type: ignore[index]
    assert parse_type(data["type"]) == ListType(3, STRING, element_required=True)
    assert parse_type(prices["type"]) == MapType(4, STRING, 5, DOUBLE, value_required=False)
    # element-required / value-required default to false when absent
    assert parse_type({"type": "list", "element-id": 3, "element": "long"}) == ListType(3, LONG, False)


def test_nested_type_missing_a_key_is_corrupt_input() -> None:
    with pytest.raises(CorruptInputError, match="map type is missing key 'value-id'"):
        parse_type({"type": "map", "key-id": 4, "key": "string", "value": "double"})
    with pytest.raises(CorruptInputError, match="unknown nested type 'array'"):
        parse_type({"type": "array", "element": "string"})


def test_schema_json_round_trips_key_for_key() -> None:
    # (a type is written in Java's DecimalType.toString spelling, "decimal(9, 2)", whichever was read)
    schema = Schema.from_json(json.loads(json.dumps(SCHEMA_JSON)))
    assert schema.schema_id == 3 and schema.identifier_field_ids == (1,)
    assert schema.to_json() == SCHEMA_JSON
    uuid_field = schema.find_field(1)
    assert uuid_field is not None and uuid_field.field_type == UUID and uuid_field.required
    assert uuid_field.initial_default == "0db3e2a8-9d1d-42b9-aa7b-74ebe558dceb"


def test_an_explicit_null_default_and_unknown_keys_survive_a_round_trip() -> None:
    obj = {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "v", "required": False, "type": "variant", "initial-default": None, "x-vendor": 1}],
        "x-table": "kept"}
    out = Schema.from_json(obj).to_json()
    assert out["fields"][0] == obj["fields"][0]  # 'initial-default': null is not the same as absent
    assert "write-default" not in out["fields"][0]
    assert out["x-table"] == "kept"


def test_an_empty_identifier_list_is_kept_and_an_absent_one_is_not_invented() -> None:
    with_empty = {"type": "struct", "schema-id": 0, "identifier-field-ids": [], "fields": []}
    assert Schema.from_json(with_empty).to_json() == with_empty
    assert "identifier-field-ids" not in Schema.from_json({"type": "struct", "fields": []}).to_json()


def test_field_ids_reach_list_elements_map_keys_values_and_nested_structs() -> None:
    schema = Schema.from_json(SCHEMA_JSON)
    assert sorted(schema.all_ids()) == list(range(1, 11))
    assert schema.highest_field_id() == 10
    assert sorted(schema.field_ids()) == list(range(1, 11))
    assert [schema.column_name(i) for i in (3, 4, 5, 8, 10)] == [
        "data.element", "prices.key", "prices.value", "point.x", "point.tags.element"]
    assert schema.find_type(10) == FixedType(16)
    assert schema.find_type(5) == DOUBLE and schema.find_field(5).required is False  # type: ignore[union-attr]
    assert schema.find_field(4).required is True  # type: ignore[union-attr]  # a map key is always required
    assert schema.find_field(11) is None and schema.column_name(11) is None


def test_an_empty_schema_has_highest_id_zero() -> None:
    assert Schema(()).highest_field_id() == 0


def test_a_schema_must_be_a_struct_with_fields() -> None:
    with pytest.raises(CorruptInputError):
        Schema.from_json({"type": "list", "element-id": 1, "element": "int"})
    with pytest.raises(CorruptInputError, match="missing key 'required'"):
        Schema.from_json({"type": "struct", "fields": [{"id": 1, "name": "a", "type": "int"}]})


def test_type_strings_follow_the_spec() -> None:
    nested = StructType((NestedField(1, "a", DecimalType(38, 10)), NestedField(2, "b", ListType(3, FixedType(4)))))
    assert str(nested) == "struct<a: decimal(38, 10), b: list<fixed[4]>>"
    # geography's defaults per the spec: C is OGC:CRS84, A is spherical; an explicit A needs a C in the text
    assert str(GeographyType(None, "karney")) == "geography(OGC:CRS84, karney)"
    assert parse_primitive(str(GeographyType(None, "karney"))) == GeographyType("OGC:CRS84", "karney")
