"""Live files of many manifests decoded together (codec/manifest_live): for every manifest, exactly
the reader's live (file_path, content), or None (the caller then reads it with the reader); never
anything else, whatever a batch holds (several schemas, empty manifests, damaged files)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from icectl.codec import avro_native
from icectl.codec.manifest_live import FIELDS, live_files
from icectl.codec.manifest_reader import read_manifest
from icectl.errors import IcectlError
from icectl.spec.manifest import ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import StructType

from .test_avro_native import keep_stuck, skip_if_stuck
from .test_manifest_arrow import every_type_manifest, table_files
from .test_manifest_writer import PTYPE, SPEC

pytest.importorskip("datafusion")

Item = tuple[bytes, StructType, int, ManifestFile]


def reader_live(data: bytes, m: ManifestFile, ptype: StructType, version: int) -> list[tuple[str, int]]:
    return [(e.data_file.file_path, int(e.data_file.content))
            for e in read_manifest(data, manifest=m, partition_type=ptype, format_version=version, fields=FIELDS)
            if e.is_live]


def as_rows(got: tuple | None) -> list[tuple[str, int]] | None:
    if got is None:
        return None
    paths, content = got
    return list(zip(paths.to_pylist(), content.to_pylist(), strict=True))


def fixture_items(spark_tables: dict, kinds: tuple[str, ...]) -> list[Item]:
    out: list[Item] = []
    seen: set[str] = set()
    for kind in kinds:
        for md, _p, _l, manifests in table_files(Path(spark_tables[kind].location)):
            assert isinstance(md, TableMetadata)
            for m, data in manifests:
                if m.manifest_path not in seen:
                    seen.add(m.manifest_path)
                    out.append((data, md.partition_type(m.partition_spec_id), md.format_version, m))
    return out


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    reads: list[int] = []
    real = avro_native._guarded_read

    def counted(path: str, decoded: int) -> object:
        reads.append(decoded)
        return real(path, decoded)

    monkeypatch.setattr(avro_native, "_guarded_read", counted)
    return reads


@pytest.mark.parametrize("kinds", [("v2_part",), ("v1_unpart",), ("v3_dv",), ("many_snaps",)])
def test_a_batch_of_fixture_manifests_gives_the_readers_live_files(spark_tables, kinds: tuple[str, ...],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    skip_if_stuck()
    items = fixture_items(spark_tables, kinds)
    version = items[0][2]
    reads = counting_reads(monkeypatch)
    got = live_files([d for d, *_ in items], [p for _d, p, *_ in items], version)
    for (data, ptype, v, m), found in zip(items, got, strict=True):
        assert as_rows(found) == reader_live(data, m, ptype, v), m.manifest_path  # and never None
    # One native read per distinct writer schema, however many manifests.
    assert len(items) > len(reads) >= 1 or len(items) == 1


def test_a_batch_of_mixed_versions_empty_manifests_and_every_status(monkeypatch: pytest.MonkeyPatch) -> None:
    skip_if_stuck()
    items: list[Item] = []
    for version in (2, 3):
        for count in (0, 7, 0, 30, 1):
            result = every_type_manifest(version, count)
            m = result.to_manifest_file(f"m{version}-{count}.avro", len(result.data), SPEC.spec_id, 99, 4)
            items.append((result.data, PTYPE, version, m))
    for version in (2, 3):
        batch = [it for it in items if it[2] == version]
        reads = counting_reads(monkeypatch)
        got = live_files([d for d, *_ in batch], [p for _d, p, *_ in batch], version)
        assert [as_rows(g) for g in got] == [reader_live(d, m, p, v) for d, p, v, m in batch]
        assert len(reads) == 1
        assert sum(len(g[0]) for g in got if g) == 5 + 20 + 1  # every third entry is DELETED: left out


def test_damaged_members_never_give_other_live_files(spark_tables, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch: healthy manifests and one damaged copy. A member's result is the reader's, or
    None; a damaged copy the reader refuses never yields files (the union-tag leniency aside,
    which yields the undamaged file's)."""
    monkeypatch.setattr(avro_native, "_DEADLINE_SECONDS", 3.0)
    skip_if_stuck()
    original = avro_native._stuck
    monkeypatch.setattr(avro_native, "_stuck", threading.Event())
    rng = random.Random(7)
    items = fixture_items(spark_tables, ("v2_part",))
    version = items[0][2]
    declined = 0
    for _ in range(40):
        data, ptype, _v, m = items[rng.randrange(len(items))]
        bad = bytearray(data)
        bad[rng.randrange(len(bad))] ^= 1 << rng.randrange(8)
        batch = [*items[:3], (bytes(bad), ptype, version, m)]
        got = live_files([d for d, *_ in batch], [p for _d, p, *_ in batch], version)
        if keep_stuck(original, monkeypatch):
            return
        for (d, p, v, mm), found in zip(batch, got, strict=True):
            if found is None:
                declined += 1
                continue
            try:
                want = reader_live(d, mm, p, v)
            except IcectlError as e:
                assert "IndexError: list index out of range" in str(e)  # the documented leniency
                want = reader_live(data, mm, p, v)
            assert as_rows(found) == want
    assert declined >= 4  # some flips were refused, and with them their whole batch
