"""The Arrow form of manifests and manifest lists gives back exactly what the Avro readers give.

Every Avro manifest and manifest list of the Spark fixtures (v1, v2, v3, deletes, DVs, partition
evolution, every partition type) is decoded both ways and compared, with every field and with
field subsets; damaged files must fail the same way (or fall back: ``NotArrowRepresentable``).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from icectl.codec.manifest_arrow import (
    NotArrowRepresentable,
    entries_from_table,
    manifest_table,
)
from icectl.codec.manifest_list_arrow import manifest_files_from_table, manifest_list_table
from icectl.codec.manifest_reader import read_manifest, read_manifest_list
from icectl.codec.manifest_writer import ManifestWriteResult, write_manifest
from icectl.errors import IcectlError
from icectl.spec.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.spec.schema import StructType

from .test_manifest_writer import PTYPE, SCHEMA, SPEC, data_file

UNION_TAG_LENIENCY = "IndexError: list index out of range"  # fastavro's words for an out-of-range union tag
SUBSETS = (None, {"file_path"}, {"partition", "record_count"}, {"lower_bounds", "split_offsets", "key_metadata"})


def _local(path: str) -> Path:
    return Path(path.removeprefix("file:"))


def table_files(table_dir: Path) -> Iterator[tuple[TableMetadata, str, bytes, list[tuple[ManifestFile, bytes]]]]:
    """(metadata, list path, list bytes, [(manifest, manifest bytes)]) for every snapshot with an
    Avro manifest list in the table's newest metadata file."""
    newest = max((table_dir / "metadata").glob("*.metadata.json"), key=lambda p: p.stat().st_mtime_ns)
    md = parse_table_metadata(newest.read_bytes())
    for snap in md.snapshots:
        if not snap.manifest_list or not _local(snap.manifest_list).exists():
            continue
        data = _local(snap.manifest_list).read_bytes()
        manifests = [(m, _local(m.manifest_path).read_bytes())
                     for m in read_manifest_list(data, format_version=md.format_version)
                     if _local(m.manifest_path).exists()]
        yield md, snap.manifest_list, data, manifests


def check_list(data: bytes, format_version: int) -> None:
    expected = read_manifest_list(data, format_version=format_version)
    got = manifest_files_from_table(manifest_list_table(data, format_version=format_version))
    assert got.manifests == expected.manifests
    assert got.metadata == expected.metadata


def check_manifest(data: bytes, m: ManifestFile, ptype: StructType, format_version: int) -> int:
    table = manifest_table(data, manifest=m, partition_type=ptype, format_version=format_version)
    # The cache stores tables as IPC/Parquet: check the form survives it.
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    table = pa.ipc.open_file(sink.getvalue()).read_all()
    for fields in SUBSETS:
        expected = list(read_manifest(data, manifest=m, partition_type=ptype, format_version=format_version,
                                      fields=fields))
        assert entries_from_table(table, manifest=m, partition_type=ptype, fields=fields) == expected
    return table.num_rows


def check_table_dir(table_dir: Path) -> tuple[int, int]:
    lists = entries = 0
    seen: set[str] = set()
    for md, _path, data, manifests in table_files(table_dir):
        check_list(data, md.format_version)
        lists += 1
        for m, raw in manifests:
            if m.manifest_path in seen:
                continue
            seen.add(m.manifest_path)
            entries += check_manifest(raw, m, md.partition_type(m.partition_spec_id), md.format_version)
    return lists, entries


def same_failure(read_ref: object, read_arrow: object) -> None:
    """The Arrow path fails exactly when the reader does, with the same message; or it falls back."""
    try:
        expected = read_ref()  # type: ignore[operator]
    except IcectlError as e:
        if UNION_TAG_LENIENCY in e.message:
            # The native reader's one documented leniency (README, "Manifest decoding"): a union
            # tag damaged out of range reads as the value it tags. Fails as the reader, or decodes.
            try:
                read_arrow()  # type: ignore[operator]
            except IcectlError as got_error:
                assert got_error.message == e.message
            return
        with pytest.raises(type(e)) as got:
            read_arrow()  # type: ignore[operator]
        assert got.value.message == e.message
        return
    try:
        got_value = read_arrow()  # type: ignore[operator]
    except NotArrowRepresentable:
        return
    assert got_value == expected


@pytest.mark.parametrize("kind", ["v1_unpart", "v2_part", "v3_dv", "many_snaps"])
def test_every_fixture_manifest_round_trips(spark_tables, kind: str) -> None:
    lists, entries = check_table_dir(Path(spark_tables[kind].location))
    assert lists > 0 and entries > 0


def test_damaged_manifests_fail_like_the_reader(spark_tables) -> None:
    rng = random.Random(15)
    md, _p, list_data, manifests = next(t for t in table_files(Path(spark_tables["v2_part"].location))
                                        if t[3])
    m, data = manifests[0]
    ptype = md.partition_type(m.partition_spec_id)
    cuts = [b"", data[:3], data[:40], data[: len(data) // 2], data[:-1], data[:-17]]
    flips = []
    for _ in range(60):
        b = bytearray(data)
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
        flips.append(bytes(b))
    for bad in cuts + flips:
        same_failure(lambda bad=bad: list(read_manifest(bad, manifest=m, partition_type=ptype,
                                                        format_version=md.format_version)),
                     lambda bad=bad: entries_from_table(
                         manifest_table(bad, manifest=m, partition_type=ptype, format_version=md.format_version),
                         manifest=m, partition_type=ptype))
    for bad in [list_data[:20], list_data[:-1], *(bytes(b) for b in _flips(list_data, rng, 40))]:
        same_failure(lambda bad=bad: read_manifest_list(bad, format_version=md.format_version).manifests,
                     lambda bad=bad: manifest_files_from_table(
                         manifest_list_table(bad, format_version=md.format_version)).manifests)


def _flips(data: bytes, rng: random.Random, n: int) -> Iterator[bytearray]:
    for _ in range(n):
        b = bytearray(data)
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
        yield b


def every_type_manifest(version: int, count: int) -> ManifestWriteResult:
    """A data manifest by icectl's writer with every partition type (decimal scale, uuid, fixed,
    binary, -0.0, NaN, time, timestamps, nulls), every status, inherited and written snapshot ids
    and sequence numbers, first_row_id given and not."""
    entries = [ManifestEntry(ManifestEntryStatus(i % 3), None if i % 3 == 1 else 7, None if i % 3 == 1 else i,
                             None if i % 3 == 1 else i, data_file(i, first_row_id=None if i % 2 else 5 * i))
               for i in range(count)]
    if version == 1:
        entries = [dataclasses.replace(e, sequence_number=0, file_sequence_number=0) for e in entries]
    return write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=version,
                          content=ManifestContent.DATA, snapshot_id=None)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_partition_type_round_trips(version: int) -> None:
    result = every_type_manifest(version, 24)
    m = result.to_manifest_file("m.avro", len(result.data), SPEC.spec_id, 99, 0 if version == 1 else 4,
                                first_row_id=1000 if version >= 3 else None)
    table = manifest_table(result.data, manifest=m, partition_type=PTYPE, format_version=version)
    expected = list(read_manifest(result.data, manifest=m, partition_type=PTYPE, format_version=version))
    got = entries_from_table(table, manifest=m, partition_type=PTYPE)
    assert [repr(e) for e in got] == [repr(e) for e in expected]  # repr: NaN != NaN, -0.0 == 0.0
    assert any(e.data_file.first_row_id for e in got) == (version >= 3)
