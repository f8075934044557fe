"""`scan_manifest_list_paths`: the expire shortcut must agree with a full decode or say it cannot."""

from __future__ import annotations

import pytest

from icectl.codec.manifest_reader import read_manifest_list, scan_manifest_list_paths
from icectl.codec.manifest_writer import write_manifest_list
from icectl.spec.manifest import ManifestContent, ManifestFile, PartitionFieldSummary

DIR = "s3://bucket/wh/db/t/metadata/"


def mf(path: str, i: int, bound: bytes | None = None) -> ManifestFile:
    summary = None if bound is None else (PartitionFieldSummary(False, None, bound, bound),)
    return ManifestFile(path, 6000 + i, 0, ManifestContent.DATA, 5, 5, 7, 1, 0, 0, 10 + i, 0, 0,
                        summary or (), None, None)


def list_bytes(manifests: list[ManifestFile], version: int = 2, codec: str = "deflate") -> bytes:
    return write_manifest_list(manifests, format_version=version, snapshot_id=9, parent_snapshot_id=8,
                               sequence_number=9, first_row_id=0 if version >= 3 else None, codec=codec).data


def decoded(data: bytes, version: int = 2) -> list[str]:
    return [m.manifest_path for m in read_manifest_list(data, format_version=version)]


@pytest.mark.parametrize("version", [1, 2, 3])
@pytest.mark.parametrize("codec", ["deflate", "null"])
@pytest.mark.parametrize("count", [1, 7, 3000])  # 3000 rows: several Avro blocks
def test_equals_full_decode(version: int, codec: str, count: int) -> None:
    data = list_bytes([mf(f"{DIR}{i:05d}-m{i % 3}.avro", i) for i in range(count)], version, codec)
    assert scan_manifest_list_paths(data) == decoded(data, version)


def test_path_in_another_directory_gives_up() -> None:
    data = list_bytes([mf(f"{DIR}a-m0.avro", 0), mf("s3://bucket/elsewhere/b-m0.avro", 1)])
    assert scan_manifest_list_paths(data) is None


def test_avro_inside_a_name_gives_up() -> None:
    data = list_bytes([mf(f"{DIR}a-m0.avro", 0), mf(f"{DIR}b.avro.old-m0.avro", 1)])
    assert scan_manifest_list_paths(data) is None


def test_a_bound_that_looks_like_a_path_gives_up() -> None:
    """A partition bound holding a manifest path (length prefix and all) is a second hit in one row."""
    fake = f"{DIR}x-m0.avro".encode()
    data = list_bytes([mf(f"{DIR}a-m0.avro", 0), mf(f"{DIR}b-m0.avro", 1, bound=bytes([len(fake) * 2]) + fake)])
    assert scan_manifest_list_paths(data) is None


def test_not_avro_gives_up() -> None:
    assert scan_manifest_list_paths(b"not avro at all") is None


@pytest.mark.parametrize("count", [5, 3000])
def test_paths_of_several_lengths_equal_full_decode(count: int) -> None:
    """Names of different lengths leave the one-length search short of a hit per row: the
    general search (each hit's own length prefix) still finds them all."""
    data = list_bytes([mf(f"{DIR}{'x' * (i % 4)}{i:05d}-m{i}.avro", i) for i in range(count)])
    assert scan_manifest_list_paths(data) == decoded(data)


def test_shared_names_return_the_same_path_objects() -> None:
    names: dict[bytes, str] = {}
    first = list_bytes([mf(f"{DIR}{i:05d}-m0.avro", i) for i in range(3)])
    second = list_bytes([mf(f"{DIR}{i:05d}-m0.avro", i) for i in range(4)])
    a, b = scan_manifest_list_paths(first, names), scan_manifest_list_paths(second, names)
    assert a == decoded(first) and b == decoded(second) and len(names) == 4
    assert all(x is y for x, y in zip(a, b, strict=False))  # each path decoded once, reused
