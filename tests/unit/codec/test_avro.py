"""The shared Avro plumbing: containers written and read back, fields found by id or old name."""

from __future__ import annotations

import io
import uuid

import pytest

from icectl.codec.avro import (
    AvroSchemaBuilder,
    field_names,
    open_reader,
    read_records,
    write_avro_file,
    writer_schema,
)
from icectl.errors import CorruptInputError, UnsupportedError
from icectl.spec.schema import DOUBLE, LONG, STRING, UUID, NestedField, StructType
from icectl.spec.values import sort_key

STRUCT = StructType((NestedField(1, "id", LONG, True), NestedField(2, "name", STRING)))


def test_a_container_round_trips_with_field_ids() -> None:
    schema = AvroSchemaBuilder().record(STRUCT, "row")
    rows = [{"id": i, "name": None if i % 2 else f"n{i}"} for i in range(3000)]  # several blocks
    data = write_avro_file(schema, rows, {"k": "v"}, "deflate")
    reader = open_reader(io.BytesIO(data))
    assert reader.metadata["k"] == "v" and reader.metadata["avro.codec"] == "deflate"
    assert field_names(writer_schema(reader), {"id": 1, "name": 2}) == {"id": "id", "name": "name"}
    assert list(read_records(reader)) == rows


def test_unknown_codec_and_bad_magic() -> None:
    with pytest.raises(UnsupportedError):
        write_avro_file(AvroSchemaBuilder().record(STRUCT, "row"), [], {}, "zstd")
    with pytest.raises(CorruptInputError, match="not an Avro file"):
        open_reader(io.BytesIO(b"PAR1" + bytes(40)))


def test_field_names_fall_back_to_names_and_old_names_without_ids() -> None:
    record = {"fields": [{"name": "manifest_path"}, {"name": "added_data_files_count"}]}
    assert field_names(record, {"manifest_path": 500, "added_files_count": 504}) == {
        "manifest_path": "manifest_path", "added_files_count": "added_data_files_count"}


def test_sort_key_is_javas_comparator_order() -> None:
    assert sorted([0.0, -0.0], key=sort_key(DOUBLE)) == [-0.0, 0.0]
    hi = uuid.UUID("80000000-0000-0000-0000-000000000000")  # negative as Java's signed long
    assert sorted([uuid.UUID(int=1), hi], key=sort_key(UUID)) == [hi, uuid.UUID(int=1)]
