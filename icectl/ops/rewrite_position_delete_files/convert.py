"""`icectl rewrite-position-delete-files --convert-equality-deletes`: turn a table's equality delete
files into position deletes (v2) or deletion vectors (v3), in one ``replace`` commit.

Equality deletes cost every reader a join on each scan, and format v4 has none; Spark's
procedures cannot remove them short of rewriting the data files (Java's ``ConvertEqualityDeleteFiles``
action was never implemented). This does what the spec makes exact:

1. Scan the branch head: each live data file with the equality delete files that apply to it (the
   spec's rule: a strictly larger data sequence number, in the delete's partition or from an
   unpartitioned spec everywhere).
2. For each such data file, read only the equality columns (matched to the current schema by
   field id, or the name mapping) and find the positions of the rows the deletes match (null
   matches null, as Java's ``StructLikeSet``).
3. Write them: v2, a position delete file per data file (Spark's default ``write.delete.granularity``
   ``file``; under ``partition``, one per partition), minus positions another delete already
   holds; v3, a new deletion vector holding the file's previous deletes (its DV, or the v2 position
   delete files kept from before an upgrade) and the new positions, replacing its DV.
4. Commit one ``replace`` snapshot: the equality delete files and the replaced DVs DELETED, the new
   files ADDED. A new file's data sequence number is the largest of the deletes it stands for
   (the equality deletes', and in v3 the replaced DV's): the deletes keep the place in the table's
   history they had, and each still applies to its data file (whose number is smaller).

Rows read the same before and after at the new snapshot; older snapshots keep the equality
deletes until expire-snapshots removes them. At the commit, the data files read must still be live
and no data file an equality delete would reach may have arrived meanwhile (a rewrite that kept
an old sequence number), and in v3 no DV for them may have arrived: else exit 5 and the files
written are removed. A data file no equality delete matches gets no file; an equality delete that
applies to no data file (every row came later) is removed all the same.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pyarrow as pa
from pyroaring import BitMap64

from icectl.errors import CommitConflictError, UnsupportedError
from icectl.results import NEXT_METADATA
from icectl.spec.manifest import DataFile, DataFileContent, ManifestContent
from icectl.spec.metadata import TableMetadata
from icectl.spec.name_mapping import of_properties as name_mapping_of
from icectl.spec.snapshots import Snapshot
from icectl.table import Table
from icectl.table.commit import discard_on_failure, new_snapshot_id
from icectl.table.data_writer import data_location
from icectl.table.layout import Deletes, deleted_key
from icectl.table.layout.manifest_list import ManifestListLayout
from icectl.table.rows import DeleteReader, equality_deleted_positions
from icectl.table.scan_tasks import FileScanTask, ScanFile, assign_deletes, live_files
from icectl.table.snapshot_writer import SnapshotChange, branch_head, write_snapshot
from icectl.table.write_guard import check_writable
from icectl.threads import ordered_map

from .dvs import write_dv_file
from .files import ARROW_SCHEMA, DeleteFileWriter, granularity
from .result import ConvertedFileDoc, ConvertEqualityDeletesResult

MIN_DELETES_VERSION = 2
DV_VERSION = 3
WORKERS = 4


@dataclass
class Converted:
    """One data file's new deletes: ``positions`` to write (v3: the whole new DV), from how many
    rows the equality deletes matched anew, at which data sequence number."""

    task: FileScanTask
    positions: BitMap64
    new_rows: int
    data_sequence_number: int

    def doc(self) -> ConvertedFileDoc:
        return ConvertedFileDoc(data_file=self.task.data.file.file_path,
                                equality_delete_files=len(self.task.equality_deletes), deleted_rows=self.new_rows,
                                data_sequence_number=self.data_sequence_number,
                                replaced_dv=self.task.dv.file.file_path if self.task.dv is not None and self.new_rows
                                else None)


def _nothing(res: ConvertEqualityDeletesResult, reason: str) -> ConvertEqualityDeletesResult:
    res.title, res.reason = f"No equality deletes to convert in {res.table} on {res.branch}: {reason}", reason
    if res.dry_run:
        res.dry.plan([], [])
    return res


def convert_equality_deletes(table: Table, *, branch: str = "main", dry_run: bool = False,
                             workers: int = WORKERS) -> ConvertEqualityDeletesResult:
    """Replace the branch head's equality delete files by position deletes (v2) or deletion
    vectors (v3), as one ``replace`` commit (see the module docstring)."""
    check_writable(table)
    md = table.metadata
    if md.format_version > DV_VERSION:
        raise UnsupportedError(f"--convert-equality-deletes does not write format v{md.format_version} tables",
                               hint="it converts the equality deletes of v2 and v3 tables")
    head = branch_head(md, branch, table.identifier)
    res = ConvertEqualityDeletesResult(
        title=f"{'Would convert' if dry_run else 'Converted'} the equality deletes of {table.identifier}",
        table=table.identifier, branch=branch, dry_run=dry_run, format_version=md.format_version,
        starting_snapshot_id=head.snapshot_id if head is not None else None,
        converted_equality_delete_files_count=0, converted_equality_delete_bytes=0, data_files_count=0,
        deleted_rows_count=0, added_delete_files_count=0, removed_delete_files_count=0)
    if md.format_version < MIN_DELETES_VERSION:
        return _nothing(res, f"a format v{md.format_version} table has no delete files")
    if head is None:
        return _nothing(res, "the branch has no snapshot")
    data, deletes = live_files(md, head, table.io)
    equality = [d for d in deletes if d.file.content == DataFileContent.EQUALITY_DELETES]
    if not equality:
        return _nothing(res, "it has no equality delete files")
    tasks = [t for t in assign_deletes(md, data, deletes) if t.equality_deletes]
    reader = DeleteReader(table.io, md.schema())
    mapping = name_mapping_of(md.properties)
    to_dvs = md.format_version >= DV_VERSION

    def convert(task: FileScanTask) -> Converted:
        matched = equality_deleted_positions(table.io, task, md.schema(), reader, mapping)
        before = reader.positions(task)
        new = matched - before
        seq = max(d.data_sequence_number for d in task.equality_deletes)
        if to_dvs:
            # The spec: a data file's DV holds all its deletes; position delete files no longer apply to it.
            sources = [*([task.dv] if task.dv is not None else []), *task.position_deletes]
            seq = max([seq, *(d.data_sequence_number for d in sources)])
            return Converted(task, (before | new) if new else BitMap64(), len(new), seq)
        return Converted(task, new, len(new), seq)

    converted = [c for c in ordered_map(convert, tasks, workers=max(1, workers), wait=True)]
    changed = [c for c in converted if c.new_rows]
    replaced = [c.task.dv for c in changed if c.task.dv is not None]
    res.converted_equality_delete_files_count = len(equality)
    res.converted_equality_delete_bytes = sum(d.file.file_size_in_bytes for d in equality)
    res.data_files_count = len(tasks)
    res.deleted_rows_count = sum(c.new_rows for c in changed)
    res.removed_delete_files_count = len(equality) + len(replaced)
    res.files = [c.doc() for c in changed]
    by_file = granularity(md.properties) == "file"
    batches = _batches(changed, by_file, to_dvs)
    gone = Deletes([d.file for d in (*equality, *replaced)])
    if dry_run:
        res.added_delete_files_count = (len(changed) if to_dvs or by_file else len(batches))
        layout = ManifestListLayout(str(uuid.uuid4()), [])
        specs: dict[int, list[DataFile]] = {spec_id: [] for spec_id, _, _ in batches}
        kind = "deletion vectors" if to_dvs else "position delete files"
        res.dry.plan([*([f"{data_location(md)}/ ({res.added_delete_files_count} new {kind})"] if batches else []),
                      *layout.appended_paths(md, table.metadata_folder, specs, new_snapshot_id(md),
                                             more_manifests=layout.would_rewrite(table.io, md, head, gone)),
                      NEXT_METADATA], [])
        return res
    check = _nothing_changed_underneath(table, head, branch, (data, deletes), tasks, changed,
                                        [*equality, *replaced], to_dvs)
    return _write_and_commit(table, branch, res, batches, [*equality, *replaced], to_dvs, check)


Batch = tuple[int, tuple[object, ...], list[Converted]]  # spec id, partition, the data files' new deletes


def _batches(changed: list[Converted], by_file: bool, to_dvs: bool) -> list[Batch]:
    """What each new file holds: v2 under ``file`` granularity one data file; under ``partition``
    the data files of a partition and sequence number; v3 the DVs of a partition and sequence
    number (one Puffin file each: a manifest entry's data sequence number is per Puffin file here)."""
    out: dict[tuple[int, tuple[object, ...], int, str], list[Converted]] = {}
    for c in changed:
        spec_id, partition = c.task.data.partition_key
        one = "" if to_dvs or not by_file else c.task.data.file.file_path
        out.setdefault((spec_id, partition, c.data_sequence_number, one), []).append(c)
    return [(spec_id, partition, cs) for (spec_id, partition, _, _), cs in out.items()]


def _positions_table(cs: list[Converted]) -> pa.Table:
    paths: list[str] = []
    positions: list[int] = []
    for c in sorted(cs, key=lambda c: c.task.data.file.file_path):
        paths.extend([c.task.data.file.file_path] * len(c.positions))
        positions.extend(c.positions)
    return pa.table([pa.array(paths, pa.string()), pa.array(positions, pa.int64())], schema=ARROW_SCHEMA)


def _write_and_commit(table: Table, branch: str, res: ConvertEqualityDeletesResult, batches: list[Batch],
                      removed: list[ScanFile], to_dvs: bool,
                      check: Callable[[TableMetadata], None]) -> ConvertEqualityDeletesResult:
    md = table.metadata
    layout = ManifestListLayout(str(uuid.uuid4()), [])
    change = SnapshotChange("replace", layout, deletes=Deletes([d.file for d in removed]))
    snapshot_id = new_snapshot_id(md)
    written = change.written
    by_spec: dict[int, list[DataFile]] = {}
    sequence_numbers: dict[str, int] = {}
    with discard_on_failure(table.io, written):
        for i, (spec_id, partition, cs) in enumerate(batches, start=1):
            prefix = f"{i - 1:05d}-{i}"
            if to_dvs:
                files = write_dv_file(table.io, md, spec_id, partition, prefix,
                                      {c.task.data.file.file_path: c.positions for c in cs}, written)
            else:
                spec = md.spec_by_id(spec_id)
                assert spec is not None
                writer = DeleteFileWriter(table.io, md, spec, partition, prefix=prefix)
                try:
                    writer.write(_positions_table(cs))
                finally:
                    written.extend(writer.written)
                files = writer.files
            by_spec.setdefault(spec_id, []).extend(files)
            for f in files:
                sequence_numbers[f.file_path] = cs[0].data_sequence_number
                change.summary.added_file(f, _partition_path(md, spec_id, f))
        for d in removed:
            change.summary.removed_file(d.file, _partition_path(md, d.spec_id, d.file))
        new_files = [f for fs in by_spec.values() for f in fs]
        layout.write_appended(table.io, md, table.metadata_folder, {k: v for k, v in by_spec.items() if v},
                              snapshot_id, written, content=ManifestContent.DELETES,
                              sequence_numbers=sequence_numbers)
        done = write_snapshot(table, branch, change, snapshot_id=snapshot_id, check=check)
    res.added_delete_files_count = len(new_files)
    res.added_bytes_count = sum(f.file_size_in_bytes if not f.is_dv else f.content_size_in_bytes or 0
                                for f in new_files)
    res.snapshot_id = snapshot_id
    res.commit.record(done.metadata_location, done.attempts)
    res.title = (f"Converted {res.converted_equality_delete_files_count} equality delete files into "
                 f"{res.added_delete_files_count} {'deletion vectors' if to_dvs else 'position delete files'} "
                 f"in {table.identifier}")
    return res


def _partition_path(md: TableMetadata, spec_id: int, f: DataFile) -> str:
    spec = md.spec_by_id(spec_id)
    return spec.partition_path(f.partition or (), md.schema()) if spec is not None and f.partition else ""


def _nothing_changed_underneath(table: Table, start: Snapshot, branch: str, start_files: tuple[list[ScanFile],
                                list[ScanFile]], tasks: Iterable[FileScanTask], changed: Iterable[Converted],
                                removed: list[ScanFile], to_dvs: bool) -> Callable[[TableMetadata], None]:
    """At each commit attempt on a head other than the start: the data files read are still live
    (a rewrite that replaced one moved its rows out of reach of the new positions), no data file
    arrived with a data sequence number below a converted equality delete's (it would lose those
    deletes), and in v3 no deletion vector arrived for a data file this commit writes one for."""
    read = {t.data.file.file_path for t in tasks}
    written_for = {c.task.data.file.file_path for c in changed}
    start_data = {d.file.file_path for d in start_files[0]}
    start_dvs = {deleted_key(d.file) for d in start_files[1] if d.file.is_dv}
    newest = max((d.data_sequence_number for d in removed if d.file.content == DataFileContent.EQUALITY_DELETES),
                 default=0)

    def check(base: TableMetadata) -> None:
        head = branch_head(base, branch, table.identifier)
        if head is None or head.snapshot_id == start.snapshot_id:
            return
        data, deletes = live_files(base, head, table.io)
        live = {d.file.file_path for d in data}
        hint = "run the command again: it will convert from the new head"
        for path in sorted(read - live):
            raise CommitConflictError(f"data file {path} was removed meanwhile; its new deletes would not apply "
                                      "to the rows that replaced it", path=path, hint=hint)
        for d in data:
            if d.file.file_path not in start_data and d.data_sequence_number < newest:
                raise CommitConflictError(f"data file {d.file.file_path} arrived meanwhile with data sequence "
                                          f"number {d.data_sequence_number}, below the equality deletes converted",
                                          path=d.file.file_path, hint=hint)
        if to_dvs:
            for d in deletes:
                if (d.file.is_dv and d.file.referenced_data_file in written_for
                        and deleted_key(d.file) not in start_dvs):
                    raise CommitConflictError(f"a deletion vector for {d.file.referenced_data_file} was added "
                                              f"meanwhile ({d.file.file_path})", path=d.file.file_path, hint=hint)
    return check
