"""`icectl remove-files`: remove data files from a v4 table in one `delete` commit, writing one root.

Files are chosen by location (``PATH...``) and/or by partition values (``--where name=value``,
every clause must hold). A root-level file becomes a DELETED root row (its colocated DV goes
with it); a file inside a leaf, a v4 Parquet leaf or a carried-over v1-v3 manifest, is removed
through the leaf's manifest DV (its root entry MODIFIED); the v2/v3 deletion vectors of removed
data files in carried-over delete manifests go the same way. No leaf is rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pyroaring import BitMap64

from icectl.codec.v4_schema import MANIFEST_SUFFIX
from icectl.errors import NotFoundError, UnsupportedError, UsageError
from icectl.results import FLAT, NEXT_METADATA, UNSET, CommandResult, Committed, DryRun, Part, Unset
from icectl.spec.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntry
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import StructType
from icectl.spec.tracked_file import FORMAT_VERSION as V4
from icectl.spec.values import to_human
from icectl.storage import file_key, join
from icectl.table import Table
from icectl.table.commit import new_snapshot_id
from icectl.table.layout import Deletes
from icectl.table.layout.root import RootLayout, head_root
from icectl.table.scan_v4 import TreeManifest, read_leaf, tree_manifests
from icectl.table.snapshot_writer import SnapshotChange, branch_head, write_snapshot
from icectl.table.write_guard import check_writable
from icectl.threads import ordered_map


@dataclass
class RemovedFile(Part):
    file_path: str
    content: int  # 0 data, 1 position deletes (a DV)
    record_count: int
    via: str  # "root DELETED entry" or "manifest DV on <leaf>"
    partition: dict[str, Any]  # partition field name -> human value


@dataclass(kw_only=True)
class RemoveFilesResult(CommandResult):
    """``icectl remove-files`` (v4 tables)."""

    view: ClassVar[str] = "remove_files"

    table: str
    dry_run: bool
    branch: str
    removed_data_files: int
    removed_records: int
    removed_delete_files: int
    files: list[RemovedFile]
    committed: bool | Unset = UNSET  # False: nothing matched; True: committed
    dry: DryRun[list[str], list[str]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    snapshot_id: int | Unset = UNSET  # committed from here on
    commit: Committed = field(default_factory=Committed, metadata=FLAT)
    written: list[str | None] | Unset = UNSET




def parse_where(clauses: Iterable[str]) -> list[tuple[str, str]]:
    out = []
    for c in clauses:
        name, sep, value = c.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--where takes partition_field=value, got {c!r}")
        out.append((name.strip(), value.strip()))
    return out


def _human(t: Any, v: Any) -> str:
    h = to_human(t, v)
    if h is None:
        return "null"
    return ("true" if h else "false") if isinstance(h, bool) else str(h)


@dataclass
class _Selector:
    md: TableMetadata
    paths: dict[str, str]  # file_key -> as given
    where: list[tuple[str, str]]

    def matches(self, f: DataFile, ptype: StructType) -> bool:
        if file_key(f.file_path) in self.paths:
            return True
        if not self.where:
            return False
        values = {pf.name: _human(pf.field_type, v) for pf, v in zip(ptype.fields, f.partition or (), strict=False)}
        return all(values.get(name) == value for name, value in self.where)


def _ptype(md: TableMetadata, spec_id: int) -> StructType:
    spec = md.spec_by_id(spec_id)
    return md.partition_type(spec) if spec else StructType(())


def _live_rows(md: TableMetadata, table: Table, m: TreeManifest) -> Iterable[tuple[int, ManifestEntry]]:
    """(ordinal in the leaf, entry) of the rows of ``m`` that are part of the snapshot."""
    if m.root_entries is not None:
        yield from ((-1, e) for e in m.root_entries if e.is_live)
        return
    dv = m.deleted_positions or BitMap64()
    for i, e in enumerate(read_leaf(md, table.io, m, _ptype(md, m.partition_spec_id))):
        if e.is_live and i not in dv:
            yield i, e


def remove_files(table: Table, paths: Sequence[str] = (), *, where: Sequence[str] = (), branch: str = "main",
                 dry_run: bool = False) -> RemoveFilesResult:
    """Remove data files (and their DVs) from ``branch`` of a v4 table in one commit."""
    check_writable(table)
    md = table.metadata
    if md.format_version < V4:
        raise UnsupportedError(f"remove-files works on format v4 tables; {table.identifier} is v{md.format_version}",
                               hint="upgrade it with 'icectl upgrade --to 4'")
    if not paths and not where:
        raise UsageError("give the files to remove (PATH...) or --where partition_field=value")
    head = branch_head(md, branch, table.identifier)
    head_root(md, head, table.io, branch)  # refused when the head has no root
    if head is None:
        raise NotFoundError(f"branch '{branch}' of table {table.identifier} has no snapshot")
    clauses = parse_where(where)
    known = sorted({pf.name for spec in md.partition_specs for pf in spec.fields})
    unknown = [name for name, _ in clauses if name not in known]
    if unknown:  # a typo would silently match no file
        raise UsageError(f"--where {unknown[0]}: {table.identifier} has no partition field of that name",
                         hint=f"partition fields: {', '.join(known) or 'none (unpartitioned)'}")
    sel = _Selector(md, {file_key(p): p for p in paths}, clauses)
    layout = RootLayout(branch)
    to_delete: list[DataFile] = []
    change = SnapshotChange("delete", layout, deletes=Deletes(to_delete))
    removed: list[RemovedFile] = []
    removed_keys: set[str] = set()
    manifests = tree_manifests(md, head, table.io)

    def remove(m: TreeManifest, ordinal: int, f: DataFile) -> None:
        ptype = _ptype(md, m.partition_spec_id)
        spec = md.spec_by_id(m.partition_spec_id)
        partition = spec.partition_path(f.partition or (), md.schema()) if spec and f.partition else ""
        change.summary.removed_file(f, partition)
        to_delete.append(f)  # the layout marks it DELETED: a root entry or a position in the leaf's manifest DV
        via = "root DELETED entry" if m.root_entries is not None else f"manifest DV on {m.manifest_path}"
        removed.append(RemovedFile(f.file_path, int(f.content), f.record_count, via,
                                   {pf.name: _human(pf.field_type, v)
                                    for pf, v in zip(ptype.fields, f.partition or (), strict=False)}))

    # Leaves are read in parallel (I/O-bound, above all on object storage), in root order.
    rows = list(ordered_map(lambda m: list(_live_rows(md, table, m)), manifests))
    for m, live in zip(manifests, rows, strict=True):
        if m.content == ManifestContent.DATA:
            for i, e in live:
                if sel.matches(e.data_file, _ptype(md, m.partition_spec_id)):
                    remove(m, i, e.data_file)
                    removed_keys.add(file_key(e.data_file.file_path))
    missing = sorted(p for k, p in sel.paths.items() if k not in removed_keys)
    if missing:
        raise NotFoundError(f"{missing[0]} is not a live data file of branch '{branch}' of {table.identifier}",
                            path=missing[0], hint="list them with 'icectl inspect files'")
    for m, live in zip(manifests, rows, strict=True):  # the DVs of removed data files go with them
        if m.content == ManifestContent.DELETES:
            for i, e in live:
                f = e.data_file
                if (f.content == DataFileContent.POSITION_DELETES and f.referenced_data_file
                        and file_key(f.referenced_data_file) in removed_keys and f.is_dv):
                    remove(m, i, f)
    data_removed = [r for r in removed if r.content == DataFileContent.DATA]
    res = RemoveFilesResult(
        table=table.identifier, dry_run=dry_run, branch=branch, removed_data_files=len(data_removed),
        removed_records=sum(r.record_count for r in data_removed),
        removed_delete_files=len(removed) - len(data_removed), files=removed)
    if not removed:
        res.title, res.committed = f"Nothing to remove from {table.identifier}", False
        return res
    snapshot_id = new_snapshot_id(md)
    if dry_run:
        res.title = f"Would remove {len(data_removed)} files from {table.identifier}"
        res.dry.would_write = [join(table.metadata_folder, f"root-{snapshot_id}-<uuid>{MANIFEST_SUFFIX}"),
                               NEXT_METADATA]
        res.dry.would_delete = []
        return res
    done = write_snapshot(table, branch, change, snapshot_id=snapshot_id)
    res.title = f"Removed {len(data_removed)} files from {table.identifier}"
    res.committed, res.snapshot_id, res.commit.metadata_location = True, snapshot_id, done.metadata_location
    res.commit.commit_attempts, res.written = done.attempts, list(done.files)
    return res
