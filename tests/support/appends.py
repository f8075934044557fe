"""A table of N one-file fast appends, built in seconds with icectl's own writers.

What `add-files` writes N times (as benchmarks/bench_expire.py ``build_icectl``): per snapshot a
one-entry manifest and a manifest list of the new manifest followed by the parent's, a fast
append's summary, then one commit of every snapshot. Writing N growing manifest lists through the
Avro writer costs O(N^2) record encodings (27 s for 2,000); here each list row is encoded once by
the real writer (the one-row list of its own snapshot) and the lists are put together from those
bytes: an Avro container file is its header, then blocks of (row count, byte count, rows, sync
marker), and a row of the list never changes once its sequence numbers are assigned. The rows go
uncompressed in one block (the ``null`` codec, which the spec allows), so no row is ever re-encoded.
Readers (icectl, Spark) see the same lists the writer would have produced, row for row.

``step_ms`` spaces the snapshots back from now (the last one is now): a history that a retention
policy partly expires, as a streaming writer's table after days without maintenance.
"""

from __future__ import annotations

import dataclasses
import io
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest, write_manifest_list
from icectl.config import parse_config
from icectl.ops.create.table import SchemaSource, create
from icectl.ops.files.add_files import read_data_file
from icectl.spec.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.spec.updates import TableChange, TableUpdate, apply_updates, snapshot_updates
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.table.summary import SummaryBuilder

SCHEMA_DDL = "id long, payload string"
_LONG = {"type": "long"}


def _varint(n: int) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, _LONG, n)
    return out.getvalue()


def _split_one_row_list(data: bytes) -> tuple[bytes, bytes, bytes]:
    """(header through its sync marker, the one row's bytes, sync marker) of a null-codec one-row file."""
    sync = data[-16:]
    header_end = data.index(sync) + 16
    stream = io.BytesIO(data[header_end:])
    count = fastavro.schemaless_reader(stream, _LONG)  # type: ignore[call-overload]
    size = fastavro.schemaless_reader(stream, _LONG)  # type: ignore[call-overload]
    assert count == 1, count
    start = header_end + stream.tell()
    return data[:header_end], data[start:start + size], sync


def build_appends(table_dir: Path, n: int, *, step_ms: int = 0, properties: dict[str, str] | None = None,
                  data_dir: Path | None = None, relative: Iterable[int] = ()) -> None:
    """Create a v2 table at ``table_dir`` and commit ``n`` one-file appends to it (one commit).

    ``data_dir``: where the data files go (default ``<table_dir>/data``); ``relative``: the appends
    whose manifest names its file by a path relative to the table (``data/<name>``, invalid before
    v4: hostile input for the tests)."""
    relative = set(relative)
    config, fio = parse_config({}), FileIO()
    create(str(table_dir), SchemaSource(ddl=SCHEMA_DDL), config=config, io=fio, properties=properties)
    table = load_table(str(table_dir), config, fio)
    md = table.metadata
    schema, spec = md.schema(), md.spec()
    ptype = spec.partition_type(schema, md.schemas)
    data_dir, metadata_dir = data_dir or table_dir / "data", table_dir / "metadata"
    data_dir.mkdir(parents=True, exist_ok=True)
    first = data_dir / f"{0:05d}-{uuid.uuid4()}.parquet"
    pq.write_table(pa.table({"id": pa.array([0], pa.int64()), "payload": ["row"]}), first)
    parquet = first.read_bytes()
    template, partition = read_data_file(fio, str(first), schema, spec)
    now = int(time.time() * 1000)
    parent: Snapshot | None = None
    rows = b""  # the list rows of every manifest so far, newest first
    updates: list[TableUpdate] = []
    for i in range(n):
        path = first if i == 0 else data_dir / f"{i:05d}-{uuid.uuid4()}.parquet"
        if i:
            path.write_bytes(parquet)  # the same one-row file under another name: a new data file
        named = f"data/{path.name}" if i in relative else str(path)
        data_file = dataclasses.replace(template, file_path=named)
        snapshot_id = 10_000_000 + i  # fixed and increasing: easy to read in failures
        seq = md.last_sequence_number + 1
        commit_id = uuid.uuid4()
        written = write_manifest([ManifestEntry(ManifestEntryStatus.ADDED, snapshot_id, None, None, data_file)],
                                 schema=schema, spec=spec, partition_type=ptype, format_version=md.format_version,
                                 content=ManifestContent.DATA, snapshot_id=snapshot_id)
        manifest_path = str(metadata_dir / f"{commit_id}-m0.avro")
        fio.write(manifest_path, written.data)
        manifest = written.to_manifest_file(manifest_path, len(written.data), spec.spec_id, snapshot_id,
                                            UNASSIGNED_SEQ)
        own = write_manifest_list([manifest], format_version=md.format_version, snapshot_id=snapshot_id,
                                  parent_snapshot_id=parent.snapshot_id if parent else None, sequence_number=seq,
                                  codec="null")
        header, row, sync = _split_one_row_list(own.data)
        rows = row + rows
        list_path = str(metadata_dir / f"snap-{snapshot_id}-1-{commit_id}.avro")
        fio.write(list_path, header + _varint(i + 1) + _varint(len(rows)) + rows + sync)
        summary = SummaryBuilder()
        summary.added_file(data_file, partition)
        snap = Snapshot(snapshot_id=snapshot_id, timestamp_ms=now - (n - 1 - i) * step_ms,
                        parent_snapshot_id=parent.snapshot_id if parent else None, sequence_number=seq,
                        manifest_list=list_path, summary=summary.build("append", parent.summary if parent else None),
                        schema_id=md.current_schema_id)
        ups = snapshot_updates(md, snap)
        md = apply_updates(md, ups)
        updates.extend(ups)
        parent = snap
    first_uuid = table.metadata.table_uuid

    def publish(base: TableMetadata) -> TableChange:
        if base.table_uuid != first_uuid or base.snapshots:
            raise RuntimeError(f"{table_dir} changed while it was being built")
        return TableChange((), tuple(updates))

    commit(table, publish)
