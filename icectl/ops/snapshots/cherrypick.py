"""The files of a cherry-pick that writes a new snapshot (Java's ``CherryPickOperation`` as the
``MergingSnapshotProducer`` it is), for format v1-v3:

* the data files the picked snapshot added (``Snapshot.addedDataFiles``: ADDED entries of the data
  manifests it wrote) go into one new manifest per partition spec, without their ``first_row_id``
  (``suppressFirstRowId``: the new snapshot assigns row ids again);
* for a dynamic overwrite (``replace-partitions=true``), the data files it removed
  (``removedDataFiles``) must all still be live on main's head ("Missing required files to
  delete"), no snapshot since its parent may have added a file to a partition it replaces
  ("Cannot cherry-pick replace partitions with changed partition"), and each head manifest holding
  one of them is rewritten as ``ManifestFilterManager`` does, by the snapshot writer's layout
  (:class:`icectl.table.layout.Deletes`, :mod:`icectl.table.layout.manifest_list`).

The added files are written as any append's are (the layout's ``write_appended``); on a v4
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

from icectl.errors import RefusedError
from icectl.spec.manifest import DataFile, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot, ancestors_of
from icectl.table import Table
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


__all__ = ["SourceFiles", "check_replaced_partitions", "source_files"]
