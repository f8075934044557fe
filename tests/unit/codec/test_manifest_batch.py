"""icectl.codec.manifest_batch: many manifests decoded in one native read give, manifest by
manifest, the very table ``manifest_table`` gives of each alone; and the ``partitions`` view's
column fold (ops/inspect/distributed.fold_partition_tables) equals the entry-by-entry fold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.fixtures import FIXTURE_KINDS

from icectl.codec.avro import container_header
from icectl.codec.avro_native import native_enabled
from icectl.codec.manifest_arrow import manifest_table
from icectl.codec.manifest_batch import manifest_tables
from icectl.codec.manifest_writer import write_manifest
from icectl.ops.create.metadata import new_table_metadata
from icectl.ops.inspect.distributed import fold_partition_tables, fold_partitions
from icectl.ops.inspect.files import PartitionMapper
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import TableMetadata

from .test_manifest_arrow import table_files
from .test_manifest_writer import PTYPE, SCHEMA, SPEC, data_file


@pytest.fixture(autouse=True)
def native_on() -> None:
    # Checked when each test runs: a damaged-file read that hung DataFusion turns it off for the
    # rest of the process (icectl.codec.avro_native), and these tests are the native path's.
    if not native_enabled():
        pytest.skip("native decoding is off in this process")


pytestmark = pytest.mark.skipif(not native_enabled(), reason="the batch decode is the native decoder's")


def _groups(md: TableMetadata, manifests: list[tuple[ManifestFile, bytes]]) -> list[list[tuple[ManifestFile, bytes]]]:
    out: dict[tuple[bytes, int], list[tuple[ManifestFile, bytes]]] = {}
    for m, data in manifests:
        end = container_header(data)[0]
        out.setdefault((data[:end - 16], m.partition_spec_id), []).append((m, data))
    return list(out.values())


def _alone(md: TableMetadata, m: ManifestFile, data: bytes) -> Any:
    return manifest_table(data, manifest=m, partition_type=md.partition_type(m.partition_spec_id),
                          format_version=md.format_version)


@pytest.mark.parametrize("kind", FIXTURE_KINDS)
def test_every_fixture_manifest_batched_equals_alone(kind: str, spark_tables: Any) -> None:
    batched = 0
    for md, _list, _data, manifests in table_files(Path(spark_tables[kind].location)):
        for group in _groups(md, manifests):
            ms, datas = [m for m, _ in group], [d for _, d in group]
            tables = manifest_tables(datas, ms, md.partition_type(ms[0].partition_spec_id), md.format_version)
            for m, data, table in zip(ms, datas, tables, strict=True):
                assert table.equals(_alone(md, m, data), check_metadata=True), m.manifest_path
                batched += 1
    assert batched


def _manifest(version: int, snapshot_id: int | None, seq: int | None, first_row_id: int | None,
              files: list[tuple[int, int, int | None]]) -> tuple[ManifestFile, bytes]:
    """A synthetic manifest: (file number, status, written sequence number) per entry."""
    # the writer refuses EXISTING and DELETED entries without a sequence number (v2+)
    seqs = [(written if written is not None or status == 1 else 3) if version >= 2 else None
            for _i, status, written in files]
    entries = [ManifestEntry(ManifestEntryStatus(status), None if status == 1 else 7, w, w,
                             data_file(i, first_row_id=(None if i % 3 else 1000 + i) if version >= 3 else None))
               for (i, status, _written), w in zip(files, seqs, strict=True)]
    result = write_manifest(entries, schema=SCHEMA, spec=SPEC, partition_type=PTYPE, format_version=version,
                            content=ManifestContent.DATA, snapshot_id=snapshot_id)
    m = ManifestFile(f"s3://b/t/metadata/m{len(files)}-{seq}.avro", len(result.data), SPEC.spec_id,
                     ManifestContent.DATA, seq, seq, snapshot_id,  # type: ignore[arg-type]  # None: unassigned
                     first_row_id=first_row_id)
    return m, result.data


_files = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2), st.one_of(st.none(), st.integers(0, 9))),
                  max_size=12)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(version=st.sampled_from([1, 2, 3]),
       manifests=st.lists(st.tuples(st.one_of(st.none(), st.integers(1, 5)), st.one_of(st.none(), st.integers(0, 9)),
                                    st.one_of(st.none(), st.integers(0, 10**6)), _files), min_size=1, max_size=5))
def test_random_manifests_batched_equal_alone(version: int, manifests: list[Any]) -> None:
    made = [_manifest(version, snap, seq, first, files) for snap, seq, first, files in manifests]
    ms, datas = [m for m, _ in made], [d for _, d in made]
    try:
        tables = manifest_tables(datas, ms, PTYPE, version)
    except Exception:  # allowed: the caller then reads each alone
        return
    for m, data, table in zip(ms, datas, tables, strict=True):
        alone = manifest_table(data, manifest=m, partition_type=PTYPE, format_version=version)
        assert table.equals(alone, check_metadata=True)


def _metadata(version: int) -> TableMetadata:
    return new_table_metadata(schema=SCHEMA, location="s3://b/t", partition_spec=SPEC, sort_order=None,
                              properties={}, format_version=version, fresh_ids=False)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2), st.sampled_from(list(DataFileContent))),
                      min_size=1, max_size=30))
def test_partitions_fold_over_columns_equals_the_entry_fold(files: list[tuple[int, int, DataFileContent]]) -> None:
    """Partition values include -0.0 and 0.0 (equal in Python, two encodings), NaN and nulls."""
    md = _metadata(2)
    spec_id = md.default_spec_id
    ptype = md.partition_type(spec_id)
    made = []
    for content in (ManifestContent.DATA, ManifestContent.DELETES):
        entries = [ManifestEntry(ManifestEntryStatus(status), 7, 1, 1, data_file(i, content=c))
                   for i, status, c in files if (c == DataFileContent.DATA) == (content == ManifestContent.DATA)]
        result = write_manifest(entries, schema=md.schema(), spec=md.spec_by_id(spec_id), partition_type=ptype,
                                format_version=2, content=content, snapshot_id=7)
        m = ManifestFile(f"s3://b/t/metadata/m{int(content)}.avro", len(result.data), spec_id, content, 1, 1, 7)
        made.append((m, entries, manifest_table(result.data, manifest=m, partition_type=ptype, format_version=2)))
    by_entry: dict[tuple[Any, ...], dict[str, Any]] = {}
    by_column: dict[tuple[Any, ...], dict[str, Any]] = {}
    one, other = PartitionMapper(md), PartitionMapper(md)
    for _round in range(2):
        for m, entries, _table in made:
            fold_partitions(by_entry, one, {}, ((m, e) for e in entries if e.is_live))
    fold_partition_tables(by_column, other, {}, [(m, t) for m, _e, t in made] * 2)
    assert list(by_column.items()) == list(by_entry.items()) or repr(list(by_column.items())) == repr(
        list(by_entry.items()))  # NaN partitions: equal text, unequal values
