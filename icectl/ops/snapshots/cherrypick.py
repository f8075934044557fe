"""The files of a cherry-pick that writes a new snapshot (Java's ``CherryPickOperation`` as the
``MergingSnapshotProducer`` it is), for format v1-v3:

* the data files the picked snapshot added (``Snapshot.addedDataFiles``: ADDED entries of the data
  manifests it wrote) go into one new manifest per partition spec, without their ``first_row_id``
  (``suppressFirstRowId``: the new snapshot assigns row ids again);
* for a dynamic overwrite (``replace-partitions=true``), the data files it removed
  (``removedDataFiles``) must all still be live on main's head ("Missing required files to
  delete"), no snapshot since its parent may have added a file to a partition it replaces
  ("Cannot cherry-pick replace partitions with changed partition"), and each head manifest holding
  one of them is rewritten as ``ManifestFilterManager`` does: its live entries, those files
  DELETED (by the new snapshot, sequence numbers kept), the others EXISTING.

The added files are written as any append's are (:mod:`icectl.table.layout.append`); on a v4
table they may come from any source snapshot (a manifest list of before the upgrade, or a v4
root: its ADDED root-level entries and the leaves it added).

Everything is computed from the base of one commit attempt; :mod:`icectl.ops.snapshots`
runs it through the snapshot writer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest
from icectl.errors import RefusedError
from icectl.ops.compact.plan import as_existing
from icectl.spec.manifest import DataFile, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot, ancestors_of
from icectl.table import Table
from icectl.table.layout.manifest_list import manifest_path
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.scan_v4 import TreeManifest

BySpec = dict[int, list[tuple[DataFile, str]]]  # spec id -> [(file, partition path)]


@dataclass
class SourceFiles:
    """The data files a snapshot added and removed, by partition spec, with partition paths."""

    added: BySpec = field(default_factory=dict)
    removed: BySpec = field(default_factory=dict)

    @staticmethod
    def paths(files: BySpec) -> list[str]:
        return [f.file_path for fs in files.values() for f, _ in fs]

    @staticmethod
    def data_files(files: BySpec) -> dict[int, list[DataFile]]:
        return {spec_id: [f for f, _ in fs] for spec_id, fs in files.items()}

    def replaced_partitions(self) -> set[tuple[int, tuple[Any, ...]]]:
        return {(spec_id, tuple(f.partition or ())) for spec_id, fs in self.added.items() for f, _ in fs}


def _own_entries(table: Table, md: TableMetadata, snapshot: Snapshot) -> Iterable[tuple[ManifestFile, ManifestEntry]]:
    """Entries of the data manifests ``snapshot`` wrote itself (Java's ``cacheDataFileChanges``);
    of a v4 snapshot, its leaves and the root-level entries it wrote (those carried over from the
    head are EXISTING, the head's DELETED ones are gone)."""
    sid = snapshot.snapshot_id
    mine = [m for m in manifests_of(md, snapshot, table.io) if m.content == ManifestContent.DATA
            and (m.added_snapshot_id == sid or (isinstance(m, TreeManifest) and m.is_root_group))]
    for m, e in iter_entries(md, table.io, mine):
        if isinstance(m, TreeManifest) and m.is_root_group and e.snapshot_id not in (None, sid):
            continue
        yield m, e


def source_files(table: Table, md: TableMetadata, source: Snapshot) -> SourceFiles:
    out = SourceFiles()
    for m, e in _own_entries(table, md, source):
        if e.status == ManifestEntryStatus.EXISTING:
            continue
        spec = md.spec_by_id(m.partition_spec_id)
        assert spec is not None  # iter_entries resolved the partition type of every manifest
        f = e.data_file
        key = "" if spec.is_unpartitioned else spec.partition_path(f.partition or (), md.schema(), md.schemas)
        if e.status == ManifestEntryStatus.ADDED:
            out.added.setdefault(m.partition_spec_id, []).append((dataclasses.replace(f, first_row_id=None), key))
        else:
            out.removed.setdefault(m.partition_spec_id, []).append((f, key))
    return out


def check_replaced_partitions(table: Table, base: TableMetadata, head: Snapshot | None, source: Snapshot,
                              files: SourceFiles) -> None:
    """Java's ``validateReplacedPartitions``: no data file added since the picked snapshot's parent
    (``SnapshotUtil.newFilesBetween``) lies in a partition it replaces."""
    if head is None:
        return
    replaced = files.replaced_partitions()
    for s in ancestors_of(head.snapshot_id, base.snapshots_by_id):
        if s.snapshot_id == source.parent_snapshot_id:
            break
        for m, e in _own_entries(table, base, s):
            if e.status == ManifestEntryStatus.ADDED and (m.partition_spec_id, tuple(e.data_file.partition or ())) \
                    in replaced:
                raise RefusedError(f"cannot cherry-pick dynamic overwrite {source.snapshot_id}: snapshot "
                                   f"{s.snapshot_id} changed partition {e.data_file.partition} since it was written",
                                   hint="the overwrite would drop those rows; write it again on main")


def rewrite_deletes(table: Table, base: TableMetadata, head: Snapshot | None, source: Snapshot, removed: set[str],
                    commit_id: str, first_index: int, snapshot_id: int,
                    written: list[str]) -> tuple[list[ManifestFile], set[str]]:
    """The head's data manifests that hold a removed file, rewritten (``ManifestFilterManager``);
    returns the new manifests and the paths of those they replace. Every removed file must be
    live on the head (Java's ``failMissingDeletePaths``)."""
    if not removed:
        return [], set()
    manifests = [m for m in (manifests_of(base, head, table.io) if head is not None else [])
                 if m.content == ManifestContent.DATA]
    by_manifest: dict[str, tuple[ManifestFile, list[ManifestEntry]]] = {}
    found: set[str] = set()
    for m, e in iter_entries(base, table.io, manifests, live_only=True):
        by_manifest.setdefault(m.manifest_path, (m, []))[1].append(e)
        if e.data_file.file_path in removed:
            found.add(e.data_file.file_path)
    missing = sorted(removed - found)
    if missing:
        raise RefusedError(f"cannot cherry-pick dynamic overwrite {source.snapshot_id}: {len(missing)} of the files "
                           f"it deletes are not in main any more ({missing[0]}, ...)",
                           hint="Java refuses this too: 'Missing required files to delete'")
    new: list[ManifestFile] = []
    replaced: set[str] = set()
    index = first_index
    for m, entries in by_manifest.values():
        if not any(e.data_file.file_path in removed for e in entries):
            continue
        spec = base.spec_by_id(m.partition_spec_id)
        assert spec is not None
        rows = [ManifestEntry(ManifestEntryStatus.DELETED, snapshot_id, e.sequence_number, e.file_sequence_number,
                              e.data_file) if e.data_file.file_path in removed else as_existing(e) for e in entries]
        result = write_manifest(rows, schema=base.schema(), spec=spec, partition_type=base.partition_type(spec),
                                format_version=base.format_version, content=ManifestContent.DATA,
                                snapshot_id=snapshot_id)
        path = manifest_path(table.metadata_folder, commit_id, index)
        index += 1
        written.append(path)
        table.io.write(path, result.data)
        # A new manifest of this snapshot (its sequence number assigned at commit); no first_row_id: a
        # rewritten data manifest gets a new range, as in Java (its EXISTING entries keep their own).
        new.append(result.to_manifest_file(path, len(result.data), m.partition_spec_id, snapshot_id, UNASSIGNED_SEQ))
        replaced.add(m.manifest_path)
    return new, replaced


def would_rewrite(table: Table, base: TableMetadata, head: Snapshot | None, removed: set[str]) -> int:
    """How many head manifests a pick removing ``removed`` rewrites (for a dry run)."""
    if not removed or head is None:
        return 0
    manifests = [m for m in manifests_of(base, head, table.io) if m.content == ManifestContent.DATA]
    return len({m.manifest_path for m, e in iter_entries(base, table.io, manifests, live_only=True)
                if e.data_file.file_path in removed})


__all__ = ["SourceFiles", "check_replaced_partitions", "rewrite_deletes", "source_files", "would_rewrite"]
