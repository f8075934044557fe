"""icectl's manifest writer against manifests and manifest lists that real Spark (Iceberg Java) wrote.

(a) Every manifest and manifest list of every fixture is read with icectl and written again: the
    result must read back the same, and even match Java's file record for record (same Avro
    schema, same key-value metadata, same manifest-list statistics).
(b) The strongest check: all manifests and manifest lists of a cloned table are overwritten in
    place by icectl's writer, then Spark must read every snapshot, tag and branch identically.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
from collections.abc import Iterator
from typing import Any

import fastavro
import pytest
from support.spark import metadata_table, table_rows_digest

from icectl.codec.manifest_reader import read_manifest, read_manifest_list, read_manifest_metadata
from icectl.codec.manifest_writer import ManifestWriteResult, write_manifest, write_manifest_list
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import Schema
from icectl.spec.snapshots import Snapshot
from icectl.storage import local_path
from icectl.table import Table, load_table

ALL_KINDS = ["v1_unpart", "v2_part", "v3_dv", "many_snaps"]
REWRITE_KINDS = ["v1_unpart", "v2_part", "v3_dv"]


# --------------------------------------------------------------------------- helpers


def as_written(entries: list[ManifestEntry], manifest: ManifestFile, format_version: int) -> list[ManifestEntry]:
    """Undo the reader's inheritance where Java leaves values null: the entries as Java wrote them.

    Java writes ADDED entries with null sequence numbers, and v3 ADDED data files with a null
    first_row_id (assigned from the manifest's first_row_id on read).
    """
    out = []
    next_row_id = manifest.first_row_id if format_version >= 3 and manifest.content == ManifestContent.DATA else None
    for e in entries:
        df = e.data_file
        if (e.status == ManifestEntryStatus.ADDED and format_version >= 2
                and e.sequence_number == e.file_sequence_number == manifest.sequence_number):
            e = dataclasses.replace(e, sequence_number=None, file_sequence_number=None)
        if (next_row_id is not None and df.content == DataFileContent.DATA
                and e.status != ManifestEntryStatus.DELETED and df.first_row_id == next_row_id):
            next_row_id += df.record_count
            e = dataclasses.replace(e, data_file=dataclasses.replace(df, first_row_id=None))
        out.append(e)
    return out


def raw(data: bytes) -> tuple[dict[str, Any], dict[str, str], list[dict[str, Any]]]:
    """(Avro schema, Iceberg key-value metadata, records) exactly as in the file."""
    reader = fastavro.reader(io.BytesIO(data))
    meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    return json.loads(reader.metadata["avro.schema"]), meta, list(reader)


def snapshot_lists(table: Table) -> Iterator[tuple[Snapshot, bytes, list[ManifestFile]]]:
    for snap in table.metadata.snapshots:
        assert snap.manifest_list is not None
        data = table.io.read(snap.manifest_list)
        yield snap, data, list(read_manifest_list(data, format_version=table.metadata.format_version))


def rewrite(table: Table, manifest: ManifestFile) -> tuple[bytes, list[ManifestEntry], ManifestWriteResult]:
    """Read one manifest with icectl and write it again with the writer (not stored)."""
    md: TableMetadata = table.metadata
    data = table.io.read(manifest.manifest_path)
    meta = read_manifest_metadata(data)
    ptype = md.partition_type(manifest.partition_spec_id)
    entries = list(read_manifest(data, manifest=manifest, partition_type=ptype, format_version=md.format_version))
    spec = md.spec_by_id(manifest.partition_spec_id)
    assert spec is not None
    # Keep the schema and spec JSON the manifest was written with (the table's may have moved on).
    assert PartitionSpec.from_fields_json(json.loads(meta["partition-spec"]), spec.spec_id) == spec
    result = write_manifest(
        as_written(entries, manifest, md.format_version), schema=Schema.from_json(json.loads(meta["schema"])),
        spec=spec, partition_type=ptype, format_version=int(meta["format-version"]), content=manifest.content,
        snapshot_id=manifest.added_snapshot_id)
    return data, entries, result


def manifest_file_of(result: ManifestWriteResult, m: ManifestFile, length: int) -> ManifestFile:
    return result.to_manifest_file(m.manifest_path, length, m.partition_spec_id, m.added_snapshot_id,
                                   m.sequence_number, m.first_row_id)


def write_list(table: Table, snap: Snapshot, manifests: list[ManifestFile]) -> bytes:
    result = write_manifest_list(manifests, format_version=table.metadata.format_version,
                                 snapshot_id=snap.snapshot_id, parent_snapshot_id=snap.parent_snapshot_id,
                                 sequence_number=snap.sequence_number, first_row_id=snap.first_row_id)
    if table.metadata.format_version >= 3:  # nothing left to assign: every data manifest has an id
        assert result.next_row_id == snap.first_row_id
    return result.data


# --------------------------------------------------------------------------- (a) read, write, read


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_every_manifest_roundtrips_and_matches_java(spark_tables: Any, kind: str) -> None:
    table = load_table(str(spark_tables[kind].location))
    md = table.metadata
    done: set[str] = set()
    lists = 0
    for snap, list_data, manifests in snapshot_lists(table):
        for m in manifests:
            if m.manifest_path in done:
                continue
            done.add(m.manifest_path)
            original, entries, result = rewrite(table, m)
            ptype = md.partition_type(m.partition_spec_id)
            again = list(read_manifest(result.data, manifest=m, partition_type=ptype,
                                       format_version=md.format_version))
            assert again == entries, m.manifest_path
            # Same as Java wrote: Avro schema, key-value metadata (incl. iceberg.schema), records.
            assert raw(result.data) == raw(original), m.manifest_path
            # Same manifest-list statistics as Java computed (counts, partition summaries, min seq).
            assert manifest_file_of(result, m, m.manifest_length) == m, m.manifest_path
        written = write_list(table, snap, manifests)
        assert list(read_manifest_list(written, format_version=md.format_version)) == manifests
        assert raw(written) == raw(list_data), snap.manifest_list
        lists += 1
    assert lists == len(md.snapshots) and done


# --------------------------------------------------------------------------- (b) rewrite in place


def spark_view(spark: Any, name: str, md: TableMetadata) -> dict[str, Any]:
    """Everything Spark shows of the table: rows of every snapshot and ref, and metadata tables."""
    view: dict[str, Any] = {"current": table_rows_digest(spark, name)}
    for snap in md.snapshots:
        view[f"snapshot {snap.snapshot_id}"] = table_rows_digest(spark, f"{name} VERSION AS OF {snap.snapshot_id}")
    for ref in md.refs:
        view[f"ref {ref}"] = table_rows_digest(spark, f"{name} VERSION AS OF '{ref}'")
    for kind in ("files", "entries", "all_entries", "all_files"):
        view[kind] = sorted(json.dumps(r, sort_keys=True, default=str) for r in metadata_table(spark, name, kind))
    view["all_manifests"] = sorted(
        json.dumps({k: v for k, v in r.items() if k != "length"}, sort_keys=True, default=str)
        for r in metadata_table(spark, name, "all_manifests"))
    return view


def overwrite(table: Table, path: str, data: bytes) -> None:
    table.io.write(path, data)
    # Hadoop's local file system keeps a ".<name>.crc" checksum beside each file and would reject
    # the new content; without the side file it reads unchecked (object stores have none).
    crc = os.path.join(os.path.dirname(local_path(path)), f".{os.path.basename(local_path(path))}.crc")
    if os.path.exists(crc):
        os.remove(crc)


@pytest.mark.parametrize("kind", REWRITE_KINDS)
def test_spark_reads_tables_rewritten_in_place(spark: Any, spark_clone: Any, kind: str) -> None:
    clone = spark_clone(kind)
    table = load_table(str(clone.location))
    md = table.metadata
    if kind == "v2_part":
        assert {"after_merge", "dev"} <= set(md.refs)
    assert len(md.snapshots) > 1
    before = spark_view(spark, clone.name, md)
    icectl_before = {s.snapshot_id: ml for s, _, ml in snapshot_lists(table)}

    # Every manifest once (they are shared between snapshots), then every manifest list.
    lengths: dict[str, int] = {}
    for _snap, _data, manifests in snapshot_lists(table):
        for m in manifests:
            if m.manifest_path not in lengths:
                original, _, result = rewrite(table, m)
                assert result.data != original  # a new file (at least its sync marker differs)
                overwrite(table, m.manifest_path, result.data)
                lengths[m.manifest_path] = table.io.size(m.manifest_path)
                assert lengths[m.manifest_path] == len(result.data)
    for snap, _data, manifests in snapshot_lists(table):
        updated = [dataclasses.replace(m, manifest_length=lengths[m.manifest_path]) for m in manifests]
        assert snap.manifest_list is not None
        overwrite(table, snap.manifest_list, write_list(table, snap, updated))

    reloaded = load_table(str(clone.location))
    assert reloaded.metadata == md  # the metadata JSON still points at the same manifest lists
    after_lists = {s.snapshot_id: ml for s, _, ml in snapshot_lists(reloaded)}
    assert after_lists == {sid: [dataclasses.replace(m, manifest_length=lengths[m.manifest_path]) for m in ml]
                           for sid, ml in icectl_before.items()}
    after = spark_view(spark, clone.name, md)
    assert after.keys() == before.keys()
    for key in before:
        assert after[key] == before[key], key
    assert before["current"][0] > 0
