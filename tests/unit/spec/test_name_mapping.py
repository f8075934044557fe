"""Name mappings as Java's MappingUtil / NameMappingParser build them (JSON shapes from
NameMappingParser's documented example and CreateMapping's element/key/value names)."""

from __future__ import annotations

import json

import pytest

from icectl.errors import CorruptInputError
from icectl.ops.create.metadata import new_table_metadata
from icectl.spec.name_mapping import (
    DEFAULT_NAME_MAPPING,
    MappedField,
    create,
    ensure_name_mapping,
    from_json,
    to_json,
    update,
)
from icectl.spec.schema import (
    DOUBLE,
    INT,
    LONG,
    STRING,
    ListType,
    MapType,
    NestedField,
    Schema,
    StructType,
)

NESTED = Schema((
    NestedField(1, "id", LONG, True),
    NestedField(2, "location", StructType((NestedField(3, "lat", DOUBLE), NestedField(4, "long", DOUBLE)))),
    NestedField(5, "tags", ListType(6, STRING)),
    NestedField(7, "props", MapType(8, STRING, 9, StructType((NestedField(10, "n", INT),)))),
))


def test_create_covers_structs_lists_and_maps() -> None:
    assert json.loads(to_json(create(NESTED))) == [
        {"field-id": 1, "names": ["id"]},
        {"field-id": 2, "names": ["location"], "fields": [
            {"field-id": 3, "names": ["lat"]}, {"field-id": 4, "names": ["long"]}]},
        {"field-id": 5, "names": ["tags"], "fields": [{"field-id": 6, "names": ["element"]}]},
        {"field-id": 7, "names": ["props"], "fields": [
            {"field-id": 8, "names": ["key"]},
            {"field-id": 9, "names": ["value"], "fields": [{"field-id": 10, "names": ["n"]}]}]},
    ]


def test_json_round_trip_of_java_example() -> None:
    java = """[ { "field-id": 1, "names": ["id", "record_id"] },
      { "field-id": 2, "names": ["data"] },
      { "field-id": 3, "names": ["location"], "fields": [
          { "field-id": 4, "names": ["latitude", "lat"] },
          { "field-id": 5, "names": ["longitude", "long"] } ] } ]"""
    parsed = from_json(java)
    assert parsed[2] == MappedField(3, ("location",), (MappedField(4, ("latitude", "lat")),
                                                       MappedField(5, ("longitude", "long"))))
    assert from_json(to_json(parsed)) == parsed
    assert from_json('[{"names": ["x"]}]') == (MappedField(None, ("x",)),)  # Java allows no id


@pytest.mark.parametrize("bad", ["{", "{}", "[1]", '[{"field-id": "1"}]', '[{"names": "x"}]',
                                 '[{"field-id": 1, "fields": {}}]', "[" * 100_000])
def test_bad_json_is_corrupt_input(bad: str) -> None:
    with pytest.raises(CorruptInputError):
        from_json(bad)


def test_update_adds_new_ids_and_keeps_aliases() -> None:
    old = from_json(json.dumps([
        {"field-id": 1, "names": ["id", "record_id"]},
        {"field-id": 2, "names": ["location"], "fields": [{"field-id": 3, "names": ["lat", "latitude"]}]},
    ]))
    new = update(old, NESTED)
    assert json.loads(to_json(new)) == [
        {"field-id": 1, "names": ["id", "record_id"]},
        {"field-id": 2, "names": ["location"], "fields": [
            {"field-id": 3, "names": ["lat", "latitude"]}, {"field-id": 4, "names": ["long"]}]},
        {"field-id": 5, "names": ["tags"], "fields": [{"field-id": 6, "names": ["element"]}]},
        {"field-id": 7, "names": ["props"], "fields": [
            {"field-id": 8, "names": ["key"]},
            {"field-id": 9, "names": ["value"], "fields": [{"field-id": 10, "names": ["n"]}]}]},
    ]
    assert update(new, NESTED) == new  # complete: nothing more to add


def test_update_renamed_field_and_reassigned_name() -> None:
    # Column 1 was renamed id -> key, and a new column 2 took the name id: the name must find 2 only.
    old = from_json('[{"field-id": 1, "names": ["id"]}]')
    schema = Schema((NestedField(1, "key", LONG), NestedField(2, "id", STRING)))
    assert json.loads(to_json(update(old, schema))) == [
        {"field-id": 1, "names": ["key"]}, {"field-id": 2, "names": ["id"]}]


def test_ensure_name_mapping_on_metadata() -> None:
    md = new_table_metadata(schema=NESTED, location="/tmp/t", partition_spec=None, sort_order=None,
                            properties={}, format_version=2, fresh_ids=False)
    created, outcome = ensure_name_mapping(md)
    assert outcome == "created" and json.loads(created.properties[DEFAULT_NAME_MAPPING])[0]["names"] == ["id"]
    same, outcome = ensure_name_mapping(created)
    assert outcome == "unchanged" and same is created
    stale = md.replace(properties={DEFAULT_NAME_MAPPING: '[{"field-id": 1, "names": ["id", "pk"]}]'})
    extended, outcome = ensure_name_mapping(stale)
    assert outcome == "extended"
    assert from_json(extended.properties[DEFAULT_NAME_MAPPING])[0] == MappedField(1, ("id", "pk"))
    assert len(from_json(extended.properties[DEFAULT_NAME_MAPPING])) == 4
