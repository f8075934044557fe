"""The read path of a v4 snapshot: its root manifest, leaves and manifest DVs, as v1-v3 manifests.

:func:`tree_manifests` turns a root into :class:`TreeManifest` objects, which are
:class:`~icectl.spec.manifest.ManifestFile` rows with what a v4 reader needs besides:

* a leaf (a v4 Parquet leaf, or a v1-v3 manifest carried over from before the upgrade)
  referenced by a live DATA_MANIFEST/DELETE_MANIFEST entry, with the positions of its manifest DV
  (``manifest_info.dv``: rows at those ordinals are not part of the snapshot);
* the root's data files, grouped by partition spec, as pseudo manifests whose ``manifest_path``
  is the root itself (their entries are already decoded); their colocated DVs form a DELETES
  group per spec, as v1-v3 DV entries that reference their data file.

:mod:`icectl.table.scan` hands these to :func:`read_tree_entries`, so every view and operation
built on ``manifests_of``/``iter_entries`` reads v4 snapshots unchanged. A root written in the
proposal layout of earlier icectl versions (Avro) is read by :mod:`icectl.table.scan_v4_proposal`;
writers refuse it (:func:`read_root`) until ``icectl upgrade --to 4`` rewrites it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from icectl.codec.manifest_reader import read_manifest_metadata
from icectl.codec.mumbling import decode_mumbling
from icectl.codec.v4_manifest import is_parquet, read_v4_manifest
from icectl.errors import CorruptInputError, IcectlError, RefusedError, UnsupportedError
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import IcebergType, StructType
from icectl.spec.snapshots import Snapshot
from icectl.spec.tracked_file import (
    TrackedFile,
    V4Manifest,
    leaf_entries,
    manifest_file_of,
    resolved,
    root_file_entries,
    with_inherited,
)
from icectl.storage import FileIO
from icectl.table import scan_v4_proposal as proposal
from icectl.table.manifest_read import DEFAULT_READ, ReadOptions, manifest_entries
from icectl.table.scan_v4_proposal import TreeFiles, TreeManifest, partition_field_types, root_group

if TYPE_CHECKING:
    from pyroaring import BitMap64

__all__ = ["TreeFiles", "TreeManifest", "column_field_types", "is_proposal_root", "leaf_rows", "manifest_dv",
           "partition_field_types", "read_leaf", "read_root", "read_tree_entries", "tree_files", "tree_manifests",
           "v4_leaf_reader"]

PROPOSAL_HINT = ("run 'icectl upgrade --to 4' to rewrite it into the layout the Iceberg spec merged "
                 "(reading keeps working until then)")


def column_field_types(metadata: TableMetadata) -> dict[int, IcebergType]:
    """Column id -> type over every schema, newest first (old files keep dropped columns' stats)."""
    out: dict[int, IcebergType] = {}
    for schema in sorted(metadata.schemas, key=lambda s: -s.schema_id):
        for fid in schema.field_ids():
            f = schema.find_field(fid)
            if f is not None:
                out.setdefault(fid, f.field_type)
    return out


def is_proposal_root(data: bytes) -> bool:
    """Whether a root is in the proposal layout of earlier icectl versions (an Avro file with the
    proposal's ``content`` key); a root that is neither that nor Parquet is refused (exit 4)."""
    if is_parquet(data):
        return False
    try:
        content = read_manifest_metadata(data).get("content")
    except IcectlError:
        content = None
    if content != "root":
        raise UnsupportedError("v4 root manifest is neither Parquet nor in icectl's earlier (proposal) layout: "
                               "icectl reads v4 manifests as Parquet (Avro tracked_file manifests are not read)",
                               hint="nothing was changed")
    return True


def _resolved(e: TrackedFile, metadata: TableMetadata) -> TrackedFile:
    # Without a table location (optional in v4: the catalog knows it) a relative path stays as it
    # is, and the delete fence refuses it.
    return resolved(e, metadata.location) if metadata.location else e


def _proposal(data: bytes, path: str) -> bool:
    try:
        return is_proposal_root(data)
    except IcectlError as e:
        raise e.in_file(path) from None


def _root_bytes(snapshot: Snapshot, io: FileIO, data: bytes | None) -> tuple[str, bytes]:
    path = snapshot.root_manifest
    if path is None:
        raise CorruptInputError(f"snapshot {snapshot.snapshot_id} has no root-manifest")
    return path, io.read(path) if data is None else data


def read_root(metadata: TableMetadata, snapshot: Snapshot, io: FileIO, data: bytes | None = None) -> V4Manifest:
    """A snapshot's root manifest (spec layout), ADDED rows' nulls inherited from the snapshot.
    A proposal-layout root is refused (exit 6): only reading goes through it."""
    path, raw = _root_bytes(snapshot, io, data)
    if _proposal(raw, path):
        raise RefusedError(f"snapshot {snapshot.snapshot_id}'s root {path} is in icectl's earlier v4 layout (the "
                           "proposal), which icectl reads but no longer writes", path=path, hint=PROPOSAL_HINT)
    try:
        root = read_v4_manifest(raw, partition_types=partition_field_types(metadata),
                                column_types=column_field_types(metadata), root=True)
    except IcectlError as e:
        raise e.in_file(path) from None
    entries = [with_inherited(_resolved(e, metadata), snapshot.snapshot_id, snapshot.sequence_number)
               for e in root.entries]
    return V4Manifest(entries, root.metadata)


def manifest_dv(e: TrackedFile) -> BitMap64 | None:
    """The leaf ordinals a root entry's manifest DV removes (None: no DV)."""
    from pyroaring import BitMap64  # here: commands that read no manifest DV never load pyroaring

    info = e.manifest_info
    if info is None or info.dv is None:
        return None
    try:
        return BitMap64(decode_mumbling(info.dv))
    except CorruptInputError as err:
        raise CorruptInputError(f"the manifest DV of leaf {e.location} is not a valid Mumbling bitmap: {err.message}",
                                hint="nothing was changed; the root entry of that leaf is damaged") from None


def tree_manifests(metadata: TableMetadata, snapshot: Snapshot, io: FileIO,
                   root_data: bytes | None = None) -> list[TreeManifest]:
    """Leaves (with their manifest DV) then the root's data-file and DV groups of a v4 snapshot.

    ``root_data``: the root's bytes when they are not (yet) in storage, e.g. to check a root
    before writing it.
    """
    path, raw = _root_bytes(snapshot, io, root_data)
    if _proposal(raw, path):
        return proposal.tree_manifests(metadata, snapshot, io, raw)
    root = read_root(metadata, snapshot, io, raw)
    size = len(raw)
    out: list[TreeManifest] = []
    for e in root.entries:
        if e.is_manifest and e.is_live:
            m = manifest_file_of(e)
            try:
                dv = manifest_dv(e)
            except IcectlError as err:
                raise err.in_file(path) from None
            out.append(TreeManifest(**{n: getattr(m, n) for n in ManifestFile.__dataclass_fields__},
                                    root_location=path, deleted_positions=dv))
    groups: dict[tuple[ManifestContent, int], list[ManifestEntry]] = {}
    for e in root.entries:
        if e.is_file:
            spec_id = e.spec_id or 0
            ptype = metadata.partition_type(spec_id, used_by="v4 entry")
            data, colocated = root_file_entries(e, ptype, snapshot.snapshot_id)
            groups.setdefault((ManifestContent.DATA, spec_id), []).append(data)
            if colocated is not None:
                groups.setdefault((ManifestContent.DELETES, spec_id), []).append(colocated)
    for (content, spec_id), entries in sorted(groups.items()):
        out.append(root_group(path, size, content, spec_id, entries))
    return out


def tree_files(metadata: TableMetadata, snapshot: Snapshot, io: FileIO) -> TreeFiles:
    """What a v4 snapshot reaches through its root (leaf contents: :func:`leaf_rows`): the DV
    files of live root data files count as delete files; manifest DVs are inline."""
    path, raw = _root_bytes(snapshot, io, None)
    if _proposal(raw, path):
        return proposal.tree_files(metadata, snapshot, io, raw)
    root = read_root(metadata, snapshot, io, raw)
    try:
        leaves = tuple((manifest_file_of(e), manifest_dv(e)) for e in root.entries if e.is_manifest and e.is_live)
    except IcectlError as err:
        raise err.in_file(path) from None
    files: list[tuple[str, DataFileContent]] = []
    for e in root.entries:
        if e.is_file and e.is_live:
            files.append((e.location, DataFileContent.DATA))
            if e.deletion_vector is not None:
                files.append((e.deletion_vector.location, DataFileContent.POSITION_DELETES))
    return TreeFiles(path, leaves, tuple(files), ())


def leaf_rows(metadata: TableMetadata, io: FileIO, manifest: ManifestFile) -> list[tuple[str, DataFileContent, bool]]:
    """Every row of a leaf in file order (a row's index is its manifest-DV ordinal): file path,
    content and whether the row is live; no manifest DV applied."""
    ptype = metadata.partition_type(manifest.partition_spec_id, used_by="v4 entry")
    rows = read_leaf(metadata, io, manifest, ptype, fields=("content", "file_path", "file_format"))
    return [(e.data_file.file_path, e.data_file.content, e.is_live) for e in rows]


def read_leaf(metadata: TableMetadata, io: FileIO, manifest: ManifestFile, ptype: StructType,
              fields: Iterable[str] | None = None, data: bytes | None = None,
              options: ReadOptions = DEFAULT_READ) -> list[ManifestEntry]:
    """Every row of a leaf, in file order, inherited from ``manifest``; no DV applied. A v1-v3
    leaf is an ordinary manifest, read through the manifest cache."""
    return manifest_entries(io, manifest, partition_type=ptype, format_version=metadata.format_version,
                            fields=fields, options=options, data=data,
                            other_format=v4_leaf_reader(metadata, manifest, ptype))


def v4_leaf_reader(metadata: TableMetadata, manifest: ManifestFile,
                   ptype: StructType) -> Callable[[bytes], list[ManifestEntry] | None]:
    """For :mod:`icectl.table.manifest_read`: a leaf's entries when it is a v4 manifest (Parquet,
    or a proposal-layout Avro leaf), ``None`` when it is an ordinary v1-v3 manifest."""
    path = manifest.manifest_path

    def read(raw: bytes) -> list[ManifestEntry] | None:
        if not is_parquet(raw):
            try:
                if proposal.v4_format_version(read_manifest_metadata(raw)) < 4:
                    return None
            except IcectlError as e:
                raise e.in_file(path) from None
            return proposal.v4_leaf_reader(metadata, manifest, ptype)(raw)
        try:
            leaf = read_v4_manifest(raw, partition_types=partition_field_types(metadata),
                                    column_types=column_field_types(metadata), root=False)
        except IcectlError as e:
            raise e.in_file(path) from None
        return leaf_entries([_resolved(e, metadata) for e in leaf.entries], manifest, ptype)

    return read


def read_tree_entries(metadata: TableMetadata, io: FileIO, manifest: TreeManifest, ptype: StructType,
                      fields: Iterable[str] | None = None, data: bytes | None = None,
                      options: ReadOptions = DEFAULT_READ) -> list[ManifestEntry]:
    """The entries of a :class:`TreeManifest` that are part of its snapshot (manifest DV applied);
    ``data``: the leaf's bytes when the caller has them already."""
    if manifest.root_entries is not None:
        return list(manifest.root_entries)
    dv = manifest.deleted_positions
    entries = read_leaf(metadata, io, manifest, ptype, fields, data, options)
    if not dv:
        return entries
    if dv.max() >= len(entries):
        raise CorruptInputError(f"manifest DV position {dv.max()} is past the {len(entries)} rows of "
                                f"{manifest.manifest_path}", path=manifest.manifest_path)
    return [e for i, e in enumerate(entries) if i not in dv]
