"""`icectl rewrite-position-delete-files`: compact a v2 table's position delete files and drop the
dangling ones, as Spark's ``rewrite_position_delete_files`` procedure does (Iceberg 1.10
``RewritePositionDeleteFilesSparkAction``).

1. Plan (:mod:`.plan`): the branch head's live position delete files, grouped by partition and
   chosen by size as Java's ``BinPackRewritePositionDeletePlanner``.
2. Rewrite (:mod:`.files`): each group's deletes are read (``file_path``, ``pos``); a delete whose
   data file is no longer live in the snapshot with the delete's partition (Java joins with the
   ``data_files`` table of that partition) is dropped, and so is one whose data file's sequence
   number is above the delete file's (it never applied, and would with the group's larger
   number); the rest are sorted by (file_path, pos) and written as new position delete files:
   one per data file under Spark's default ``write.delete.granularity`` ``file``, rolled at the
   group's maximum output size, or files of the group's expected count under ``partition``.
3. Commit as Java's ``RewritePositionDeletesCommitManager``: one ``replace`` snapshot, the
   rewritten delete files DELETED and the new ones ADDED with the largest data sequence number of
   their group's rewritten files (``rewriteFiles.addFile(file, maxRewrittenDataSequenceNumber)``),
   their file sequence number the new snapshot's. Every rewritten file must still be live at the
   commit (Java's ``failMissingDeletePaths``), else exit 5; files written by a commit that did not
   happen are removed.

Format v1 has no delete files. In v3 deletes are deletion vectors, one per data file, and Java's
action returns an empty result unless v2 position delete files remain (kept from before an
upgrade): then its groups (those files with the DVs of their partitions) are rewritten as
deletion vectors (:mod:`.dvs`), the same commit otherwise. v4 is refused (exit 4).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from icectl.errors import CommitConflictError, UnsupportedError
from icectl.results import NEXT_METADATA
from icectl.spec.manifest import DataFile, DataFileContent, ManifestContent
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.spec.values import to_human
from icectl.table import Table
from icectl.table.commit import discard_on_failure, new_snapshot_id
from icectl.table.data_writer import data_location
from icectl.table.layout import Deletes, deleted_key
from icectl.table.layout.manifest_list import ManifestListLayout
from icectl.table.scan_tasks import ScanFile, live_files
from icectl.table.snapshot_writer import SnapshotChange, branch_head, write_snapshot
from icectl.table.write_guard import check_writable
from icectl.threads import ordered_map

from .dvs import group_positions, write_dvs
from .files import FILE_PATH, DeleteFileWriter, granularity, read_positions, sort_positions
from .plan import DeleteGroup, PositionDeleteOptions, Sizes, plan_groups, sizes_of
from .result import ConvertEqualityDeletesResult, DeleteGroupDoc, RewritePositionDeleteFilesResult

__all__ = ["ConvertEqualityDeletesResult", "PositionDeleteOptions", "RewritePositionDeleteFilesResult",
           "rewrite_position_delete_files"]

MIN_DELETES_VERSION = 2
DV_VERSION = 3
MAX_CONCURRENT_GROUPS = 5  # Spark's max-concurrent-file-group-rewrites default

LiveData = dict[tuple[int, tuple[Any, ...]], dict[str, int]]  # partition key -> data file path -> data seq


def _partition_doc(md: TableMetadata, spec_id: int, partition: tuple[Any, ...]) -> dict[str, object]:
    spec = md.spec_by_id(spec_id)
    if spec is None or spec.is_unpartitioned:
        return {}
    ptype = md.partition_type(spec)
    return {f.name: to_human(f.field_type, v) for f, v in zip(ptype.fields, partition, strict=True)}


def _partition_path(md: TableMetadata, f: ScanFile) -> str:
    spec = md.spec_by_id(f.spec_id)
    return spec.partition_path(f.file.partition or (), md.schema()) if spec is not None and f.file.partition else ""


def _kept_rows(table: Table, group: DeleteGroup, live: LiveData) -> tuple[pa.Table, int]:
    """The group's deletes whose data file is live (sorted by file_path, pos), and how many were dropped."""
    candidates = _valid(live, group)
    parts = []
    dropped = 0
    for d in group.files:
        rows = read_positions(table.io, d.file.file_path)
        valid = pa.array([p for p, seq in candidates.items() if seq <= d.data_sequence_number], pa.string())
        kept = rows.filter(pc.is_in(rows.column(FILE_PATH), value_set=valid))
        dropped += rows.num_rows - kept.num_rows
        parts.append(kept)
    return sort_positions(pa.concat_tables(parts)), dropped


def _chunks(rows: pa.Table, group: DeleteGroup, sizes: Sizes, by_file: bool) -> Iterator[pa.Table]:
    """The rows of each new file: per data file (rolled at the group's maximum output size, by the
    input's bytes per delete) or the group's expected number of files."""
    if rows.num_rows == 0:
        return
    if not by_file:
        per_file = max(1, math.ceil(rows.num_rows / group.expected_output_files))
        for start in range(0, rows.num_rows, per_file):
            yield rows.slice(start, per_file)
        return
    bytes_per_row = max(1.0, group.input_size / max(1, group.records))
    per_file = max(1, int(sizes.write_max // bytes_per_row))
    counts = pc.value_counts(rows.column(FILE_PATH).combine_chunks()).field("counts").to_pylist()
    start = 0
    for n in counts:  # rows are sorted: each data file's deletes are one run, in first-seen order
        for offset in range(0, n, per_file):
            yield rows.slice(start + offset, min(per_file, n - offset))
        start += n


def _no_new_dvs(table: Table, start: Snapshot, branch: str, added: list[DataFile],
                removed: list[DataFile]) -> Callable[[TableMetadata], None]:
    """v3: no deletion vector arrived since the start for a data file this commit writes one for
    (a data file may have one DV; the other writer's deletes would be hidden or doubled). Java's
    RewriteFiles does not check this (only RowDelta's validateAddedDVs does); icectl does."""
    refs = {f.referenced_data_file for f in added if f.is_dv}
    ours = {deleted_key(f) for f in removed}

    def check(base: TableMetadata) -> None:
        head = branch_head(base, branch, table.identifier)
        if not refs or head is None or head.snapshot_id == start.snapshot_id:
            return
        for d in live_files(base, head, table.io)[1]:
            if d.file.is_dv and d.file.referenced_data_file in refs and deleted_key(d.file) not in ours:
                raise CommitConflictError(
                    f"a deletion vector for {d.file.referenced_data_file} was added meanwhile ({d.file.file_path}), "
                    "and this rewrite writes one for it too", path=d.file.file_path,
                    hint="run rewrite-position-delete-files again: it will plan from the new head")
    return check


def _size(f: DataFile) -> int:
    """Java's ``ScanTaskUtil.contentSizeInBytes``: a deletion vector's blob, else the file."""
    return f.content_size_in_bytes if f.is_dv and f.content_size_in_bytes is not None else f.file_size_in_bytes


def _live_data(md: TableMetadata, data: list[ScanFile]) -> LiveData:
    out: LiveData = {}
    for f in data:
        out.setdefault(f.partition_key, {})[f.file.file_path] = f.data_sequence_number
    return out


def _nothing(res: RewritePositionDeleteFilesResult, reason: str) -> RewritePositionDeleteFilesResult:
    res.title, res.reason = f"Nothing to rewrite in {res.table} on {res.branch}: {reason}", reason
    if res.dry_run:
        res.dry.plan([], [])
    return res


def rewrite_position_delete_files(table: Table, options: PositionDeleteOptions, *, dry_run: bool = False,
                                  workers: int = MAX_CONCURRENT_GROUPS) -> RewritePositionDeleteFilesResult:
    """Compact the branch head's position delete files and drop dangling deletes, as one ``replace``
    commit (see the module docstring)."""
    options.check()
    check_writable(table)
    md = table.metadata
    if md.format_version > DV_VERSION:
        raise UnsupportedError(f"rewrite-position-delete-files does not write format v{md.format_version} tables",
                               hint="it rewrites the position delete files of v2 and v3 tables")
    sizes = sizes_of(options, md)
    by_file = granularity(md.properties) == "file"
    head = branch_head(md, options.branch, table.identifier)
    res = RewritePositionDeleteFilesResult(
        title=f"{'Would rewrite' if dry_run else 'Rewrote'} position delete files of {table.identifier}",
        table=table.identifier, branch=options.branch, dry_run=dry_run, format_version=md.format_version,
        starting_snapshot_id=head.snapshot_id if head is not None else None, target_file_size_bytes=sizes.target,
        delete_granularity="file" if by_file else "partition", rewritten_delete_files_count=0,
        added_delete_files_count=0, rewritten_bytes_count=0)
    if md.format_version < MIN_DELETES_VERSION:
        return _nothing(res, f"a format v{md.format_version} table has no delete files")
    if head is None:
        return _nothing(res, "the branch has no snapshot")
    data, deletes = live_files(md, head, table.io)
    positional = [d for d in deletes if d.file.content == DataFileContent.POSITION_DELETES and not d.file.is_dv]
    dvs = {d.file.referenced_data_file or "": d for d in deletes if d.file.is_dv}
    to_dvs = md.format_version >= DV_VERSION
    if to_dvs:
        if not positional:
            return _nothing(res, "its deletes are deletion vectors, one per data file (as Spark, nothing to do)")
        positional = [*positional, *dvs.values()]  # Java plans over the position_deletes table: DVs too
    groups = plan_groups(md, positional, options)
    if not groups:
        return _nothing(res, "no group of position delete files to rewrite")
    live = _live_data(md, data)
    res.rewritten_delete_files_count = sum(len(g.files) for g in groups)
    res.rewritten_bytes_count = sum(g.input_size for g in groups)

    def prepare(g: DeleteGroup) -> Prepared:
        if to_dvs:
            positions, dropped = group_positions(table.io, g, _valid(live, g), dvs)
            return Prepared(dropped, positions=positions)
        rows, dropped = _kept_rows(table, g, live)
        return Prepared(dropped, chunks=list(_chunks(rows, g, sizes, by_file)))

    if dry_run:
        for g in groups:
            res.groups.append(_group_doc(md, g, prepare(g)))
        res.added_delete_files_count = sum(doc.files_out for doc in res.groups)
        res.dangling_deletes_count = sum(doc.dangling_deletes for doc in res.groups)
        layout = ManifestListLayout(str(uuid.uuid4()), [])
        specs: dict[int, list[DataFile]] = {g.spec_id: [] for g, doc in zip(groups, res.groups, strict=True)
                                             if doc.files_out}
        kind = "deletion vectors" if to_dvs else "position delete files"
        res.dry.plan([f"{data_location(md)}/ ({res.added_delete_files_count} new {kind})",
                      *layout.appended_paths(md, table.metadata_folder, specs, new_snapshot_id(md),
                                             more_manifests=layout.would_rewrite(
                                                 table.io, md, head, Deletes([f.file for g in groups
                                                                              for f in g.files]))),
                      NEXT_METADATA], [])
        return res
    return _rewrite_and_commit(table, options, groups, res, prepare, workers)


@dataclass
class Prepared:
    """A group's deletes that still apply: rows of new position delete files (v2), or positions
    per data file for new deletion vectors (v3); ``dropped``: those that no longer apply."""

    dropped: int
    chunks: list[pa.Table] = field(default_factory=list)
    positions: dict[str, BitMap64] = field(default_factory=dict)

    @property
    def files_out(self) -> int:
        return len(self.chunks) + sum(1 for b in self.positions.values() if b)

    @property
    def records_out(self) -> int:
        return sum(c.num_rows for c in self.chunks) + sum(len(b) for b in self.positions.values())


def _valid(live: LiveData, g: DeleteGroup) -> dict[str, int]:
    return live.get((g.spec_id, g.partition), {})


def _group_doc(md: TableMetadata, g: DeleteGroup, p: Prepared) -> DeleteGroupDoc:
    return DeleteGroupDoc(index=g.index, partition=_partition_doc(md, g.spec_id, g.partition), spec_id=g.spec_id,
                          files_in=len(g.files), bytes_in=g.input_size, records_in=g.records,
                          data_sequence_number=g.data_sequence_number, dangling_deletes=p.dropped,
                          files_out=p.files_out, records_out=p.records_out)


def _rewrite_and_commit(table: Table, options: PositionDeleteOptions, groups: list[DeleteGroup],
                        res: RewritePositionDeleteFilesResult,
                        prepare: Callable[[DeleteGroup], Prepared],
                        workers: int) -> RewritePositionDeleteFilesResult:
    md = table.metadata
    layout = ManifestListLayout(str(uuid.uuid4()), [])
    removed: list[DataFile] = [f.file for g in groups for f in g.files]
    change = SnapshotChange("replace", layout, deletes=Deletes(removed))
    snapshot_id = new_snapshot_id(md)
    written = change.written

    def rewrite(g: DeleteGroup) -> tuple[list[DataFile], DeleteGroupDoc]:
        prepared = prepare(g)
        doc = _group_doc(md, g, prepared)
        if prepared.positions:
            files = write_dvs(table.io, md, g, prepared.positions, written)
        else:
            spec = md.spec_by_id(g.spec_id)
            assert spec is not None
            writer = DeleteFileWriter(table.io, md, spec, g.partition, prefix=f"{g.index - 1:05d}-{g.index}")
            try:
                for c in prepared.chunks:
                    writer.write(c)
            finally:
                written.extend(writer.written)
            files = writer.files
        doc.bytes_out = sum(_size(f) for f in files)
        return files, doc

    with discard_on_failure(table.io, written):
        outputs = list(ordered_map(rewrite, groups, workers=max(1, workers), wait=True))
        by_spec: dict[int, list[DataFile]] = {}
        sequence_numbers: dict[str, int] = {}
        for g, (files, doc) in zip(groups, outputs, strict=True):
            res.groups.append(doc)
            by_spec.setdefault(g.spec_id, []).extend(files)
            for f in g.files:
                change.summary.removed_file(f.file, _partition_path(md, f))
            for nf in files:
                sequence_numbers[nf.file_path] = g.data_sequence_number
                change.summary.added_file(nf, _partition_path(md, ScanFile(nf, g.spec_id, 0)))
        new_files = [f for fs in by_spec.values() for f in fs]
        layout.write_appended(table.io, md, table.metadata_folder, {k: v for k, v in by_spec.items() if v},
                              snapshot_id, written, content=ManifestContent.DELETES,
                              sequence_numbers=sequence_numbers)
        head = branch_head(md, options.branch, table.identifier)
        assert head is not None
        done = write_snapshot(table, options.branch, change, snapshot_id=snapshot_id,
                              check=_no_new_dvs(table, head, options.branch, new_files, removed))
    res.added_delete_files_count = len(new_files)
    res.added_bytes_count = sum(_size(f) for f in new_files)
    res.dangling_deletes_count = sum(doc.dangling_deletes for doc in res.groups)
    res.snapshot_id = snapshot_id
    res.commit.record(done.metadata_location, done.attempts)
    res.title = (f"Rewrote {res.rewritten_delete_files_count} position delete files into "
                 f"{res.added_delete_files_count} in {table.identifier}")
    return res
