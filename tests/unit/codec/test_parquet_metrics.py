"""A Parquet footer as Iceberg ``data_file`` metrics (Java's ParquetUtil, default mode truncate(16)).

Bounds are checked as bytes built here by hand in the spec's binary single-value form (Appendix D):
int/long/float/double/date/timestamp little-endian, strings UTF-8, binary as is, decimals the unscaled
value as minimal two's-complement big-endian. Value counts include nulls (spec: ``value_counts``).
"""

from __future__ import annotations

import datetime
import struct
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icectl.codec.parquet_metrics import data_file_from_footer
from icectl.errors import ExitCode, UsageError
from icectl.spec.manifest import DataFile, DataFileContent
from icectl.spec.schema import (
    BINARY,
    DATE,
    DOUBLE,
    LONG,
    STRING,
    TIMESTAMPTZ,
    DecimalType,
    ListType,
    NestedField,
    Schema,
)

UTC = datetime.timezone.utc
SCHEMA = Schema((
    NestedField(1, "id", LONG), NestedField(2, "name", STRING), NestedField(3, "d", DATE),
    NestedField(4, "ts", TIMESTAMPTZ), NestedField(5, "price", DOUBLE), NestedField(6, "blob", BINARY),
    NestedField(7, "tags", ListType(8, STRING)), NestedField(9, "amount", DecimalType(9, 2)),
    NestedField(10, "note", STRING)))


def _field(name: str, t: pa.DataType, fid: int) -> pa.Field:
    return pa.field(name, t, metadata={"PARQUET:field_id": str(fid)})


def _footer(path: Path, table: pa.Table, schema: Schema = SCHEMA, **kw: object) -> DataFile:
    pq.write_table(table, path, **kw)  # type: ignore[arg-type]
    return data_file_from_footer(str(path), path.stat().st_size, pq.ParquetFile(path).metadata, schema, None)


def test_counts_and_bounds_over_two_row_groups(tmp_path: Path) -> None:
    arrow = pa.schema([
        _field("id", pa.int64(), 1), _field("name", pa.string(), 2), _field("d", pa.date32(), 3),
        _field("ts", pa.timestamp("us", tz="UTC"), 4), _field("price", pa.float64(), 5),
        _field("blob", pa.binary(), 6), _field("tags", pa.list_(_field("element", pa.string(), 8)), 7),
        _field("amount", pa.decimal128(9, 2), 9), _field("note", pa.string(), 10)])
    ts = [datetime.datetime(2024, 1, 1, tzinfo=UTC) + datetime.timedelta(seconds=s) for s in (30, 0, 60, 90, 10)]
    table = pa.table({
        "id": [5, None, -3, 10, 7],
        "name": ["b", "a" * 20, None, "c" * 20, "ab"],
        "d": [datetime.date(2024, 1, 2), datetime.date(2024, 1, 1), None, datetime.date(2024, 2, 1), None],
        "ts": ts,
        "price": [1.5, -0.5, 3.25, None, 2.0],
        "blob": [b"\x00", b"\xff" * 20, b"\x10", None, b"\x20"],
        "tags": [["x"], [], None, ["y", "z"], ["w"]],
        "amount": [Decimal("1.05"), Decimal("-2.50"), None, Decimal("0.00"), Decimal("0.10")],
        "note": [None, None, None, "x", "y"],  # the first row group holds only nulls
    }, schema=arrow)
    df = _footer(tmp_path / "f.parquet", table, row_group_size=3)
    assert (df.content, df.file_format, df.record_count, df.partition) == (DataFileContent.DATA, "PARQUET", 5, None)
    assert df.file_size_in_bytes == (tmp_path / "f.parquet").stat().st_size
    assert df.value_counts == {1: 5, 2: 5, 3: 5, 4: 5, 5: 5, 6: 5, 9: 5, 10: 5}  # nulls included; no list element
    assert df.null_value_counts == {1: 1, 2: 1, 3: 2, 4: 0, 5: 1, 6: 1, 9: 1, 10: 3}
    assert set(df.column_sizes or {}) == {1, 2, 3, 4, 5, 6, 8, 9, 10}  # the list keeps its element's size only
    epoch_day_2024 = 19723  # 2024-01-01
    micros_2024 = 1_704_067_200 * 1_000_000
    assert df.lower_bounds == {
        1: struct.pack("<q", -3), 2: b"a" * 16, 3: struct.pack("<i", epoch_day_2024),
        4: struct.pack("<q", micros_2024), 5: struct.pack("<d", -0.5), 6: b"\x00",
        9: (-250).to_bytes(2, "big", signed=True), 10: b"x"}
    assert df.upper_bounds == {
        1: struct.pack("<q", 10), 2: b"c" * 15 + b"d", 3: struct.pack("<i", epoch_day_2024 + 31),
        4: struct.pack("<q", micros_2024 + 90_000_000), 5: struct.pack("<d", 3.25),
        # 6: twenty 0xff bytes have no 16-byte upper bound: none is written
        9: bytes([105]), 10: b"y"}
    assert df.nan_value_counts is None
    offsets = df.split_offsets or ()
    assert len(offsets) == 2 and offsets[0] == 4 and offsets[1] > offsets[0]  # after the 4-byte magic


def test_strings_truncate_by_code_point_and_round_the_upper_bound_up(tmp_path: Path) -> None:
    schema = Schema((NestedField(1, "s", STRING),))
    table = pa.table({"s": pa.array(["é" * 20, "é" * 17 + "\U0010ffff" * 3, "\U0010ffff" * 17])},
                     schema=pa.schema([_field("s", pa.string(), 1)]))
    df = _footer(tmp_path / "s.parquet", table, schema)
    assert df.lower_bounds == {1: ("é" * 16).encode()}  # 16 characters, not 16 bytes
    # The largest value is 17 of the last code point: no 16-character string is above it.
    assert df.upper_bounds == {}
    one = pa.table({"s": pa.array(["é" * 15 + "\U0010ffff" * 5])}, schema=pa.schema([_field("s", pa.string(), 1)]))
    df = _footer(tmp_path / "t.parquet", one, schema)
    assert df.upper_bounds == {1: ("é" * 14 + "ê").encode()}  # the last code point that can grow grows


def test_columns_match_by_field_id_then_by_name(tmp_path: Path) -> None:
    schema = Schema((NestedField(1, "id", LONG), NestedField(2, "name", STRING)))
    by_id = pa.table({"renamed": [1, 2]}, schema=pa.schema([_field("renamed", pa.int64(), 1)]))
    df = _footer(tmp_path / "a.parquet", by_id, schema)
    assert df.value_counts == {1: 2} and df.upper_bounds == {1: struct.pack("<q", 2)}
    by_name = pa.table({"name": ["q"], "extra": [1]})  # no field ids: the name decides, unknown columns go
    df = _footer(tmp_path / "b.parquet", by_name, schema)
    assert df.value_counts == {2: 1} and df.lower_bounds == {2: b"q"}
    with pytest.raises(UsageError, match=r"no column of .* matches the table schema") as e:
        _footer(tmp_path / "c.parquet", pa.table({"other": [1]}), schema)
    assert e.value.exit_code == ExitCode.USAGE


def test_a_column_matched_by_name_before_one_with_a_field_id(tmp_path: Path) -> None:
    # Found by mypy: the name match once rebound the set of repeated field ids to a bool, so the
    # next column with a field id failed with a TypeError (exit 1) instead of getting its metrics.
    schema = Schema((NestedField(1, "id", LONG), NestedField(2, "name", STRING)))
    mixed = pa.table({"name": ["q"], "renamed": [7]},
                     schema=pa.schema([pa.field("name", pa.string()), _field("renamed", pa.int64(), 1)]))
    df = _footer(tmp_path / "mixed.parquet", mixed, schema)
    assert df.value_counts == {1: 1, 2: 1}
    assert df.lower_bounds == {1: struct.pack("<q", 7), 2: b"q"}
