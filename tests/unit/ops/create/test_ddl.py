"""The schema / partition / sort-order DDL: types and aliases, Java's ids and names, error messages."""

from __future__ import annotations

import re
from typing import Any

import pytest

from icectl.errors import UsageError
from icectl.ops.create.ddl import parse_partition_spec, parse_schema, parse_sort_order
from icectl.spec.schema import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    TIMESTAMPTZ_NS,
    UNKNOWN,
    UUID,
    VARIANT,
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    IcebergType,
    ListType,
    MapType,
    Schema,
    StructType,
)
from icectl.spec.sorting import UNSORTED
from icectl.spec.transforms import DAY, HOUR, IDENTITY, MONTH, VOID, YEAR, BucketTransform, TruncateTransform

BRIEF = ("id long not null, ts timestamptz, name string comment 'x', tags list<string>, "
         "attrs map<string, struct<a: int, b: decimal(9,2)>>, point struct<x: double not null, y: double>")


def _error(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(UsageError) as info:
        fn(*args, **kwargs)
    line = info.value.one_line()
    assert "\n" not in line
    return line


# --------------------------------------------------------------------------- ids


def test_ids_as_java_assigns_them() -> None:
    # AssignFreshIds: a struct's own fields first (1-6), then each field's type in order:
    # tags' element 7, attrs' key 8 and value 9, the value struct's a/b 10-11, point's x/y 12-13.
    s = parse_schema(BRIEF)
    assert s.schema_id == 0
    assert [(s.column_name(i), i) for i in s.field_ids()] == [
        ("id", 1), ("ts", 2), ("name", 3), ("tags", 4), ("tags.element", 7), ("attrs", 5),
        ("attrs.key", 8), ("attrs.value", 9), ("attrs.value.a", 10), ("attrs.value.b", 11),
        ("point", 6), ("point.x", 12), ("point.y", 13)]
    assert s.highest_field_id() == 13
    tags = s.find_type(4)
    assert isinstance(tags, ListType) and tags.element_id == 7 and not tags.element_required
    attrs = s.find_type(5)
    assert isinstance(attrs, MapType) and (attrs.key_id, attrs.value_id) == (8, 9)
    assert s.find_field(1).required and s.find_field(12).required and not s.find_field(13).required
    assert s.find_field(3).doc == "x"


def test_deeply_nested_ids_depth_first_after_each_level() -> None:
    s = parse_schema("a struct<x: struct<p: int, q: int>, y: list<struct<m: int>>>, "
                     "b map<int, map<string, list<int>>>")
    names = {s.column_name(i): i for i in s.field_ids()}
    assert names == {
        "a": 1, "b": 2, "a.x": 3, "a.y": 4, "a.x.p": 5, "a.x.q": 6, "a.y.element": 7, "a.y.element.m": 8,
        "b.key": 9, "b.value": 10, "b.value.key": 11, "b.value.value": 12, "b.value.value.element": 13}


def test_required_elements_values_and_struct_syntax() -> None:
    s = parse_schema("l list<int not null>, m map<string, double not null>, "
                     "s struct<a int not null comment 'c', `b c`: string>, e struct<>")
    lt, mt, st, et = (f.field_type for f in s.fields)
    assert isinstance(lt, ListType) and lt.element_required
    assert isinstance(mt, MapType) and mt.value_required
    assert isinstance(st, StructType) and [(f.name, f.required, f.doc) for f in st.fields] == [
        ("a", True, "c"), ("b c", False, None)]
    assert et == StructType(())


# --------------------------------------------------------------------------- types and aliases

ALIASES: list[tuple[str, IcebergType]] = [
    ("boolean", BOOLEAN), ("bool", BOOLEAN), ("BOOLEAN", BOOLEAN),
    ("int", INT), ("integer", INT), ("smallint", INT), ("short", INT), ("tinyint", INT), ("byte", INT),
    ("long", LONG), ("bigint", LONG),
    ("float", FLOAT), ("real", FLOAT), ("double", DOUBLE), ("double precision", DOUBLE),
    ("date", DATE), ("time", TIME),
    ("timestamp", TIMESTAMP), ("timestamp_ntz", TIMESTAMP), ("timestamp without time zone", TIMESTAMP),
    ("timestamptz", TIMESTAMPTZ), ("timestamp_ltz", TIMESTAMPTZ), ("TIMESTAMP WITH TIME ZONE", TIMESTAMPTZ),
    ("timestamp_ns", TIMESTAMP_NS), ("timestamptz_ns", TIMESTAMPTZ_NS),
    ("string", STRING), ("text", STRING), ("varchar(10)", STRING), ("char(3)", STRING), ("varchar", STRING),
    ("uuid", UUID), ("binary", BINARY), ("bytes", BINARY),
    ("fixed[16]", FixedType(16)), ("fixed(4)", FixedType(4)), ("fixed[ 2 ]", FixedType(2)),
    ("decimal(9,2)", DecimalType(9, 2)), ("decimal( 38 , 0 )", DecimalType(38, 0)),
    ("decimal(5)", DecimalType(5, 0)), ("decimal", DecimalType(10, 0)), ("numeric(4,1)", DecimalType(4, 1)),
    ("variant", VARIANT), ("unknown", UNKNOWN),
    ("geometry", GeometryType()), ("geometry(OGC:CRS84)", GeometryType()), ("geometry(srid:4326)",
                                                                             GeometryType("srid:4326")),
    ("geometry('EPSG:3857')", GeometryType("EPSG:3857")),
    ("geography", GeographyType()), ("geography(EPSG:4326)", GeographyType("EPSG:4326")),
    ("geography(OGC:CRS84, Karney)", GeographyType(None, "karney")),
    ("geography(srid:4269, spherical)", GeographyType("srid:4269", "spherical")),
    ("array<int>", ListType(1, INT)),
]


@pytest.mark.parametrize(("text", "expected"), ALIASES, ids=[a[0] for a in ALIASES])
def test_type_names_and_aliases(text: str, expected: IcebergType) -> None:
    s = parse_schema(f"c {text}")
    actual = s.fields[0].field_type
    if isinstance(expected, ListType):
        expected = ListType(2, expected.element_type)  # ids are fresh: the column is 1
    assert actual == expected


def test_geo_types_render_as_java_does() -> None:
    s = parse_schema("g geography(OGC:CRS84, karney), h geometry(EPSG:4326)")
    assert [str(f.field_type) for f in s.fields] == ["geography(OGC:CRS84, karney)", "geometry(EPSG:4326)"]


def test_keywords_are_fine_as_column_names() -> None:
    s = parse_schema("comment string, default int, not bool, timestamp timestamp, `select` long")
    assert [f.name for f in s.fields] == ["comment", "default", "not", "timestamp", "select"]


# --------------------------------------------------------------------------- defaults

DEFAULTS: list[tuple[str, Any]] = [
    ("int default 5", 5), ("long default -7", -7), ("boolean default true", True), ("bool default FALSE", False),
    ("double default 1.5", 1.5), ("float default 2", 2.0), ("decimal(9,2) default 1.5", "1.50"),
    ("decimal(9,2) default '-3.25'", "-3.25"), ("decimal(38,10) default 1234567890123456789012345678",
                                                "1234567890123456789012345678.0000000000"),
    ("string default 'it''s'", "it's"), ("string default \"x\\ty\"", "x\ty"),
    ("date default '2024-02-29'", "2024-02-29"), ("date default DATE '1970-01-01'", "1970-01-01"),
    ("time default '10:15:30.5'", "10:15:30.500000"),
    ("timestamp default '2024-01-01 10:00:00'", "2024-01-01T10:00:00.000000"),
    ("timestamptz default '2024-01-01T10:00:00Z'", "2024-01-01T10:00:00.000000+00:00"),
    ("timestamptz_ns default '2024-01-01T10:00:00.123456789+00:00'", "2024-01-01T10:00:00.123456789+00:00"),
    ("uuid default 'F79C3E09-677C-4BBD-A479-3F349CB785E7'", "f79c3e09-677c-4bbd-a479-3f349cb785e7"),
    ("binary default X'0A0b'", "0a0b"), ("fixed[2] default x'cafe'", "cafe"), ("fixed[2] default 'CAFE'", "cafe"),
]


@pytest.mark.parametrize(("text", "expected"), DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_defaults_become_json_single_values(text: str, expected: Any) -> None:
    f = parse_schema(f"c {text} not null", format_version=3).fields[0]
    assert f.required
    assert (f.initial_default, f.write_default) == (expected, expected)
    assert f.has_initial_default and f.has_write_default
    assert "initial-default" in Schema((f,)).to_json()["fields"][0]


def test_default_null_is_no_default() -> None:
    f = parse_schema("c int default null", format_version=3).fields[0]
    assert not f.has_initial_default and f.initial_default is None


DEFAULT_ERRORS = [
    ("c int default 5", 2, "character 7 ('default'): default values need format v3 or later (the table is v2)"),
    ("c int default 'a'", 3, "character 15 (\"'a'\"): not a valid int default: expected a whole number"),
    ("c int default 3000000000", 3, "character 15 ('3000000000'): not a valid int default"),
    ("c decimal(9,2) default 1.234", 3, "('1.234'): not a valid decimal(9, 2) default: more than 2 digits after"),
    ("c decimal(3,2) default 12.5", 3, "more than 3 digits"),
    ("c list<int> default 1", 3, "character 21 ('1'): a list<int> column can only default to null"),
    ("c variant default 'x'", 3, "a variant column can only default to null"),
    ("c date default '2024-13-01'", 3, "not a valid date default"),
    ("c timestamptz default '2024-01-01T00:00:00'", 3, "+00:00"),
    ("c fixed[2] default X'0A'", 3, "expected 4 hex digits"),
    ("c int default", 3, "(end of text): expected a default value"),
    ("c int default 1 default 2", 3, "character 17 ('default'): given twice for the same column"),
]


@pytest.mark.parametrize(("text", "version", "message"), DEFAULT_ERRORS, ids=[e[0] for e in DEFAULT_ERRORS])
def test_default_errors(text: str, version: int, message: str) -> None:
    assert message in _error(parse_schema, text, format_version=version)


# --------------------------------------------------------------------------- schema errors

SCHEMA_ERRORS = [
    ("id long, ts lnog", "bad schema at character 13 ('lnog'): unknown type (did you mean 'long'?); "
                         "expected one of boolean, int, long"),
    ("id long not null, x strng", "bad schema at character 21 ('strng'): unknown type (did you mean 'string'?)"),
    ("", "bad schema at character 1 (end of text): expected at least one column"),
    ("id long,", "bad schema at character 9 (end of text): expected a column name"),
    ("id", "bad schema at character 3 (end of text): expected a type for column 'id'"),
    ("id, x int", "bad schema at character 3 (','): expected a type for column 'id'"),
    ("a struct<x int", "at character 15 (end of text): expected ',', 'not null', 'comment', 'default' or "
                       "'>' to close struct<"),
    ("a list<int", "(end of text): expected '>' (or 'not null') to close list<"),
    ("a map<string int>", "at character 14 ('int'): expected ',' between the key and value types of map<"),
    ("a decimal(40,2)", "at character 11 ('40'): decimal precision must be 1 to 38"),
    ("a decimal(4,5)", "decimal scale 5 is larger than precision 4"),
    ("a fixed[0]", "the length of fixed must be at least 1"),
    ("a fixed", "expected '[' after fixed"),
    ("a int b int", "at character 7 ('b'): expected ',', 'not null', 'comment', 'default' or the end"),
    ("a int not nul", "expected 'null' after 'not'"),
    ("a int comment x", "at character 15 ('x'): expected a quoted comment after 'comment'"),
    ("a int not null null", "at character 16 ('null'): given twice for the same column"),
    ("a string comment 'oops", "at character 18 (\"'oops\"): unterminated quoted string"),
    ("`a int", "unterminated quoted name"),
    ("a int, A long", "at character 8 ('A'): duplicate column name (already have 'a')"),
    ("s struct<x: int, x: int>", "at character 18 ('x'): duplicate column name"),
    ("a int; b int", "at character 6 (';'): unexpected character"),
    ("`` int", "a column name must not be empty"),
    ("a geography(x, flat)", "expected an edge algorithm"),
    ("a geometry()", "expected a CRS"),
    ("a unknown not null", "character 1 ('a'): a column of type unknown must be optional"),
    ("a list<unknown not null>", "unknown can only be the type of optional values"),
    ("a interval", "('interval'): unknown type"),
]


@pytest.mark.parametrize(("text", "message"), SCHEMA_ERRORS, ids=[e[0] or "empty" for e in SCHEMA_ERRORS])
def test_schema_errors_name_the_token_and_position(text: str, message: str) -> None:
    line = _error(parse_schema, text)
    assert message in line
    m = re.search(r"at character (\d+) \((.*?)\):", line)
    assert m, line
    if m.group(2) != "end of text":  # the quoted token really is at that position
        token = eval(m.group(2))  # a Python repr of the token text
        start = int(m.group(1)) - 1
        assert text[start:start + len(token)] == token


@pytest.mark.parametrize("text", ["t timestamp_ns", "t timestamptz_ns", "v variant", "u unknown",
                                  "g geometry", "g geography(srid:4326)", "s struct<v: variant>"])
def test_v3_types_need_v3(text: str) -> None:
    assert "needs format v3 or later (the table is v2)" in _error(parse_schema, text, format_version=2)
    parse_schema(text, format_version=3)
    parse_schema(text)  # unknown version: new_table_metadata checks later


# --------------------------------------------------------------------------- partition specs

SCHEMA = parse_schema("id long not null, ts timestamptz, name string, category string, d date, "
                      "price decimal(9,2), point struct<x: double, y: int>, tags list<string>, "
                      "m map<string, int>, b binary, t time, ntz timestamp_ns")


def _spec(text: str) -> list[tuple[str, str, int, int]]:
    spec = parse_partition_spec(text, SCHEMA)
    return [(f.name, str(f.transform), f.source_id, f.field_id) for f in spec.fields]


def test_partition_spec_names_and_ids_as_java() -> None:
    assert _spec("days(ts), bucket(16, id), truncate(4, name), identity(category)") == [
        ("ts_day", "day", 2, 1000), ("id_bucket", "bucket[16]", 1, 1001),
        ("name_trunc", "truncate[4]", 3, 1002), ("category", "identity", 4, 1003)]
    assert _spec("years(d), price, hour(ntz)") == [
        ("d_year", "year", 5, 1000), ("price", "identity", 6, 1001), ("ntz_hour", "hour", 12, 1002)]
    assert _spec("month(ts)") == [("ts_month", "month", 2, 1000)]
    assert _spec("months(d)") == [("d_month", "month", 5, 1000)]
    assert _spec("day(d)") == [("d_day", "day", 5, 1000)]
    assert _spec("date(ts)") == [("ts_day", "day", 2, 1000)]  # Spark's aliases
    assert _spec("date_hour(ts)") == [("ts_hour", "hour", 2, 1000)]
    assert _spec("hours(ts)") == [("ts_hour", "hour", 2, 1000)]
    assert _spec("year(ts)") == [("ts_year", "year", 2, 1000)]
    assert _spec("void(name), name") == [("name_null", "void", 3, 1000), ("name", "identity", 3, 1001)]


def test_partition_spec_forms() -> None:
    assert _spec("bucket(id, 8)") == [("id_bucket", "bucket[8]", 1, 1000)]  # Spark takes either order
    assert _spec("TRUNCATE(name, 2)") == [("name_trunc", "truncate[2]", 3, 1000)]
    assert _spec("point.x, bucket(4, point.y)") == [("point.x", "identity", 13, 1000),
                                                    ("point.y_bucket", "bucket[4]", 14, 1001)]
    assert _spec("ID, Days(TS)") == [("id", "identity", 1, 1000), ("ts_day", "day", 2, 1001)]
    assert _spec("`category` as cat, days(ts) as day") == [("cat", "identity", 4, 1000), ("day", "day", 2, 1001)]
    assert _spec("") == []
    spec = parse_partition_spec("days(ts)", SCHEMA, spec_id=3)
    assert spec.spec_id == 3 and spec.fields[0].transform == DAY


PARTITION_ERRORS = [
    ("days(id)", "character 1 ('days'): partition field id_day: transform day cannot be applied to column id "
                 "of type long"),
    ("hours(d)", "transform hour cannot be applied to column d of type date"),
    ("bucket(16, nope)", "character 12 ('nope'): no column named 'nope'"),
    ("bucket(16, nmae)", "(did you mean 'name'?)"),
    ("days(ts), hours(ts)", "character 11 ('hours'): redundant partition field ts_hour (hour(ts)) conflicts "
                            "with ts_day (day(ts))"),
    ("id, id", "character 5 ('id'): partition name 'id' is used more than once"),
    ("bucket(0, id)", "character 8 ('0'): the width of bucket must be a positive 32-bit integer"),
    ("truncate(name)", "expected ',' and a width after the column of truncate("),
    ("tags", "cannot use column tags of non-primitive type list<string>"),
    ("tags.element", "column tags.element is inside a list<string>; only struct fields can be used"),
    ("m.key", "column m.key is inside a map<string, int>"),
    ("point", "non-primitive type struct"),
    ("frob(id)", "character 1 ('frob'): unknown transform; expected one of identity, bucket(n, col)"),
    ("days(ts) as id", "partition name 'id' is already a column name"),
    ("name as category", "partition name 'category' is the name of a different column"),
    ("days(ts", "expected ')' to close days("),
    ("days(ts) name", "character 10 ('name'): expected ',' or the end of the list"),
    ("bucket(16, b), truncate(2, t)", "character 16 ('truncate'): partition field t_trunc: transform truncate[2] "
                                      "cannot be applied to column t of type time"),
    ("16", "expected a column name or a transform"),
]


@pytest.mark.parametrize(("text", "message"), PARTITION_ERRORS, ids=[e[0] for e in PARTITION_ERRORS])
def test_partition_spec_errors(text: str, message: str) -> None:
    line = _error(parse_partition_spec, text, SCHEMA)
    assert line.startswith("bad partition spec at character ")
    assert message in line


def test_transform_objects() -> None:
    spec = parse_partition_spec("identity(id), year(ts), month(d), hour(ntz), void(name), "
                                "bucket(3, b), truncate(5, price)", SCHEMA)
    assert [f.transform for f in spec.fields][:5] == [IDENTITY, YEAR, MONTH, HOUR, VOID]
    assert spec.fields[5].transform == BucketTransform(3)
    assert spec.fields[6].transform == TruncateTransform(5)
    assert parse_partition_spec("day(ntz)", SCHEMA).fields[0].transform == DAY


# --------------------------------------------------------------------------- sort orders


def _order(text: str) -> list[tuple[str, int, str, str]]:
    order = parse_sort_order(text, SCHEMA)
    return [(str(f.transform), f.source_id, f.direction, f.null_order) for f in order.fields]


def test_sort_order_defaults_as_java() -> None:
    assert _order("id desc nulls last, days(ts)") == [("identity", 1, "desc", "nulls-last"),
                                                      ("day", 2, "asc", "nulls-first")]
    assert _order("id desc") == [("identity", 1, "desc", "nulls-last")]
    assert _order("id ASC NULLS LAST, name DESC NULLS FIRST, point.x") == [
        ("identity", 1, "asc", "nulls-last"), ("identity", 3, "desc", "nulls-first"), ("identity", 13, "asc",
                                                                                        "nulls-first")]
    assert _order("bucket(4, id), truncate(name, 2) desc") == [("bucket[4]", 1, "asc", "nulls-first"),
                                                               ("truncate[2]", 3, "desc", "nulls-last")]
    assert parse_sort_order("id", SCHEMA).order_id == 1
    assert parse_sort_order("", SCHEMA) == UNSORTED


SORT_ERRORS = [
    ("id nulls", "(end of text): expected 'first' or 'last' after 'nulls'"),
    ("id up", "character 4 ('up'): expected ',' or the end of the list"),
    ("tags", "cannot use column tags of non-primitive type"),
    ("void(id)", "character 1 ('void'): sort field 1: transform void cannot order rows"),
    ("id, hours(d)", "character 5 ('hours'): sort field 2: transform hour cannot be applied to column d"),
    ("nope desc", "no column named 'nope'"),
]


@pytest.mark.parametrize(("text", "message"), SORT_ERRORS, ids=[e[0] for e in SORT_ERRORS])
def test_sort_order_errors(text: str, message: str) -> None:
    line = _error(parse_sort_order, text, SCHEMA)
    assert line.startswith("bad sort order at character ")
    assert message in line
