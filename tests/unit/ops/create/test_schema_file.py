"""icectl/ops/create/schema_file.py: a schema from a JSON file (Appendix C, or table metadata) or a Parquet file."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icectl.errors import CorruptInputError, NotFoundError, UsageError
from icectl.ops.create.ddl import parse_schema
from icectl.ops.create.metadata import new_table_metadata
from icectl.ops.create.schema_file import schema_from_json_file, schema_from_parquet
from icectl.spec.partitioning import UNPARTITIONED
from icectl.spec.schema import (
    BINARY,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    UNKNOWN,
    UUID,
    DecimalType,
    FixedType,
)
from icectl.spec.sorting import UNSORTED
from icectl.storage import FileIO

# --------------------------------------------------------------------------- schema_io: JSON


def test_schema_from_json_file_reassigns_ids(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "struct", "schema-id": 5, "identifier-field-ids": [30], "fields": [
        {"id": 10, "name": "tags", "required": False, "type": {
            "type": "list", "element-id": 11, "element": "string", "element-required": True}},
        {"id": 30, "name": "id", "required": True, "type": "long", "doc": "key"}]}))
    s = schema_from_json_file(str(path))
    assert [(s.column_name(i), i) for i in s.field_ids()] == [("tags", 1), ("tags.element", 3), ("id", 2)]
    assert s.identifier_field_ids == (2,) and s.schema_id == 0 and s.find_field(2).doc == "key"


def test_schema_from_metadata_json(tmp_path: Path) -> None:
    md = new_table_metadata(schema=parse_schema("a int, b string"), location="/wh/db/t",
                            partition_spec=UNPARTITIONED, sort_order=UNSORTED, properties={},
                            format_version=2, table_uuid="9c12d441-03fe-4693-9a96-a0705ddf69c1",
                            now_ms=1717000000000).to_json()
    path = tmp_path / "v1.metadata.json"
    path.write_text(json.dumps(md))
    assert [f.name for f in schema_from_json_file(str(path)).fields] == ["a", "b"]


def test_schema_from_json_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UsageError, match="not valid JSON"):
        schema_from_json_file(str(bad))
    bad.write_text('{"type": "struct", "fields": [{"id": 1, "name": "a", "type": "long"}]}')
    with pytest.raises(UsageError, match=r"invalid schema JSON.*required"):
        schema_from_json_file(str(bad))
    with pytest.raises(NotFoundError):
        schema_from_json_file(str(tmp_path / "missing.json"))
    bad.write_text("[1, 2]")
    with pytest.raises(UsageError, match="must hold a JSON schema object"):
        schema_from_json_file(str(bad))


def test_metadata_json_gives_its_current_schema_not_the_first(tmp_path: Path) -> None:
    def schema(schema_id: int, *names: str) -> dict[str, object]:
        return {"type": "struct", "schema-id": schema_id,
                "fields": [{"id": 7 + i, "name": n, "required": False, "type": "int"} for i, n in enumerate(names)]}
    path = tmp_path / "v3.metadata.json"
    path.write_text(json.dumps({"format-version": 2, "current-schema-id": 4,
                                "schemas": [schema(0, "old"), schema(4, "new", "newer")]}))
    s = schema_from_json_file(str(path))
    assert [(f.field_id, f.name, f.field_type) for f in s.fields] == [(1, "new", INT), (2, "newer", INT)]
    path.write_text(json.dumps({"format-version": 1, "schema": schema(0, "v1col")}))  # v1: a single 'schema'
    assert [f.name for f in schema_from_json_file(str(path)).fields] == ["v1col"]
    path.write_text(json.dumps({"format-version": 2, "current-schema-id": 9, "schemas": [schema(0, "x")]}))
    with pytest.raises(UsageError, match="must hold a JSON schema object"):
        schema_from_json_file(str(path))


# --------------------------------------------------------------------------- schema_io: Parquet


def _write(tmp_path: Path, table: pa.Table, **kwargs: object) -> str:
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **kwargs)  # type: ignore[arg-type]
    return str(path)


def test_parquet_types(tmp_path: Path) -> None:
    struct = pa.struct([pa.field("x", pa.float64(), nullable=False), ("y", pa.string())])
    arrays = {
        "id": pa.array([1], pa.int64()), "i8": pa.array([1], pa.int8()), "u16": pa.array([1], pa.uint16()),
        "u32": pa.array([1], pa.uint32()), "f16": pa.array([1.0], pa.float16()), "f": pa.array([1.0], pa.float32()),
        "dec": pa.array([1], pa.decimal128(9, 2)), "d32": pa.array([1], pa.date32()),
        "t": pa.array([1], pa.time32("ms")), "tns": pa.array([1], pa.time64("ns")),
        "ts_ms": pa.array([1], pa.timestamp("ms")), "tsz_us": pa.array([1], pa.timestamp("us", "UTC")),
        "ts_ns": pa.array([1], pa.timestamp("ns")), "tsz_ns": pa.array([1], pa.timestamp("ns", "Europe/Paris")),
        "s": pa.array(["a"], pa.large_string()), "bin": pa.array([b"a"], pa.large_binary()),
        "fx": pa.array([b"x" * 16], pa.binary(16)), "u": pa.array([uuid.uuid4().bytes], pa.uuid()),
        "dict": pa.array(["a"]).dictionary_encode(), "js": pa.array(["{}"], pa.json_()),
        "n": pa.array([None], pa.null()),
        "l": pa.array([[1]], pa.list_(pa.field("element", pa.int32(), nullable=False))),
        "ll": pa.array([["a"]], pa.large_list(pa.string())),
        "m": pa.array([[("k", {"x": 1.0, "y": "a"})]], pa.map_(pa.string(), struct)),
        "st": pa.array([{"x": 1.0, "y": "a"}], struct),
    }
    schema = pa.schema([pa.field(k, v.type, nullable=k != "id") for k, v in arrays.items()])
    path = _write(tmp_path, pa.table(arrays, schema=schema))
    s = schema_from_parquet(path, FileIO())
    types = {f.name: f.field_type for f in s.fields}
    assert s.fields[0].required and not s.fields[1].required
    assert types == {
        "id": LONG, "i8": INT, "u16": INT, "u32": LONG, "f16": types["f"], "f": types["f"],
        "dec": DecimalType(9, 2), "d32": types["d32"], "t": TIME, "tns": TIME, "ts_ms": TIMESTAMP,
        "tsz_us": TIMESTAMPTZ, "ts_ns": TIMESTAMP_NS, "tsz_ns": types["tsz_ns"], "s": STRING, "bin": BINARY,
        "fx": FixedType(16), "u": UUID, "dict": STRING, "js": STRING, "n": UNKNOWN,
        "l": types["l"], "ll": types["ll"], "m": types["m"], "st": types["st"]}
    assert str(types["f"]) == "float" and str(types["d32"]) == "date" and str(types["tsz_ns"]) == "timestamptz_ns"
    assert str(types["l"]) == "list<int>" and types["l"].element_required  # type: ignore[attr-defined]
    assert str(types["ll"]) == "list<string>"
    assert str(types["m"]) == "map<string, struct<x: double, y: string>>"
    assert [(f.name, f.required) for f in types["st"].fields] == [("x", True), ("y", False)]  # type: ignore[attr-defined]
    assert s.highest_field_id() == len(s.field_ids())  # fresh ids 1..n


def test_parquet_int96_is_timestamptz_as_in_java(tmp_path: Path) -> None:
    table = pa.table({"a": pa.array([[1]], pa.list_(pa.int32())), "ts": pa.array([1], pa.timestamp("ns")),
                      "later": pa.array([1], pa.timestamp("ns"))})
    path = _write(tmp_path, table, use_deprecated_int96_timestamps=True)
    types = [f.field_type for f in schema_from_parquet(path, FileIO()).fields]
    assert types[1:] == [TIMESTAMPTZ, TIMESTAMPTZ]


def test_parquet_unsupported_type_names_the_column(tmp_path: Path) -> None:
    table = pa.table({"ok": [1], "s": pa.array([{"big": 1}], pa.struct([("big", pa.uint64())]))})
    with pytest.raises(UsageError, match=r"column 's\.big' has Arrow type uint64"):
        schema_from_parquet(_write(tmp_path, table), FileIO())
    table = pa.table({"d": pa.array([1], pa.duration("s"))})
    with pytest.raises(UsageError, match=r"column 'd' has Arrow type duration\[s\]"):
        schema_from_parquet(_write(tmp_path, table), FileIO())


def test_parquet_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(CorruptInputError, match="cannot read the Parquet schema"):
        schema_from_parquet(str(path), FileIO())
