"""`icectl add-files`: register existing Parquet files in a table as one `append` snapshot.

Metrics come from each file's footer (:mod:`icectl.codec.parquet_metrics`); partition values from
the file's rows through the table's transforms. A file whose rows fall in more than one
partition is refused, as is a file the table already has.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from icectl.codec.manifest_writer import write_manifest, write_manifest_list
from icectl.codec.parquet_metrics import data_file_from_footer, field_ids_of
from icectl.codec.root_manifest import DATA as V4_DATA
from icectl.codec.root_manifest import FORMAT_VERSION as V4
from icectl.codec.root_manifest import ContentType, content_entry_of, write_v4_manifest
from icectl.errors import (
    CommitConflictError,
    CorruptInputError,
    IcectlError,
    NotFoundError,
    RefusedError,
    UsageError,
)
from icectl.results import RecordResult
from icectl.spec.manifest import DataFile, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.name_mapping import ensure_name_mapping
from icectl.spec.partitioning import PartitionSpec
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
from icectl.storage import FileIO, basename, delete_quietly, file_key, join, scheme_of
from icectl.table import Table
from icectl.table.commit import add_snapshot, commit, discard_on_failure, new_snapshot_id
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.summary import SummaryBuilder
from icectl.table.v4_commit import (
    NewLeaf,
    V4Change,
    branch_head,
    cleanup,
    column_types,
    commit_v4_change,
    leaf_entry,
    root_max_added_files,
)
from icectl.table.write_guard import check_writable


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
    with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        read = list(pool.map(lambda p: read_data_file(table.io, p, schema, spec), files))
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
              dry_run: bool = False) -> RecordResult:
    """Register Parquet files as one ``append`` snapshot on ``branch`` (committed with retries).

    ``branch`` must exist (or be main) unless ``create_branch``: then a missing branch starts at
    main's head. The table gets the name mapping Spark's ``add_files`` sets, in the same commit:
    files without field ids are then read by column name, not by position.
    """
    check_writable(table)
    plan = plan_add_files(table, paths, branch, create_branch=create_branch)
    new_branch = table.metadata.ref(branch) is None and branch != MAIN_BRANCH
    main_head = table.metadata.snapshot_for_ref(MAIN_BRANCH)
    summary: dict[str, Any] = {
        "table": table.identifier, "dry_run": dry_run, "branch": branch, "spec_id": plan.spec_id,
        "added_data_files": len(plan.files), "added_records": sum(f.record_count for f in plan.files),
        "added_files_size": sum(f.file_size_in_bytes for f in plan.files),
        "files": [{"file_path": f.file_path, "partition": p, "record_count": f.record_count}
                  for f, p in zip(plan.files, plan.partitions, strict=True)],
    }
    if new_branch:
        summary["created_branch"] = {"name": branch, "from": MAIN_BRANCH,
                                     "from_snapshot_id": main_head.snapshot_id if main_head else None}
    summary["name_mapping"] = ensure_name_mapping(table.metadata)[1]
    if dry_run and summary["name_mapping"] != "unchanged":
        summary["name_mapping"] = "would be " + summary["name_mapping"]
    outcome = summary["name_mapping"]

    def with_mapping(base: TableMetadata) -> TableMetadata:
        """The name mapping, set on each attempt's fresh base (a retry must not lose a concurrent
        change to the property, nor drop ours)."""
        nonlocal outcome
        base, outcome = ensure_name_mapping(base)
        return base
    if table.metadata.format_version >= V4:  # one new root (or one leaf and the root): single-file commits
        result = _add_files_v4(table, plan, summary, branch, dry_run, with_mapping, create_branch)
        if not dry_run:
            summary["name_mapping"] = outcome
        return _said(result, summary)
    md = table.metadata
    commit_id = str(uuid.uuid4())
    metadata_dir = table.metadata_folder
    snapshot_id = new_snapshot_id(md)
    manifest_path = join(metadata_dir, f"{commit_id}-m0.avro")
    if dry_run:
        summary["would_write"] = [manifest_path, join(metadata_dir, f"snap-{snapshot_id}-1-{commit_id}.avro"),
                                  "a new table metadata file (the next version)"]
        summary["would_delete"] = []
        return _said(RecordResult("add_files", f"Would add {len(plan.files)} files to {table.identifier}", summary),
                     summary)
    written: list[str] = []
    manifest = _write_added_manifest(table, plan, snapshot_id, manifest_path)
    written.append(manifest.manifest_path)
    attempt = 0

    def build(base: TableMetadata) -> TableMetadata:
        nonlocal attempt
        attempt += 1
        if base.default_spec_id != plan.spec_id or base.current_schema_id != md.current_schema_id:
            raise CommitConflictError(f"table {table.identifier} changed its schema or partition spec meanwhile",
                                      hint="run add-files again")
        base = with_mapping(base)
        parent = branch_head(base, branch, table.identifier, create_branch=create_branch)
        parent_manifests = manifests_of(base, parent, table.io) if parent else []
        seq = base.last_sequence_number + 1 if base.format_version >= 2 else 0
        new_manifest = _with_sequence(manifest, seq, snapshot_id)
        builder = SummaryBuilder()
        for f, p in zip(plan.files, plan.partitions, strict=True):
            builder.added_file(f, p)
        first_row_id = base.next_row_id if base.format_version >= 3 else None
        list_path = join(metadata_dir, f"snap-{snapshot_id}-{attempt}-{commit_id}.avro")
        result = write_manifest_list([new_manifest, *parent_manifests], format_version=base.format_version,
                                     snapshot_id=snapshot_id,
                                     parent_snapshot_id=parent.snapshot_id if parent else None,
                                     sequence_number=seq, first_row_id=first_row_id)
        table.io.write(list_path, result.data)
        written.append(list_path)
        snapshot = Snapshot(
            snapshot_id=snapshot_id, timestamp_ms=_now_ms(), parent_snapshot_id=parent.snapshot_id if parent else None,
            sequence_number=seq, manifest_list=list_path,
            summary=builder.build("append", parent.summary if parent else None),
            schema_id=base.current_schema_id,
            first_row_id=first_row_id,
            added_rows=(result.next_row_id - first_row_id) if first_row_id is not None else None)
        return add_snapshot(base, snapshot, branch=branch)

    with discard_on_failure(table.io, written):
        done = commit(table, build)
    committed = done.metadata.snapshot_by_id(snapshot_id)
    kept = {manifest.manifest_path, committed.manifest_list if committed else None}
    for p in written:
        if p not in kept:  # manifest lists of attempts that lost a conflict
            delete_quietly(table.io, p)
    summary["snapshot_id"] = snapshot_id
    summary["metadata_location"] = done.metadata_location
    summary["commit_attempts"] = done.attempts
    summary["name_mapping"] = outcome
    return _said(RecordResult("add_files", f"Added {len(plan.files)} files to {table.identifier}", summary), summary)


def _said(result: RecordResult, summary: dict[str, Any]) -> RecordResult:
    """The headline names a branch this command creates: a new branch is no small side effect."""
    created = summary.get("created_branch")
    if created:
        start = created["from_snapshot_id"]
        verb = "would start" if summary["dry_run"] else "started"
        result.title += (f" (new branch '{created['name']}' {verb} at main's head, snapshot {start})"
                         if start is not None
                         else f" (new branch '{created['name']}' {verb} empty: main has no snapshot)")
    return result


def _add_files_v4(table: Table, plan: AddFilesPlan, summary: dict[str, Any], branch: str, dry_run: bool,
                  adjust: Callable[[TableMetadata], TableMetadata], create_branch: bool) -> RecordResult:
    """The v4 append (layout page section 8): root-level ADDED entries, or past
    ``write.v4.root-max-added-files`` one new leaf referenced by an ADDED DATA_MANIFEST entry."""
    md = table.metadata
    spec = md.spec()
    ptype = md.partition_type(spec)
    snapshot_id = new_snapshot_id(md)
    metadata_dir = table.metadata_folder
    to_leaf = len(plan.files) > root_max_added_files(md)
    leaf_path = join(metadata_dir, f"{uuid.uuid4()}-m0.avro") if to_leaf else None
    summary["layout"] = "new leaf" if to_leaf else "root"
    if dry_run:
        summary["would_write"] = [*([leaf_path] if leaf_path else []),
                                  join(metadata_dir, f"root-{snapshot_id}-<uuid>.avro"),
                                  "a new table metadata file (the next version)"]
        summary["would_delete"] = []
        return RecordResult("add_files", f"Would add {len(plan.files)} files to {table.identifier}", summary)
    builder = SummaryBuilder()
    for f, p in zip(plan.files, plan.partitions, strict=True):
        builder.added_file(f, p)
    entries = [content_entry_of(ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f), spec.spec_id, ptype)
               for f in plan.files]
    change = V4Change("append", builder)
    written: list[str] = []

    def unchanged(base: TableMetadata) -> None:
        if base.default_spec_id != plan.spec_id or base.current_schema_id != md.current_schema_id:
            raise CommitConflictError(f"table {table.identifier} changed its schema or partition spec meanwhile",
                                      hint="run add-files again")

    with discard_on_failure(table.io, written):
        if leaf_path is not None:
            leaf = write_v4_manifest(entries, content=V4_DATA, partition_type=md.unified_partition_type(),
                                     field_types=column_types(md))
            table.io.write(leaf_path, leaf.data)
            written.append(leaf_path)
            change.new_leaves.append(NewLeaf(leaf_entry(
                leaf_path, len(leaf.data), spec.spec_id, leaf.stats, ContentType.DATA_MANIFEST, leaf.content_stats),
                leaf.stats.added_rows_count))
        else:
            change.added = entries
        done = commit_v4_change(table, branch, change, snapshot_id, written, unchanged, adjust=adjust,
                                create_branch=create_branch)
    committed = done.metadata.snapshot_by_id(snapshot_id)
    root = committed.root_manifest if committed else None
    cleanup(table.io, written, {p for p in (leaf_path, root) if p})
    summary.update(snapshot_id=snapshot_id, metadata_location=done.metadata_location, commit_attempts=done.attempts,
                   written=[p for p in (leaf_path, root) if p])
    return RecordResult("add_files", f"Added {len(plan.files)} files to {table.identifier}", summary)


def _write_added_manifest(table: Table, plan: AddFilesPlan, snapshot_id: int, path: str) -> ManifestFile:
    md = table.metadata
    spec = md.spec()
    entries = [ManifestEntry(ManifestEntryStatus.ADDED, snapshot_id, None, None, f) for f in plan.files]
    result = write_manifest(entries, schema=md.schema(), spec=spec,
                            partition_type=md.partition_type(spec),
                            format_version=md.format_version, content=ManifestContent.DATA, snapshot_id=snapshot_id)
    table.io.write(path, result.data)
    return result.to_manifest_file(path, len(result.data), spec.spec_id, snapshot_id, -1)


def _with_sequence(m: ManifestFile, seq: int, snapshot_id: int) -> ManifestFile:
    return dataclasses.replace(m, sequence_number=seq, min_sequence_number=seq, added_snapshot_id=snapshot_id)


def _now_ms() -> int:
    return int(time.time() * 1000)
