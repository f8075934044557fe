"""The v4 codec against the layout page's statements (field ids, types, key-value metadata,
content types by level, manifest DVs as deletion-vector-v1 blobs) and round trips."""

from __future__ import annotations

import datetime
import io
import json
import struct
import zlib
from typing import Any

import fastavro
import pytest
from pyroaring import BitMap64

from icectl.codec.puffin import decode_deletion_vector
from icectl.codec.v4_proposal import (
    ContentEntry,
    ContentStats,
    ContentType,
    DeletionVectorRef,
    ManifestStats,
    VersionInfo,
    aggregate_content_stats,
    content_entry_avro_schema,
    leaf_entries,
    live_manifest_dvs,
    manifest_dv_entry,
    manifest_dv_positions,
    manifest_entry_of_manifest_file,
    manifest_file_of,
    read_v4_manifest,
    with_inherited,
    write_v4_manifest,
)
from icectl.errors import CorruptInputError
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntryStatus, ManifestFile
from icectl.spec.schema import DATE, INT, LONG, STRING, NestedField, StructType
from icectl.spec.values import to_bytes

ADDED, EXISTING, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED
# Unified partition type: spec 0 day(ts) (1000), spec 1 adds region (1001).
PTYPE = StructType((NestedField(1000, "ts_day", DATE, required=False),
                    NestedField(1001, "region", STRING, required=False)))
PTYPES = {1000: DATE, 1001: STRING}

# The layout page's table, section 3: (id, name, required, Avro type of the value).
LAYOUT = [
    (134, "content_type", True, "int"), (100, "location", True, "string"), (101, "file_format", True, "string"),
    (5, "version_info", False, "record"), (147, "deletion_vector", False, "record"),
    (148, "partition_spec_id", True, "int"), (102, "partition", False, "record"),
    (140, "sort_order_id", False, "int"), (103, "record_count", True, "long"),
    (104, "file_size_in_bytes", False, "long"), (149, "content_stats", False, "record"),
    (521, "manifest_stats", False, "record"), (143, "referenced_file", False, "string"),
    (131, "key_metadata", False, "bytes"), (132, "split_offsets", False, "array"),
    (135, "equality_ids", False, "array"), (142, "first_row_id", False, "long"),
]


def _type_name(t: Any) -> tuple[bool, str]:
    """(required, base type name) of an Avro field type."""
    if isinstance(t, list):
        assert t[0] == "null" and len(t) == 2
        return False, _type_name(t[1])[1]
    return True, t["type"] if isinstance(t, dict) else t


def _sub(schema: dict[str, Any], field_id: int) -> dict[str, Any]:
    f = next(f for f in schema["fields"] if f["field-id"] == field_id)
    t = f["type"][1] if isinstance(f["type"], list) else f["type"]
    return t


def test_content_entry_schema_is_the_layout_table() -> None:
    schema = content_entry_avro_schema(PTYPE)
    assert schema["name"] == "content_entry"
    got = [(f["field-id"], f["name"], *_type_name(f["type"])) for f in schema["fields"]]
    assert got == LAYOUT
    vi = _sub(schema, 5)
    assert [(f["field-id"], f["name"], *_type_name(f["type"])) for f in vi["fields"]] == [
        (0, "status", True, "int"), (1, "snapshot_id", False, "long"), (3, "sequence_number", False, "long"),
        (4, "file_sequence_number", False, "long")]
    dv = _sub(schema, 147)
    assert [(f["field-id"], f["name"], *_type_name(f["type"])) for f in dv["fields"]] == [
        (144, "offset", False, "long"), (145, "size_in_bytes", False, "long"),
        (146, "inline_content", False, "bytes")]
    ms = _sub(schema, 521)
    assert [(f["field-id"], f["name"], *_type_name(f["type"])) for f in ms["fields"]] == [
        (504, "added_files_count", True, "int"), (505, "existing_files_count", True, "int"),
        (506, "deleted_files_count", True, "int"), (512, "added_rows_count", True, "long"),
        (513, "existing_rows_count", True, "long"), (514, "deleted_rows_count", True, "long"),
        (516, "min_sequence_number", True, "long")]
    cs = _sub(schema, 149)
    maps = {f["field-id"]: (f["name"], [(kv["field-id"], kv["name"])
                                        for kv in _sub(cs, f["field-id"])["items"]["fields"]])
            for f in cs["fields"]}
    assert maps == {108: ("column_sizes", [(117, "key"), (118, "value")]),
                    109: ("value_counts", [(119, "key"), (120, "value")]),
                    110: ("null_value_counts", [(121, "key"), (122, "value")]),
                    137: ("nan_value_counts", [(138, "key"), (139, "value")]),
                    125: ("lower_bounds", [(126, "key"), (127, "value")]),
                    128: ("upper_bounds", [(129, "key"), (130, "value")])}
    part = _sub(schema, 102)
    assert [(f["field-id"], f["name"], _type_name(f["type"])[0]) for f in part["fields"]] == [
        (1000, "ts_day", False), (1001, "region", False)]  # every partition field optional
    assert _sub(schema, 132)["element-id"] == 133 and _sub(schema, 135)["element-id"] == 136


def _vi(status: ManifestEntryStatus = EXISTING, sid: int = 7, seq: int = 3) -> VersionInfo:
    return VersionInfo(status, sid, seq, seq)


def _leaf_ref(path: str, kind: ContentType = ContentType.DATA_MANIFEST, **kw: Any) -> ContentEntry:
    return ContentEntry(kind, path, "avro", 0, 10, _vi(), file_size_in_bytes=1234,
                        manifest_stats=ManifestStats(1, 2, 0, 4, 6, 0, 2),
                        content_stats=ContentStats(value_counts={1: 10}, lower_bounds={1: to_bytes(LONG, 5)}), **kw)


def _data(path: str, **kw: Any) -> ContentEntry:
    base: dict[str, Any] = {"partition": {1000: 19800, 1001: "eu"}, "sort_order_id": 0,
                            "split_offsets": (4,), "first_row_id": 100, "file_size_in_bytes": 99,
                            "content_stats": ContentStats(column_sizes={1: 9}, null_value_counts={1: 0})}
    base.update(kw)
    vi = base.pop("version_info", _vi(ADDED, 9, 4))
    return ContentEntry(ContentType.DATA, path, "parquet", 1, 5, vi, **base)


def _root_entries() -> list[ContentEntry]:
    return [
        _leaf_ref("/t/metadata/m1.avro", first_row_id=0),
        _leaf_ref("/t/metadata/m2.avro", ContentType.DELETE_MANIFEST),
        _data("/t/data/a.parquet"),
        ContentEntry(ContentType.POSITION_DELETE, "/t/data/d.puffin", "puffin", 1, 2, _vi(ADDED, 9, 4),
                     deletion_vector=DeletionVectorRef(4, 40), partition={1000: 19800, 1001: None},
                     file_size_in_bytes=300, referenced_file="/t/data/a.parquet"),
        ContentEntry(ContentType.EQUALITY_DELETE, "/t/data/e.parquet", "parquet", 0, 1, _vi(DELETED, 9, 4),
                     partition={1000: None}, file_size_in_bytes=30, equality_ids=(1,)),
        manifest_dv_entry("/t/metadata/m1.avro", 1234, [0, 3], snapshot_id=9, sequence_number=4),
    ]


def _raw(data: bytes) -> tuple[dict[str, str], list[dict[str, Any]]]:
    r = fastavro.reader(io.BytesIO(data))
    meta = {k: v.decode() if isinstance(v, bytes) else v for k, v in r.metadata.items()}
    return meta, list(r)


def test_root_key_value_metadata_and_round_trip() -> None:
    entries = _root_entries()
    out = write_v4_manifest(entries, content="root", partition_type=PTYPE, snapshot_id=9, sequence_number=4,
                            parent_snapshot_id=7)
    meta, _ = _raw(out.data)
    assert {k: v for k, v in meta.items() if not k.startswith("avro.")} == {
        "format-version": "4", "content": "root", "snapshot-id": "9", "sequence-number": "4",
        "parent-snapshot-id": "7"}
    back = read_v4_manifest(out.data, partition_types=PTYPES)
    assert back.content == "root"
    # The reader fills every unified partition field (null when the spec lacks it).
    norm = [e if e.partition is None else ContentEntry(**{**_asdict(e), "partition": {
        1000: e.partition.get(1000), 1001: e.partition.get(1001)}}) for e in entries]
    assert back.entries == norm


def _asdict(e: ContentEntry) -> dict[str, Any]:
    return {name: getattr(e, name) for name in ContentEntry.__dataclass_fields__}


def test_leaf_metadata_has_no_schema_or_spec() -> None:
    out = write_v4_manifest([_data("/t/a.parquet")], content="data", partition_type=PTYPE)
    meta, rows = _raw(out.data)
    assert {k: v for k, v in meta.items() if not k.startswith("avro.")} == {"format-version": "4", "content": "data"}
    assert json.loads(meta["avro.schema"])["name"] == "content_entry"
    assert rows[0]["partition"] == {"ts_day": datetime.date(2024, 3, 18), "region": "eu"}
    assert out.stats == ManifestStats(1, 0, 0, 5, 0, 0, 4)


def test_inline_manifest_dv_is_a_deletion_vector_v1_blob() -> None:
    out = write_v4_manifest(_root_entries(), content="root", partition_type=PTYPE, snapshot_id=9, sequence_number=4)
    _, rows = _raw(out.data)
    dv = next(r for r in rows if r["content_type"] == 5)
    assert dv["location"] == dv["referenced_file"] == "/t/metadata/m1.avro"
    assert dv["file_format"] == "puffin" and dv["partition"] is None and dv["manifest_stats"] is None
    blob = dv["deletion_vector"]["inline_content"]
    assert dv["deletion_vector"]["offset"] is None and dv["deletion_vector"]["size_in_bytes"] is None
    (length,) = struct.unpack(">I", blob[:4])
    assert length == len(blob) - 8 and blob[4:8] == bytes.fromhex("d1d33964")
    assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(blob[4:-4])
    assert list(decode_deletion_vector(blob)) == [0, 3] and dv["record_count"] == 2
    entry = read_v4_manifest(out.data, partition_types=PTYPES).entries[-1]
    assert list(manifest_dv_positions(entry)) == [0, 3]
    assert set(live_manifest_dvs([entry])) == {"/t/metadata/m1.avro"}


def test_puffin_manifest_dv_needs_the_blob() -> None:
    blob = manifest_dv_entry("/m.avro", 1, [5], snapshot_id=1, sequence_number=1).deletion_vector.inline_content  # type: ignore[union-attr]
    e = ContentEntry(ContentType.MANIFEST_DV, "/t/dv.puffin", "puffin", 0, 1, _vi(ADDED, 9, 4),
                     deletion_vector=DeletionVectorRef(4, len(blob or b"")), file_size_in_bytes=100,
                     referenced_file="/m.avro")
    write_v4_manifest([e], content="root", partition_type=PTYPE)  # a legal root entry
    with pytest.raises(CorruptInputError):
        manifest_dv_positions(e)
    assert list(manifest_dv_positions(e, blob)) == [5]
    bad = blob[:-1] + bytes([blob[-1] ^ 1])  # type: ignore[index]
    with pytest.raises(CorruptInputError, match="CRC"):
        manifest_dv_positions(e, bad)


@pytest.mark.parametrize("content, entry, match", [
    ("data", _leaf_ref("/m.avro"), "cannot be in a 'data'"),
    ("deletes", _data("/a.parquet"), "cannot be in a 'deletes'"),
    ("data", manifest_dv_entry("/m.avro", 1, [1], snapshot_id=1, sequence_number=1), "cannot be in"),
    ("root", ContentEntry(ContentType.DATA_MANIFEST, "/m.avro", "avro", 0, 1, _vi(), file_size_in_bytes=1),
     "manifest_stats"),
    ("root", _data("/a.parquet", content_stats=None, manifest_stats=ManifestStats(0, 0, 0, 0, 0, 0, 0)),
     "manifest_stats"),
    ("root", ContentEntry(ContentType.POSITION_DELETE, "/d.puffin", "puffin", 0, 1, _vi(), file_size_in_bytes=1,
                          referenced_file="/a"), "deletion_vector"),
    ("root", ContentEntry(ContentType.EQUALITY_DELETE, "/e.parquet", "parquet", 0, 1, _vi(),
                          file_size_in_bytes=1), "equality_ids"),
    ("root", _leaf_ref("/m.avro", partition={1000: 1}), "partition is null"),
    ("root", ContentEntry(ContentType.DATA_MANIFEST, "/m.avro", "avro", 0, 1, VersionInfo(EXISTING, 1, 2, 3),
                          file_size_in_bytes=1, manifest_stats=ManifestStats(0, 0, 0, 0, 0, 0, 0)),
     "sequence_number must equal"),
    ("root", ContentEntry(ContentType.MANIFEST_DV, "/m.avro", "puffin", 0, 3, _vi(ADDED),
                          deletion_vector=DeletionVectorRef(inline_content=manifest_dv_entry(
                              "/m.avro", 1, [1], snapshot_id=1, sequence_number=1).deletion_vector.inline_content),  # type: ignore[union-attr]
                          file_size_in_bytes=1, referenced_file="/m.avro"), "cardinality"),
    ("root", _data("/a.parquet", file_size_in_bytes=None), "file_size_in_bytes"),
])
def test_rules_by_content_type_and_level(content: str, entry: ContentEntry, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        write_v4_manifest([entry], content=content, partition_type=PTYPE)


def test_at_most_one_live_manifest_dv_per_leaf() -> None:
    a = manifest_dv_entry("/m.avro", 1, [1], snapshot_id=1, sequence_number=1)
    b = manifest_dv_entry("/m.avro", 1, [1, 2], snapshot_id=2, sequence_number=2)
    with pytest.raises(ValueError, match="more than one live manifest DV"):
        write_v4_manifest([a, b], content="root", partition_type=PTYPE)
    old = manifest_dv_entry("/m.avro", 1, [1], snapshot_id=1, sequence_number=1, status=DELETED)
    write_v4_manifest([old, b], content="root", partition_type=PTYPE)  # union replaces the old one


def test_added_root_entries_inherit_from_the_snapshot() -> None:
    e = _data("/a.parquet", version_info=VersionInfo(ADDED))
    assert with_inherited(e, 42, 8).version_info == VersionInfo(ADDED, 42, 8, 8)
    kept = _data("/b.parquet", version_info=VersionInfo(EXISTING, 1, 2, 2))
    assert with_inherited(kept, 42, 8) is kept


def test_manifest_list_row_round_trip() -> None:
    m = ManifestFile("/t/m.avro", 555, 1, ManifestContent.DATA, 5, 3, 77, 2, 1, 0, 20, 10, 0, None, b"k", 40)
    stats = ManifestStats(2, 1, 0, 20, 10, 0, 3)
    e = manifest_entry_of_manifest_file(m, status=EXISTING, manifest_stats=stats, content_stats=None)
    assert (e.content_type, e.location, e.file_size_in_bytes, e.version_info) == (
        ContentType.DATA_MANIFEST, "/t/m.avro", 555, VersionInfo(EXISTING, 77, 5, 5))
    assert manifest_file_of(e) == m.__class__(**{**{n: getattr(m, n) for n in m.__dataclass_fields__},
                                                 "partitions": None})


def test_v4_leaf_rows_inherit_from_the_root_entry() -> None:
    rows = [_data("/a.parquet", version_info=VersionInfo(ADDED), first_row_id=None),
            _data("/b.parquet", version_info=VersionInfo(EXISTING, 3, 2, 2), first_row_id=None),
            _data("/c.parquet", version_info=VersionInfo(DELETED, 3, 2, 2), first_row_id=None)]
    out = write_v4_manifest(rows, content="data", partition_type=PTYPE)
    leaf = read_v4_manifest(out.data, partition_types=PTYPES)
    m = ManifestFile("/leaf.avro", len(out.data), 1, ManifestContent.DATA, 9, 2, 55, 1, 1, 1, 5, 5, 5,
                     first_row_id=1000)
    spec1 = StructType((NestedField(1001, "region", STRING, required=False),
                        NestedField(1000, "ts_day", DATE, required=False)))
    got = leaf_entries(leaf, m, spec1)
    assert [(e.status, e.snapshot_id, e.sequence_number, e.data_file.first_row_id) for e in got] == [
        (ADDED, 55, 9, 1000), (EXISTING, 3, 2, 1005), (DELETED, 3, 2, None)]
    assert got[0].data_file.partition == ("eu", 19800)  # the spec's own order
    assert got[0].data_file.content == DataFileContent.DATA


def test_content_stats_aggregate_type_aware() -> None:
    types = {1: LONG, 2: STRING, 3: INT}
    a = ContentStats(value_counts={1: 3, 2: 3, 3: 1}, lower_bounds={1: to_bytes(LONG, -5), 2: b"b"},
                     upper_bounds={1: to_bytes(LONG, 7), 2: b"b"})
    b = ContentStats(value_counts={1: 4, 2: 1}, lower_bounds={1: to_bytes(LONG, 2), 2: b"a"},
                     upper_bounds={1: to_bytes(LONG, 300), 2: b"c"})
    out = aggregate_content_stats([a, b], types)
    assert out.value_counts == {1: 7, 2: 4}  # column 3 missing from one entry: omitted
    # -5 < 2 as longs (not as little-endian bytes); 300 > 7
    assert out.lower_bounds == {1: to_bytes(LONG, -5), 2: b"a"}
    assert out.upper_bounds == {1: to_bytes(LONG, 300), 2: b"c"}
    assert out.column_sizes is None
    dead = _data("/x", version_info=VersionInfo(DELETED, 1, 1, 1), content_stats=ContentStats(value_counts={1: 1}))
    live = _data("/y", content_stats=ContentStats(value_counts={1: 2}))
    assert aggregate_content_stats([dead, live], types).value_counts == {1: 2}


def test_not_a_v4_manifest_is_refused() -> None:
    out = write_v4_manifest([], content="data", partition_type=PTYPE)
    good = read_v4_manifest(out.data, partition_types=PTYPES)
    assert good.entries == []
    with pytest.raises(CorruptInputError):
        read_v4_manifest(b"not avro at all", partition_types=PTYPES)


def test_positions_are_ordinals_of_every_row() -> None:
    bitmap = BitMap64([0, 2])
    e = manifest_dv_entry("/m.avro", 10, bitmap, snapshot_id=1, sequence_number=1)
    assert e.record_count == 2 and e.file_size_in_bytes == 10 and e.location == e.referenced_file == "/m.avro"
