"""``inspect files --json --metrics`` and ``inspect entries --json`` render the metric maps and
``readable_metrics`` from Arrow columns; their text is byte for byte the row path's.

Checked on every snapshot of the Spark fixtures (bounds of every Spark type, nested columns, a
schema that gained and renamed columns, NaN counts, position deletes and DVs without metrics) and
on an icectl table whose manifests are rewritten with hostile metrics: bounds of every Iceberg
type (NaN, infinities, -0.0, values outside datetime's range, promoted 4-byte bounds, strings JSON
must escape, non-ASCII), keys out of order and of no schema column, missing and empty maps.
"""

from __future__ import annotations

import dataclasses
import io
import random
import re
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from icectl.cli.output.render import render, to_json
from icectl.codec.manifest_reader import read_manifest
from icectl.codec.manifest_writer import write_manifest
from icectl.errors import CorruptInputError
from icectl.ops.inspect.files import PartitionMapper
from icectl.ops.inspect.metrics import JSON_ESCAPED, metric_pieces, needs_json_escaping
from icectl.ops.inspect.views import ContentFilter, entry_rows, file_rows
from icectl.results import RowsResult
from icectl.spec.manifest import DataFile, ManifestEntry, ManifestEntryStatus
from icectl.spec.schema import LONG, NestedField
from icectl.table import Table, load_table
from icectl.table.scan import iter_manifest_tables, manifests_of
from unit.ops.lifecycle.test_upgrade import icectl, parquet


def fast_and_slow(view: Any, table: Table, **kwargs: Any) -> tuple[str, str]:
    fast, slow = io.StringIO(), io.StringIO()
    result: RowsResult = view(table, **kwargs)
    assert result.json_text is not None
    render(result, as_json=True, out=fast)
    render(dataclasses.replace(view(table, **kwargs), json_text=None), as_json=True, out=slow)
    return fast.getvalue(), slow.getvalue()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ICECTL_CACHE_RACY_SECONDS", "0")
    monkeypatch.setenv("ICECTL_CACHE_MIN_MANIFEST_BYTES", "0")  # small ones too
    return tmp_path / "cache"


@pytest.mark.parametrize("kind", ["v1_unpart", "v2_part", "v3_dv", "many_snaps"])
def test_metrics_json_is_the_row_paths_text_on_every_fixture_snapshot(spark_tables, cache: Path, kind: str) -> None:
    table = load_table(str(spark_tables[kind].location))
    snapshots = [s.snapshot_id for s in table.metadata.snapshots]
    rows = bounds = 0
    for sid in snapshots[:40]:
        for content in ContentFilter:
            for _round in ("cold", "warm"):
                fast, slow = fast_and_slow(file_rows, table, snapshot_id=sid, content=content, metrics=True)
                assert fast == slow
            rows += fast.count('"readable_metrics"')
            bounds += fast.count('"lower_bound": ') - fast.count('"lower_bound": null')
        for metrics in (False, True):
            fast, slow = fast_and_slow(entry_rows, table, snapshot_id=sid, metrics=metrics)
            assert fast == slow
    assert rows > 0 and bounds > 0
    assert bulk_rendered(table) > 0


def bulk_rendered(table: Table) -> int:
    """Manifests of the current snapshot whose metrics the bulk path renders (asserting it renders
    every one it gets as a table: an equality test would also pass if all went row by row)."""
    md = table.metadata
    snap = md.current_snapshot()
    assert snap is not None
    mapper = PartitionMapper(md)
    used = 0
    for _m, got in iter_manifest_tables(md, table.io, manifests_of(md, snap, table.io)):
        if not isinstance(got, list) and got.num_rows:
            assert metric_pieces(got, mapper.columns(), lambda f, raw: mapper.bound_text(f, raw, to_json),
                                 to_json) is not None
            used += 1
    return used


# --------------------------------------------------------------------------- hostile metrics

SCHEMA = ('id long, ts timestamptz, i int, f float, d double, dt date, tm time, tsn timestamp, '
          'tsns timestamptz_ns, s string, u uuid, b binary, fx fixed[4], dec decimal(10,2), bo boolean, '
          '`we"ird é` string')
NAN32, NAN64 = struct.pack("<f", float("nan")), struct.pack("<d", float("nan"))
BOUNDS: dict[str | int, list[bytes]] = {  # column name (or a field id no schema has) -> bounds
    'id': [struct.pack("<q", v) for v in (0, -1, 2**63 - 1, -(2**63), 42)] + [struct.pack("<i", 7)],  # promoted int
    'ts': [struct.pack("<q", v) for v in (0, -1, 1_700_000_000_123_456, 253402300799999999, 253402300800000000,
                                        -62135596800000001, -62135596800000000)],
    'i': [struct.pack("<i", v) for v in (0, -(2**31), 2**31 - 1, 5)],
    'f': [struct.pack("<f", v) for v in (1.5, float("inf"), float("-inf"), -0.0, 1e-45, 3.4e38, 0.1)] + [NAN32],
    'd': [struct.pack("<d", v) for v in (0.1, 1e16, 1e-5, float("-inf"), -0.0, 5e-324, 1e308, 3.0)]
       + [NAN64, struct.pack("<f", 2.5)],  # a float bound before promotion to double
    'dt': [struct.pack("<i", v) for v in (0, -719162, 2932896, 2932897, -800000, 19_000)],
    'tm': [struct.pack("<q", v) for v in (0, 86_399_999_999, 3_600_000_001)],
    'tsn': [struct.pack("<q", v) for v in (0, -1, 1_000_000, 253402300800000000)] + [struct.pack("<i", 19_000)],
    'tsns': [struct.pack("<q", v) for v in (0, 1_700_000_000_123_456_789, -1)],
    's': [s.encode() for s in ("a", 'quo"te', "back\\slash", "tab\there", "ünï€😀", "", "\x7f", "\u2028", "z" * 40)],
    'u': [uuid.UUID(int=v).bytes for v in (0, 1, 2**128 - 1)],
    'b': [b"", b"\x00\xff", bytes(range(20))],
    'fx': [b"\x00\x01\x02\x03", b"\xff\xff\xff\xff", b"ab"],
    'dec': [(v).to_bytes(4, "big", signed=True) for v in (0, -1, 12345, -99999)],
    'bo': [b"\x00", b"\x01"],
    'we"ird é': [s.encode() for s in ("x", "new\nline", "é")],
    99: [b"\x01\x02", b""],  # a column no schema has (a dropped one)
}
# Values the bulk decoders leave to the row path's formatter (a batch holding one is decoded value
# by value): outside datetime's range, promoted, or a string JSON must escape.
WILD = {struct.pack("<q", v) for v in (253402300800000000, -62135596800000001)} | {
    struct.pack("<i", v) for v in (2932897, -800000)} | {b'quo"te', b"back\\slash", b"tab\there", b"\x7f"}


def tame(column: str | int, bounds: list[bytes]) -> list[bytes]:
    width = {"id": 8, "d": 8, "tsn": 8}.get(column)  # no promoted (shorter) bounds either
    return [b for b in bounds if b not in WILD and (width is None or len(b) == width)]


def _counts(rng: random.Random, ids: list[int]) -> dict[int, int] | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.15:
        return {}
    picked = rng.sample(ids, rng.randint(1, len(ids)))  # any order, any subset
    return {k: rng.choice([0, 1, 17, 2**62, rng.randint(0, 10**9)]) for k in picked}


def _bounds(rng: random.Random, by_id: dict[int, list[bytes]]) -> dict[int, bytes] | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.15:
        return {}
    picked = rng.sample(sorted(by_id), rng.randint(1, len(by_id)))
    return {k: rng.choice(by_id[k]) for k in picked}


def _hostile(template: DataFile, rng: random.Random, i: int, key_metadata: bool,
             by_id: dict[int, list[bytes]]) -> DataFile:
    ids = [*by_id]
    return dataclasses.replace(
        template, file_path=f"{template.file_path}-{i}", record_count=rng.randint(0, 10**6),
        column_sizes=_counts(rng, ids), value_counts=_counts(rng, ids), null_value_counts=_counts(rng, ids),
        nan_value_counts=_counts(rng, [*ids[3:5], 99]), lower_bounds=_bounds(rng, by_id),
        upper_bounds=_bounds(rng, by_id),
        key_metadata=b"\x01\x02" if key_metadata and i == 3 else None)


def hostile_table(tmp_path: Path, version: int, flavour: str = "wild") -> Path:
    """A table of 3 manifests x 300 entries with random metrics; ``flavour`` "tame": only values
    the bulk decoders take, "key_metadata": one file has key metadata (the batch goes row by row),
    "corrupt": string bounds that are not UTF-8."""
    d = tmp_path / "t"
    schema = SCHEMA if version >= 3 else SCHEMA.replace("tsns timestamptz_ns, ", "")
    icectl("create", str(d), "--schema", schema, "--partition-by", "days(ts)", "--format-version", str(version))
    for day in (1, 2, 3):
        icectl("add-files", str(d), parquet(tmp_path / f"f{day}.parquet", range(day * 10, day * 10 + 3), day))
    table = load_table(str(d))
    md = table.metadata
    snap = md.current_snapshot()
    assert snap is not None
    rng = random.Random(15)
    schema = md.schema()
    ids = {schema.column_name(fid): fid for fid in schema.field_ids()}
    by_id = {k if isinstance(k, int) else ids[k]: tame(k, v) if flavour == "tame" else v
             for k, v in BOUNDS.items() if isinstance(k, int) or k in ids}
    if flavour == "corrupt":
        by_id[ids["s"]] = [b"ok", b"\xff\xfe not UTF-8"]
    for n, m in enumerate(manifests_of(md, snap, table.io, use_cache=False)):
        ptype = md.partition_type(m.partition_spec_id)
        entries = list(read_manifest(Path(m.manifest_path).read_bytes(), manifest=m, partition_type=ptype,
                                     format_version=md.format_version))
        crafted = []
        for i in range(300):
            e = entries[i % len(entries)]
            f = _hostile(e.data_file, rng, i, n == 1 and flavour == "key_metadata", by_id)
            status = [ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED][i % 3]
            seq = None if status == ManifestEntryStatus.ADDED else m.sequence_number
            crafted.append(ManifestEntry(status, m.added_snapshot_id, seq, seq, f))
        spec = md.spec_by_id(m.partition_spec_id)
        assert spec is not None
        data = write_manifest(crafted, schema=md.schema(), spec=spec, partition_type=ptype,
                              format_version=md.format_version, content=m.content,
                              snapshot_id=m.added_snapshot_id).data
        time.sleep(0.01)
        Path(m.manifest_path).write_bytes(data)
    return d


@pytest.mark.parametrize(("version", "flavour"), [(2, "wild"), (3, "wild"), (3, "tame"), (3, "key_metadata")])
def test_hostile_metrics_render_as_the_row_path_does(tmp_path: Path, cache: Path, version: int, flavour: str) -> None:
    table = load_table(str(hostile_table(tmp_path, version, flavour)))
    for _round in ("cold", "warm"):
        for content in ContentFilter:
            fast, slow = fast_and_slow(file_rows, table, content=content, metrics=True)
            assert fast == slow
        for metrics in (False, True):
            fast, slow = fast_and_slow(entry_rows, table, metrics=metrics)
            assert fast == slow
    fast, _ = fast_and_slow(file_rows, table, metrics=True)
    shown = ['"NaN"', '"-Infinity"', "-0.0", "ünï€😀", "5e-324", '"99": "0102"', '"99": ""', '"we\\"ird é": {',
             '"lower_bounds": null', '"column_sizes": {}', '"0001-01-01T00:00:00.000000+00:00"',
             '"9999-12-31T23:59:59.999999+00:00"', '"0001-01-01"', '"9999-12-31"']
    if flavour != "tame":
        shown += ['"quo\\"te"', "253402300800000000", "2932897"]
    for text in shown:
        assert text in fast, text


@pytest.mark.parametrize("flavour", ["wild", "tame"])
def test_the_bulk_path_renders_the_hostile_manifests(tmp_path: Path, cache: Path, flavour: str) -> None:
    # The equality above would also hold if every batch fell back to the row path: check it does not.
    table = load_table(str(hostile_table(tmp_path, 3, flavour)))
    assert bulk_rendered(table) == 3


def test_a_duplicated_map_key_goes_row_by_row() -> None:
    # The row path's dict keeps one value of a key written twice; the bulk path must not render both.
    def table(pairs: list[tuple[int, int]]) -> pa.Table:
        counts = pa.array([pairs], pa.map_(pa.int32(), pa.int64()))
        bounds = pa.array([[(1, b"\x01" * 8)]], pa.map_(pa.int32(), pa.binary()))
        return pa.table({"column_sizes": counts, "value_counts": counts, "null_value_counts": counts,
                         "nan_value_counts": counts, "lower_bounds": bounds, "upper_bounds": bounds})

    columns = [(1, "id", NestedField(1, "id", LONG)), (2, "x", NestedField(2, "x", LONG))]
    assert metric_pieces(table([(2, 5), (1, 6)]), columns, lambda f, raw: "?", to_json) is not None
    assert metric_pieces(table([(1, 5), (2, 7), (1, 6)]), columns, lambda f, raw: "?", to_json) is None


def test_v4_root_entries_render_as_the_row_path_does(tmp_path: Path, cache: Path) -> None:
    # A v4 root manifest's own entries (and a manifest DV) come as entries, not an Arrow table.
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
           "--format-version", "3")
    files = [parquet(tmp_path / f"f{day}.parquet", range(day * 10, day * 10 + 3), day) for day in (1, 2, 3, 4)]
    for f in files[:2]:
        icectl("add-files", str(d), f)
    icectl("upgrade", str(d), "--to", "4", "--yes")
    for f in files[2:]:
        icectl("add-files", str(d), f)
    icectl("remove-files", str(d), files[0], files[3])
    table = load_table(str(d))
    md = table.metadata
    snap = md.current_snapshot()
    assert snap is not None
    kinds = {isinstance(got, list) for _m, got in iter_manifest_tables(md, table.io, manifests_of(md, snap, table.io))}
    assert True in kinds  # the row path's part of the fast path is used
    for metrics in (False, True):
        fast, slow = fast_and_slow(file_rows, table, metrics=metrics)
        assert fast == slow and fast.count('"file_path"') == 2
        fast, slow = fast_and_slow(entry_rows, table, metrics=metrics)
        assert fast == slow and '"status": 2' in fast


def test_a_corrupt_bound_fails_as_in_the_row_path(tmp_path: Path, cache: Path) -> None:
    table = load_table(str(hostile_table(tmp_path, 3, "corrupt")))
    errors = []
    for json_text in (True, False):
        result = file_rows(table, metrics=True)
        with pytest.raises(CorruptInputError) as e:
            render(result if json_text else dataclasses.replace(result, json_text=None), as_json=True,
                   out=io.StringIO())
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "UTF-8" in errors[0]


@pytest.mark.parametrize("arrow_type", [pa.string(), pa.large_string(), pa.string_view()])
def test_the_escaping_screen_agrees_with_the_regex_on_every_column_shape(arrow_type: pa.DataType) -> None:
    rng = random.Random(31)
    alphabet = ["a", "/", "é", "😀", " ", "\x7f", '"', "\\", "\n", "\x00", "\x1f"]
    for _ in range(300):
        values = [None if rng.random() < 0.1 else "".join(rng.choice(alphabet[:6] if rng.random() < 0.9 else alphabet)
                                                         for _ in range(rng.randrange(0, 6)))
                  for _ in range(rng.randrange(0, 12))]
        column = pa.array(values, arrow_type)
        lo = rng.randrange(0, len(values) + 1)
        for shape in (column, column.slice(lo), column.slice(0, lo),
                      pa.chunked_array([column.slice(0, lo), column.slice(lo)], arrow_type)):
            expected = any(v is not None and re.search(JSON_ESCAPED, v) for v in shape.to_pylist())
            assert needs_json_escaping(shape) == expected, shape.to_pylist()
