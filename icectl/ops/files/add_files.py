"""`icectl add-files`: register existing Parquet files in a table as one `append` snapshot.

Metrics come from each file's footer (:mod:`icectl.codec.parquet_metrics`); partition values from
the file's rows through the table's transforms. A file whose rows fall in more than one
partition is refused, as is a file the table already has.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icectl.codec.parquet_metrics import data_file_from_footer, field_ids_of
from icectl.errors import (
    CommitConflictError,
    CorruptInputError,
    IcectlError,
    NotFoundError,
    RefusedError,
    UsageError,
)
from icectl.results import FLAT, NEXT_METADATA, UNSET, CommandResult, Committed, DryRun, Part, Unset, json_key
from icectl.spec.manifest import DataFile, ManifestContent
from icectl.spec.metadata import TableMetadata
from icectl.spec.name_mapping import ensure_name_mapping
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.properties import DEFAULT_NAME_MAPPING
from icectl.spec.schema import (
    DATE,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    TIMESTAMPTZ_NS,
    IcebergType,
    Schema,
)
from icectl.spec.snapshots import MAIN_BRANCH, Snapshot
from icectl.spec.tracked_file import FORMAT_VERSION as V4
from icectl.spec.updates import SetProperties, TableUpdate
from icectl.storage import FileIO, basename, file_key, scheme_of
from icectl.table import Table
from icectl.table.commit import discard_on_failure, new_snapshot_id
from icectl.table.layout import SnapshotLayout
from icectl.table.layout.manifest_list import ManifestListLayout
from icectl.table.layout.root import RootLayout, appends_to_leaf
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.snapshot_writer import SnapshotChange, branch_head, write_snapshot
from icectl.table.write_guard import check_writable
from icectl.threads import ordered_map


@dataclass
class AddedFile(Part):
    file_path: str
    partition: Any  # the partition tuple as the plan shows it
    record_count: int


@dataclass
class CreatedBranch(Part):
    """The branch add-files creates (``--create-branch``), starting at main's head."""

    name: str
    from_ref: str = field(metadata=json_key("from"))
    from_snapshot_id: int | None


@dataclass(kw_only=True)
class AddFilesResult(CommandResult):
    """``icectl add-files``."""

    view: ClassVar[str] = "add_files"

    table: str
    dry_run: bool
    branch: str
    spec_id: int
    added_data_files: int
    added_records: int
    added_files_size: int
    files: list[AddedFile]
    created_branch: CreatedBranch | Unset = UNSET
    name_mapping: str  # created, extended, unchanged (a dry run: "would be ...")
    layout: str | Unset = UNSET  # v4: "root" or "new leaf"
    dry: DryRun[list[str], list[str]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    snapshot_id: int | Unset = UNSET  # committed from here on
    commit: Committed = field(default_factory=Committed, metadata=FLAT)
    written: list[str] | Unset = UNSET  # v4: the leaf (if any) and the root




@dataclass
class AddFilesPlan:
    table: str
    spec_id: int
    files: list[DataFile]
    partitions: list[str] = field(default_factory=list)  # partition path of each file


def expand_paths(io: FileIO, paths: Iterable[str]) -> list[str]:
    """Files as given, and every visible ``*.parquet`` below a directory, as absolute locations."""
    out: list[str] = []
    for p in paths:
        loc = os.path.abspath(os.path.expanduser(p)) if scheme_of(p) == "file" and "://" not in p else p
        if io.is_dir(loc):
            fs, native = io.filesystem(loc)
            found = sorted(str(f) for f in fs.find(native) if str(f).endswith(".parquet"))
            # Hidden files (.crc, _SUCCESS) are engine bookkeeping, never data.
            found = [f for f in found if not basename(f).startswith((".", "_"))]
            prefix = loc.split("://", 1)[0] + "://" if "://" in loc else ""
            out.extend(prefix + f if prefix and not f.startswith(prefix) else f for f in found)
        elif io.exists(loc):
            out.append(loc)
        else:
            raise NotFoundError(f"file not found: {p}", path=p)
    if not out:
        raise UsageError("no Parquet files to add")
    dupes = {p for p in out if out.count(p) > 1}
    if dupes:
        raise UsageError(f"file given twice: {sorted(dupes)[0]}")
    return out


def _internal_column(arr: pa.ChunkedArray, t: IcebergType) -> list[Any]:
    """Distinct values of a column in the spec's internal representation (ints for time types)."""
    arr = pc.unique(arr)
    if t in (TIMESTAMP, TIMESTAMPTZ, TIMESTAMP_NS, TIMESTAMPTZ_NS):
        unit = "ns" if t in (TIMESTAMP_NS, TIMESTAMPTZ_NS) else "us"
        return pc.cast(pc.cast(arr, pa.timestamp(unit)), pa.int64()).to_pylist()
    if t == DATE:
        return pc.cast(arr, pa.int32()).to_pylist()
    if t == TIME:
        return pc.cast(pc.cast(arr, pa.time64("us")), pa.int64()).to_pylist()
    return arr.to_pylist()


def partition_of(path: str, pfile: pq.ParquetFile, schema: Schema, spec: PartitionSpec) -> tuple[Any, ...]:
    """The one partition tuple of all rows of a file; refuse a file spanning partitions."""
    if spec.is_unpartitioned:
        return ()
    ids = field_ids_of(pfile.schema_arrow)
    by_id = {fid: p for p, fid in ids.items()}
    values: list[Any] = []
    for pf in spec.fields:
        if pf.transform.is_void:
            values.append(None)
            continue
        if len(pf.source_ids) != 1:
            raise UsageError(f"partition field {pf.name} has a multi-argument transform; not supported by add-files")
        src = schema.find_field(pf.source_id)
        if src is None:
            raise CorruptInputError(f"partition source field {pf.source_id} is not in the table schema")
        column = by_id.get(pf.source_id) or schema.column_name(pf.source_id)
        try:
            read = pfile.read(columns=[column])
        except (KeyError, pa.ArrowInvalid) as e:
            read = None
            cause: BaseException | None = e
        else:
            cause = None
        if read is None or read.num_columns == 0:  # pyarrow returns no column for an unknown name
            raise UsageError(f"{path} has no column {column} needed for partition field {pf.name}",
                             path=path, hint="add files whose columns match the table schema") from cause
        col = read.column(0)
        distinct = {pf.transform.apply(v, src.field_type) if v is not None else None
                    for v in _internal_column(col, src.field_type)}
        if len(distinct) > 1:
            shown = sorted(pf.transform.to_human_string(v) for v in list(distinct)[:3])
            raise RefusedError(f"{path} spans several partitions of {pf.name} ({', '.join(shown)}, ...)",
                               path=path, hint="split the file by partition before adding it")
        values.append(next(iter(distinct)) if distinct else None)
    return tuple(values)


def read_data_file(io: FileIO, path: str, schema: Schema, spec: PartitionSpec) -> tuple[DataFile, str]:
    size = io.size(path)
    try:
        with io.open(path) as f:
            pfile = pq.ParquetFile(f)
            partition = partition_of(path, pfile, schema, spec)
            df = data_file_from_footer(path, size, pfile.metadata, schema, partition)
    except IcectlError:
        raise
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptInputError(f"not a readable Parquet file: {path}: {e}", path=path) from None
    return df, spec.partition_path(partition, schema) if partition else ""


def plan_add_files(table: Table, paths: Iterable[str], branch: str = "main", *,
                   create_branch: bool = False) -> AddFilesPlan:
    md = table.metadata
    schema, spec = md.schema(), md.spec()
    head = branch_head(md, branch, table.identifier, create_branch=create_branch)  # before reading any file
    files = expand_paths(table.io, paths)
    read = list(ordered_map(lambda p: read_data_file(table.io, p, schema, spec), files))
    existing = _existing_paths(table, md, files, head)
    if existing:
        raise RefusedError(f"{existing[0]} is already in table {table.identifier}",
                           path=existing[0], hint="adding it twice would duplicate its rows")
    return AddFilesPlan(table.identifier, spec.spec_id, [d for d, _ in read], [p for _, p in read])


def _existing_paths(table: Table, md: TableMetadata, paths: list[str], snap: Snapshot | None) -> list[str]:
    """Which of ``paths`` the head the new snapshot goes on (not always main's) already has."""
    if snap is None:
        return []
    # By location, not text: /x and file:///x are the same file and must not be added twice.
    wanted = {file_key(p): p for p in paths}
    manifests = [m for m in manifests_of(md, snap, table.io) if m.content == ManifestContent.DATA]
    live = {file_key(e.data_file.file_path)
            for _, e in iter_entries(md, table.io, manifests, fields={"file_path"}, live_only=True)}
    return sorted(wanted[k] for k in live & wanted.keys())


def add_files(table: Table, paths: Iterable[str], *, branch: str = "main", create_branch: bool = False,
              dry_run: bool = False) -> AddFilesResult:
    """Register Parquet files as one ``append`` snapshot on ``branch`` (committed with retries).

    ``branch`` must exist (or be main) unless ``create_branch``: then a missing branch starts at
    main's head. The table gets the name mapping Spark's ``add_files`` sets, in the same commit:
    files without field ids are then read by column name, not by position.
    """
    check_writable(table)
    plan = plan_add_files(table, paths, branch, create_branch=create_branch)
    new_branch = table.metadata.ref(branch) is None and branch != MAIN_BRANCH
    main_head = table.metadata.snapshot_for_ref(MAIN_BRANCH)
    outcome = ensure_name_mapping(table.metadata)[1]
    res = AddFilesResult(
        title=f"{'Would add' if dry_run else 'Added'} {len(plan.files)} files to {table.identifier}",
        table=table.identifier, dry_run=dry_run, branch=branch, spec_id=plan.spec_id,
        added_data_files=len(plan.files), added_records=sum(f.record_count for f in plan.files),
        added_files_size=sum(f.file_size_in_bytes for f in plan.files),
        files=[AddedFile(f.file_path, p, f.record_count) for f, p in zip(plan.files, plan.partitions, strict=True)],
        created_branch=(CreatedBranch(branch, MAIN_BRANCH, main_head.snapshot_id if main_head else None)
                        if new_branch else UNSET),
        name_mapping="would be " + outcome if dry_run and outcome != "unchanged" else outcome)

    def with_mapping(base: TableMetadata) -> tuple[TableUpdate, ...]:
        """set-properties of the name mapping, derived from each attempt's fresh base (a retry must
        not lose a concurrent change to the property, nor drop ours)."""
        nonlocal outcome
        mapped, outcome = ensure_name_mapping(base)
        if mapped is base:
            return ()
        return (SetProperties({DEFAULT_NAME_MAPPING: mapped.properties[DEFAULT_NAME_MAPPING]}),)
    if table.metadata.format_version >= V4:  # one new root (or one leaf and the root): single-file commits
        # The v4 append (layout page section 8): root-level ADDED entries, or past
        # write.v4.root-max-added-files one new leaf referenced by an ADDED DATA_MANIFEST entry.
        res.layout = "new leaf" if appends_to_leaf(table.metadata, len(plan.files)) else "root"
        layout: SnapshotLayout = RootLayout(branch)
    else:
        layout = ManifestListLayout(str(uuid.uuid4()), [])
    change = SnapshotChange("append", layout)
    snapshot_id = new_snapshot_id(table.metadata)
    if dry_run:
        res.dry.would_write = [*layout.appended_paths(table.metadata, table.metadata_folder, {plan.spec_id: plan.files},
                                                  snapshot_id), NEXT_METADATA]
        res.dry.would_delete = []
        return _said(res)
    md = table.metadata

    def unchanged(base: TableMetadata) -> None:
        if base.default_spec_id != plan.spec_id or base.current_schema_id != md.current_schema_id:
            raise CommitConflictError(f"table {table.identifier} changed its schema or partition spec meanwhile",
                                      hint="run add-files again")

    for f, p in zip(plan.files, plan.partitions, strict=True):
        change.summary.added_file(f, p)
    with discard_on_failure(table.io, change.written):
        layout.write_appended(table.io, md, table.metadata_folder, {plan.spec_id: plan.files}, snapshot_id,
                              change.written)
        done = write_snapshot(table, branch, change, snapshot_id=snapshot_id, check=unchanged, adjust=with_mapping,
                              create_branch=create_branch)
    res.snapshot_id = snapshot_id
    res.commit.record(done.metadata_location, done.attempts)
    res.name_mapping = outcome
    if isinstance(layout, RootLayout):
        res.written = done.files
    return _said(res)


def _said(res: AddFilesResult) -> AddFilesResult:
    """The headline names a branch this command creates: a new branch is no small side effect."""
    created = res.created_branch
    if isinstance(created, CreatedBranch):
        start = created.from_snapshot_id
        verb = "would start" if res.dry_run else "started"
        res.title += (f" (new branch '{created.name}' {verb} at main's head, snapshot {start})"
                      if start is not None
                      else f" (new branch '{created.name}' {verb} empty: main has no snapshot)")
    return res
