"""`ListDecoder`: manifest lists that copy an earlier list's rows decode equal to a full decode,
with the copied rows taken from the earlier list; anything else is decoded whole."""

from __future__ import annotations

import dataclasses

import pytest

from icectl.codec.manifest_list_delta import ListDecoder
from icectl.codec.manifest_reader import read_manifest_list
from icectl.codec.manifest_writer import write_manifest_list
from icectl.errors import CorruptInputError
from icectl.spec.manifest import ManifestContent, ManifestFile, PartitionFieldSummary

DIR = "s3://bucket/wh/db/t/metadata/"


def mf(i: int) -> ManifestFile:
    bound = i.to_bytes(4, "little")
    return ManifestFile(f"{DIR}{i:05d}-m0.avro", 6000 + i, 0, ManifestContent.DATA, i + 1, i + 1, 100 + i, 1, 0, 0,
                        10 + i, 0, 0, (PartitionFieldSummary(False, None, bound, bound),), None, None)


def list_bytes(manifests: list[ManifestFile], version: int = 2, codec: str = "deflate") -> bytes:
    return write_manifest_list(manifests, format_version=version, snapshot_id=len(manifests), parent_snapshot_id=1,
                               sequence_number=len(manifests), first_row_id=None, codec=codec).data


def chain(n: int, version: int = 2, codec: str = "deflate") -> list[bytes]:
    """The lists of n fast appends: each one's new manifest, then its parent's rows."""
    return [list_bytes([mf(k) for k in range(i, -1, -1)], version, codec) for i in range(n)]


@pytest.mark.parametrize("codec", ["deflate", "null"])
@pytest.mark.parametrize("version", [1, 2])
def test_a_chain_of_fast_appends_equals_full_decodes_and_shares_rows(version: int, codec: str) -> None:
    lists = chain(40, version, codec)
    decoder = ListDecoder(format_version=version)
    for k, data in enumerate(lists):
        if k % 2:
            decoder.prepare(data)  # decompressed ahead, as validate's reader threads do
        got = decoder.read(data)
        full = read_manifest_list(data, format_version=version)
        assert got.manifests == full.manifests and got.metadata == full.metadata
    assert decoder.shared_rows == sum(range(40))  # every copied row came from the list before


def test_a_changed_copied_row_is_decoded_from_its_own_bytes() -> None:
    decoder = ListDecoder(format_version=2)
    parent = [mf(1), mf(0)]
    decoder.read(list_bytes(parent))
    changed = [mf(2), dataclasses.replace(mf(1), sequence_number=99), mf(0)]
    data = list_bytes(changed)
    assert decoder.read(data).manifests == read_manifest_list(data, format_version=2).manifests == changed
    assert decoder.shared_rows == 0


def test_another_schema_or_order_is_decoded_whole() -> None:
    decoder = ListDecoder(format_version=2)
    decoder.read(list_bytes([mf(0)], version=1))  # a v1-written list: another writer schema
    data = list_bytes([mf(1), mf(0)], version=2)
    assert decoder.read(data).manifests == read_manifest_list(data, format_version=2).manifests
    appended_at_end = list_bytes([mf(1), mf(0), mf(2)])  # the earlier rows are not the tail
    assert decoder.read(appended_at_end).manifests == [mf(1), mf(0), mf(2)]
    assert decoder.shared_rows == 0


def test_damage_raises_what_a_full_decode_raises() -> None:
    decoder = ListDecoder(format_version=2)
    decoder.read(list_bytes([mf(0)]))
    data = bytearray(list_bytes([mf(1), mf(0)]))
    data[-20:-16] = b"\xff\xff\xff\xff"  # inside the last block's compressed bytes
    with pytest.raises(CorruptInputError) as full:
        read_manifest_list(bytes(data), format_version=2)
    with pytest.raises(CorruptInputError) as ours:
        decoder.read(bytes(data))
    assert ours.value.message == full.value.message


def test_trailing_bytes_are_judged_by_the_full_decode() -> None:
    decoder = ListDecoder(format_version=2)
    decoder.read(list_bytes([mf(0)]))
    data = list_bytes([mf(1), mf(0)]) + b"\x00junk"
    try:
        expected: object = read_manifest_list(data, format_version=2).manifests
    except CorruptInputError as e:
        expected = e.message
    try:
        got: object = decoder.read(data).manifests
    except CorruptInputError as e:
        got = e.message
    assert got == expected
    assert decoder.shared_rows == 0
