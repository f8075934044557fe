"""v3: a group's position delete files and deletion vectors rewritten as deletion vectors, as
Spark's ``SparkPositionDeletesRewrite.DVWriter`` does on a table of format v3 or later (Java
rewrites the v2 position delete files a table kept from before its upgrade).

Per data file of the group: its deletion vector's positions when one applies to it (the spec: a
DV holds every delete of its data file, so position delete files are then not read for it), else
the positions the group's position delete files name for it, each only when the data file is
live in the delete's partition with a data sequence number no larger than the delete's. One
Puffin file per group, one ``deletion-vector-v1`` blob per data file (in path order), each a
manifest entry as Java's ``BaseDVFileWriter.createDV`` describes it: the Puffin path, the
partition, the file size, ``referenced_data_file``, the blob's offset and size, its cardinality as
``record_count``.
"""

from __future__ import annotations

import uuid

import pyarrow.compute as pc
from pyroaring import BitMap64

from icectl.codec.puffin import deletion_vector_blob, write_puffin
from icectl.errors import UnsupportedError
from icectl.spec.manifest import DataFile, DataFileContent
from icectl.spec.metadata import TableMetadata
from icectl.storage import FileIO, join
from icectl.table.data_writer import data_location
from icectl.table.rows import DeleteReader
from icectl.table.scan_tasks import FileScanTask, ScanFile

from .files import FILE_PATH, POS, read_positions
from .plan import DeleteGroup


def group_positions(io: FileIO, group: DeleteGroup, candidates: dict[str, int],
                    live_dvs: dict[str, ScanFile]) -> tuple[dict[str, BitMap64], int]:
    """Data file path -> the deleted positions the group holds for it, and how many deletes were
    dropped (their data file is not live, or its deletion vector already holds them)."""
    reader = DeleteReader(io)  # DVs only: no equality deletes to project
    dvs = {d.file.referenced_data_file: d for d in group.files if d.file.is_dv}
    out: dict[str, BitMap64] = {}
    dropped = 0
    for path, d in dvs.items():
        assert path is not None
        seq = candidates.get(path)
        if seq is None or seq > d.data_sequence_number:
            dropped += d.file.record_count
            continue
        out[path] = reader.positions(FileScanTask(ScanFile(d.file, d.spec_id, seq), dv=d))
    for d in group.files:
        if d.file.is_dv:
            continue
        rows = read_positions(io, d.file.file_path)
        paths = rows.column(FILE_PATH).to_pylist()
        positions = rows.column(POS).to_pylist()
        for name in pc.unique(rows.column(FILE_PATH)).to_pylist():
            seq = candidates.get(name)
            outside = live_dvs.get(name)
            if outside is not None and name not in dvs and seq is not None and seq <= outside.data_sequence_number:
                raise UnsupportedError(
                    f"data file {name} has a deletion vector ({outside.file.file_path}) outside the group of "
                    f"position delete file {d.file.file_path}", path=d.file.file_path,
                    hint="run with --rewrite-all so a data file's deletes are rewritten together")
        for name, pos in zip(paths, positions, strict=True):
            seq = candidates.get(name)
            if seq is None or seq > d.data_sequence_number or name in dvs:
                dropped += 1
                continue
            out.setdefault(name, BitMap64()).add(pos)
    return out, dropped


def write_dvs(io: FileIO, md: TableMetadata, group: DeleteGroup, positions: dict[str, BitMap64],
              written: list[str]) -> list[DataFile]:
    """One Puffin file of the group's deletion vectors; their manifest entries (no file when empty)."""
    return write_dv_file(io, md, group.spec_id, group.partition, f"{group.index - 1:05d}-{group.index}",
                         positions, written)


def write_dv_file(io: FileIO, md: TableMetadata, spec_id: int, partition: tuple[object, ...], prefix: str,
                  positions: dict[str, BitMap64], written: list[str]) -> list[DataFile]:
    """One Puffin file (named ``<prefix>-<uuid>-00001-deletes.puffin`` in the partition's data
    folder) holding a ``deletion-vector-v1`` blob per data file of ``positions`` (path order);
    their manifest entries (no file when every bitmap is empty)."""
    blobs = [(path, positions[path]) for path in sorted(positions) if positions[path]]
    if not blobs:
        return []
    spec = md.spec_by_id(spec_id)
    assert spec is not None
    folder = data_location(md)
    if not spec.is_unpartitioned:
        folder = join(folder, spec.partition_path(partition, md.schema()))
    path = join(folder, f"{prefix}-{uuid.uuid4()}-00001-deletes.puffin")
    result = write_puffin(deletion_vector_blob(p, b) for p, b in blobs)
    written.append(path)
    io.write(path, result.data)
    return [DataFile(content=DataFileContent.POSITION_DELETES, file_path=path, file_format="PUFFIN",
                     partition=partition if not spec.is_unpartitioned else (), record_count=len(bitmap),
                     file_size_in_bytes=len(result.data), referenced_data_file=p, content_offset=meta.offset,
                     content_size_in_bytes=meta.length)
            for (p, bitmap), meta in zip(blobs, result.metadata.blobs, strict=True)]
