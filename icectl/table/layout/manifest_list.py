"""Manifest lists (format v1-v3): a snapshot is a list of manifests (spec "Manifest Lists").

The new snapshot's manifests (written before the commit, their sequence numbers unassigned)
come first, then every manifest of the branch head that they do not replace, as Java's
``SnapshotProducer`` orders them. The list writer assigns the snapshot's sequence number to the
new manifests and, in v3, ``first_row_id`` ranges to data manifests that lack one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import ClassVar

from icectl.codec.manifest_writer import write_manifest_list
from icectl.spec.manifest import ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO, join
from icectl.table.layout import Attempt, SnapshotLayout, WrittenIndex
from icectl.table.scan import manifests_of

HeadManifests = Callable[[TableMetadata, Snapshot], list[ManifestFile]]


def manifest_list_path(metadata_dir: str, snapshot_id: int, attempt: int, commit_id: str) -> str:
    """Java's name for a snapshot's manifest list: ``snap-<id>-<attempt>-<commit uuid>.avro``."""
    return join(metadata_dir, f"snap-{snapshot_id}-{attempt}-{commit_id}.avro")


def manifest_path(metadata_dir: str, commit_id: str, index: int) -> str:
    """Java's name for the ``index``-th manifest a commit writes: ``<commit uuid>-m<index>.avro``."""
    return join(metadata_dir, f"{commit_id}-m{index}.avro")


@dataclass
class ManifestListLayout(SnapshotLayout):
    """The head's manifests, minus ``replaced``, after ``added``."""

    snapshot_field: ClassVar[str] = "manifest_list"

    commit_id: str  # names the commit's manifests and lists (a uuid)
    added: Sequence[ManifestFile]  # this snapshot's manifests, written before the commit
    replaced: Collection[str] = ()  # paths of the head's manifests the added ones replace
    # The head's manifests; the default reads them. An operation passes its own to check them
    # (and raise when its change no longer applies) or to reuse what it read when planning.
    head_manifests: HeadManifests | None = None

    def write(self, io: FileIO, attempt: Attempt) -> WrittenIndex:
        base, head = attempt.base, attempt.head
        if head is None:
            current: list[ManifestFile] = []
        elif self.head_manifests is not None:
            current = self.head_manifests(base, head)
        else:
            current = manifests_of(base, head, io)
        kept = [m for m in current if m.manifest_path not in self.replaced]
        result = write_manifest_list([*self.added, *kept], format_version=base.format_version,
                                     snapshot_id=attempt.snapshot_id, parent_snapshot_id=attempt.parent_id,
                                     sequence_number=attempt.sequence_number, first_row_id=attempt.first_row_id)
        path = manifest_list_path(attempt.metadata_dir, attempt.snapshot_id, attempt.number, self.commit_id)
        io.write(path, result.data)
        return WrittenIndex(path, result.added_rows, len(kept))
