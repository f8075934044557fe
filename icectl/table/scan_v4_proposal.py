"""The read path of a v4 snapshot in the proposal layout that icectl wrote before the spec merged v4
(Avro ``content_entry`` roots and leaves, manifest DVs as content_type 5 entries): read-only,
until ``icectl upgrade --to 4`` rewrites the table. :mod:`icectl.table.scan_v4` dispatches here.

:func:`tree_manifests` turns a root into :class:`TreeManifest` objects, which are
:class:`~icectl.spec.manifest.ManifestFile` rows with what a v4 reader needs besides:

* a leaf (v1-v4 manifest) referenced by a live DATA_MANIFEST/DELETE_MANIFEST entry, with the
  positions of its live manifest DV (rows at those ordinals are not part of the snapshot);
* the root-level data and delete files, grouped by content and partition spec, as pseudo
  manifests whose ``manifest_path`` is the root itself (their entries are already decoded).

:mod:`icectl.table.scan` hands these to :func:`read_tree_entries`, so every view and operation built on
``manifests_of``/``iter_entries`` reads v4 snapshots unchanged (layout page section 7).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from icectl.codec.v4_proposal import manifest_dv_positions, read_v4_manifest, v4_format_version

__all__ = ["TreeFiles", "TreeManifest", "partition_field_types", "root_group", "tree_files", "tree_manifests",
           "v4_format_version", "v4_leaf_reader"]
from icectl.errors import CorruptInputError, IcectlError
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import IcebergType, StructType
from icectl.spec.snapshots import Snapshot
from icectl.spec.v4_proposal import (
    ContentEntry,
    V4Manifest,
    leaf_entries,
    live_manifest_dvs,
    manifest_entry_of,
    manifest_file_of,
    with_inherited,
)
from icectl.storage import FileIO

if TYPE_CHECKING:
    from pyroaring import BitMap64


@dataclass(frozen=True, slots=True)
class TreeManifest(ManifestFile):
    """A leaf or a group of root-level files of a v4 snapshot (see the module docstring)."""

    root_location: str = ""
    deleted_positions: BitMap64 | None = field(default=None, compare=False)
    root_entries: tuple[ManifestEntry, ...] | None = field(default=None, compare=False)

    @property
    def is_root_group(self) -> bool:
        return self.root_entries is not None


def partition_field_types(metadata: TableMetadata) -> dict[int, IcebergType]:
    """Partition field id -> result type, over every spec of the table."""
    out: dict[int, IcebergType] = {}
    for spec in metadata.partition_specs:
        for f in metadata.partition_type(spec).fields:
            out.setdefault(f.field_id, f.field_type)
    return out


def read_root(metadata: TableMetadata, snapshot: Snapshot, io: FileIO, data: bytes | None = None) -> V4Manifest:
    """A snapshot's root manifest, ADDED entries' nulls inherited from the snapshot."""
    path = snapshot.root_manifest
    if path is None:
        raise CorruptInputError(f"snapshot {snapshot.snapshot_id} has no root-manifest")
    try:
        root = read_v4_manifest(io.read(path) if data is None else data,
                                partition_types=partition_field_types(metadata))
    except IcectlError as e:
        raise e.in_file(path) from None
    if root.content != "root":
        raise CorruptInputError(f"root manifest {path} has content {root.content!r}, expected 'root'", path=path)
    entries = [with_inherited(e, snapshot.snapshot_id, snapshot.sequence_number) for e in root.entries]
    return V4Manifest(entries, root.metadata)


def dv_positions(e: ContentEntry, io: FileIO) -> BitMap64:
    """A manifest DV's positions, read from its Puffin file when not inline."""
    dv = e.deletion_vector
    blob = None
    if dv is not None and dv.inline_content is None:
        if dv.offset is None or dv.size_in_bytes is None:
            raise CorruptInputError(f"manifest DV for {e.referenced_file} lacks offset/size_in_bytes",
                                    path=e.location)
        blob = io.read_range(e.location, dv.offset, dv.size_in_bytes)
    try:
        return manifest_dv_positions(e, blob)
    except IcectlError as err:
        raise err.in_file(e.location) from None


def tree_manifests(metadata: TableMetadata, snapshot: Snapshot, io: FileIO,
                   root_data: bytes | None = None) -> list[TreeManifest]:
    """Leaves (with their live manifest DV) then root-level file groups of a v4 snapshot.

    ``root_data``: the root's bytes when they are not (yet) in storage, e.g. to check a root
    before writing it.
    """
    root = read_root(metadata, snapshot, io, root_data)
    path = snapshot.root_manifest or ""
    size = len(root_data) if root_data is not None else io.size(path)
    dvs = {leaf: dv_positions(e, io) for leaf, e in live_manifest_dvs(root.entries).items()}
    out: list[TreeManifest] = []
    for e in root.entries:
        if e.is_manifest and e.is_live:
            m = manifest_file_of(e)
            out.append(TreeManifest(**_fields(m), root_location=path, deleted_positions=dvs.get(e.location)))
    groups: dict[tuple[ManifestContent, int], list[ManifestEntry]] = {}
    for e in root.entries:
        if e.is_file:
            me = manifest_entry_of(e, metadata.partition_type(e.partition_spec_id, used_by="v4 entry"))
            content = ManifestContent.DATA if me.data_file.content == DataFileContent.DATA else ManifestContent.DELETES
            groups.setdefault((content, e.partition_spec_id), []).append(me)
    for (content, spec_id), entries in groups.items():
        out.append(root_group(path, size, content, spec_id, entries))
    return out


def _fields(m: ManifestFile) -> dict[str, Any]:
    return {name: getattr(m, name) for name in ManifestFile.__dataclass_fields__}


def root_group(path: str, size: int, content: ManifestContent, spec_id: int,
                entries: list[ManifestEntry]) -> TreeManifest:
    def count(status: ManifestEntryStatus, rows: bool) -> int:
        return sum(e.data_file.record_count if rows else 1 for e in entries if e.status == status)

    live_seqs = [e.sequence_number for e in entries if e.is_live and e.sequence_number is not None]
    seqs = [e.sequence_number for e in entries if e.sequence_number is not None]
    snapshot_ids = [e.snapshot_id for e in entries if e.snapshot_id is not None]
    return TreeManifest(
        manifest_path=path, manifest_length=size, partition_spec_id=spec_id, content=content,
        sequence_number=max(seqs, default=0), min_sequence_number=min(live_seqs, default=0),
        added_snapshot_id=max(snapshot_ids, default=None),
        added_files_count=count(ManifestEntryStatus.ADDED, False),
        existing_files_count=count(ManifestEntryStatus.EXISTING, False),
        deleted_files_count=count(ManifestEntryStatus.DELETED, False),
        added_rows_count=count(ManifestEntryStatus.ADDED, True),
        existing_rows_count=count(ManifestEntryStatus.EXISTING, True),
        deleted_rows_count=count(ManifestEntryStatus.DELETED, True),
        root_location=path, root_entries=tuple(entries))


@dataclass(frozen=True, slots=True)
class TreeFiles:
    """Every file a v4 snapshot references, for reachability (expire): its root, its live leaves
    with the positions of their live manifest DV (None: no DV), its live root-level data and
    delete files, and the Puffin files of its live manifest DVs (an inline DV names no file)."""

    root: str
    leaves: tuple[tuple[ManifestFile, BitMap64 | None], ...]
    files: tuple[tuple[str, DataFileContent], ...]
    manifest_dv_files: tuple[str, ...]


def tree_files(metadata: TableMetadata, snapshot: Snapshot, io: FileIO, root_data: bytes | None = None) -> TreeFiles:
    """What a v4 snapshot reaches through its root (leaf contents: ``scan_v4.leaf_rows``)."""
    root = read_root(metadata, snapshot, io, root_data)
    dvs = live_manifest_dvs(root.entries)
    leaves = []
    for e in root.entries:
        if e.is_manifest and e.is_live:
            dv = dvs.get(e.location)
            leaves.append((manifest_file_of(e), dv_positions(dv, io) if dv is not None else None))
    files = tuple((e.location, DataFileContent(int(e.content_type))) for e in root.entries if e.is_file and e.is_live)
    # A DV whose leaf is not live is a corrupt root; its Puffin file still counts as reached.
    puffins = tuple(dict.fromkeys(e.location for e in dvs.values()
                                  if e.deletion_vector is not None and e.deletion_vector.inline_content is None))
    return TreeFiles(snapshot.root_manifest or "", tuple(leaves), files, puffins)


def v4_leaf_reader(metadata: TableMetadata, manifest: ManifestFile,
                   ptype: StructType) -> Callable[[bytes], list[ManifestEntry] | None]:
    """A proposal-layout v4 leaf's entries (Avro, ``format-version`` 4; ``scan_v4`` checked that)."""
    path = manifest.manifest_path

    def read(raw: bytes) -> list[ManifestEntry] | None:
        try:
            leaf = read_v4_manifest(raw, partition_types=partition_field_types(metadata))
        except IcectlError as e:
            raise e.in_file(path) from None
        if leaf.content == "root":
            raise CorruptInputError("a root manifest is referenced as a leaf (tree depth is 2)", path=path)
        return leaf_entries(leaf, manifest, ptype)

    return read
