"""Property: for random partition types and values, entry statuses and inherited fields, the native
Avro decoder gives exactly the fastavro path's manifest table (issue 31)."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from icectl.codec.manifest_writer import write_manifest
from icectl.spec.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus
from icectl.spec.partitioning import PartitionField, PartitionSpec
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
    UUID,
    DecimalType,
    FixedType,
    IcebergType,
    NestedField,
    Schema,
)
from icectl.spec.transforms import parse_transform

pytest.importorskip("datafusion")

from unit.codec.test_avro_native import assert_same, fastavro_table, native_table, skip_if_stuck
from unit.codec.test_manifest_writer import data_file

_MICROS = st.integers(-62_000_000_000_000_000, 253_000_000_000_000_000)  # years 1 to 9999


def _decimal(t: DecimalType) -> st.SearchStrategy[Decimal]:
    bound = 10 ** t.precision - 1
    return st.integers(-bound, bound).map(lambda u: Decimal(u).scaleb(-t.scale))


def values_of(t: IcebergType) -> st.SearchStrategy[Any]:
    if isinstance(t, DecimalType):
        return _decimal(t)
    if isinstance(t, FixedType):
        return st.binary(min_size=t.length, max_size=t.length)
    return {
        "int": st.integers(-2**31, 2**31 - 1), "long": st.integers(-2**63, 2**63 - 1),
        "float": st.floats(width=32), "double": st.floats(), "string": st.text(max_size=8),
        "binary": st.binary(max_size=8), "boolean": st.booleans(), "date": st.integers(-700_000, 2_900_000),
        "time": st.integers(0, 86_400_000_000 - 1), "timestamp": _MICROS, "timestamptz": _MICROS,
        "timestamp_ns": st.integers(-2**62, 2**62), "uuid": st.uuids(),
    }[str(t)]


TYPES = st.one_of(
    st.sampled_from([INT, LONG, FLOAT, DOUBLE, STRING, BINARY, BOOLEAN, DATE, TIME, TIMESTAMP, TIMESTAMPTZ,
                     TIMESTAMP_NS, UUID]),
    st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: DecimalType(p, s))),
    st.integers(1, 20).map(FixedType),
)


@st.composite
def manifests(draw: st.DrawFn) -> tuple[Any, ...]:
    types = draw(st.lists(TYPES, min_size=0, max_size=4))
    version = draw(st.sampled_from([1, 2, 3]) if TIMESTAMP_NS not in types else st.just(3))
    schema = Schema(tuple(NestedField(i + 1, f"c{i}", t) for i, t in enumerate(types)), schema_id=0)
    spec = PartitionSpec(0, tuple(PartitionField((i + 1,), 1000 + i, f"p{i}", parse_transform("identity"))
                                  for i in range(len(types))))
    ptype = spec.partition_type(schema)
    row = st.tuples(*(st.none() | values_of(t) for t in types))
    rows = draw(st.lists(row, min_size=0, max_size=25))
    entries = []
    for i, values in enumerate(rows):
        status = ManifestEntryStatus(draw(st.integers(0, 2)))
        inherited = status == ManifestEntryStatus.ADDED and draw(st.booleans())
        seq = None if inherited or version == 1 else draw(st.integers(0, 50))
        entries.append(ManifestEntry(status, None if inherited else draw(st.integers(1, 2**62)), seq, seq,
                                     data_file(i, partition=values,
                                               first_row_id=draw(st.none() | st.integers(0, 10**6))
                                               if version >= 3 else None)))
    if version == 1:
        entries = [dataclasses.replace(e, sequence_number=0, file_sequence_number=0) for e in entries]
    return version, schema, spec, ptype, entries, draw(st.integers(0, 60))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(manifests())
def test_native_decoding_equals_fastavro(case: tuple[Any, ...]) -> None:
    skip_if_stuck()
    version, schema, spec, ptype, entries, seq = case
    result = write_manifest(entries, schema=schema, spec=spec, partition_type=ptype, format_version=version,
                            content=ManifestContent.DATA, snapshot_id=None)
    m = result.to_manifest_file("m.avro", len(result.data), spec.spec_id, 99, 0 if version == 1 else seq,
                                first_row_id=7 if version >= 3 else None)
    with pytest.MonkeyPatch.context() as mp:
        reference = fastavro_table(result.data, m, ptype, version, mp)
    try:
        native = native_table(result.data, m, ptype, version)
    except Exception as e:  # only the nanosecond type may be declined (its Arrow value is not checked)
        assert TIMESTAMP_NS in [f.field_type for f in schema.fields], f"declined: {type(e).__name__}: {e}"
        event("declined (timestamp_ns)")
        return
    event("native")
    assert_same(native, reference)
