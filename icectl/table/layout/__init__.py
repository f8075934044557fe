"""Snapshot layouts: how a snapshot lists its content files.

Format versions 1 to 3 list a snapshot's manifests in a manifest list
(:mod:`icectl.table.layout.manifest_list`); icectl's format v4 lists them, and files
directly, in a root manifest (:mod:`icectl.table.layout.root`, layout page section 8).
A layout writes that one file for one commit attempt, on the branch head as the fresh base has
it; :func:`icectl.table.snapshot_writer.write_snapshot` does everything else (the ``Snapshot``,
its summary, the commit, the cleanup), the same way for both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO


@dataclass(frozen=True)
class Attempt:
    """Where one commit attempt builds: the fresh base, the branch head, the new snapshot's numbers."""

    table: str  # the table's identifier, for messages
    base: TableMetadata
    head: Snapshot | None  # None: the branch's first snapshot
    snapshot_id: int
    sequence_number: int  # 0 in v1
    first_row_id: int | None  # the snapshot's first-row-id (v3+)
    number: int  # 1-based
    metadata_dir: str

    @property
    def parent_id(self) -> int | None:
        return self.head.snapshot_id if self.head is not None else None


@dataclass(frozen=True)
class WrittenIndex:
    """The manifest list or root written for one attempt."""

    path: str
    added_rows: int | None  # row ids it assigned (v3+): the snapshot's added-rows
    kept_manifests: int  # manifests (v4: live leaves) of the head carried over unchanged


class SnapshotLayout(ABC):
    """Writes the file that lists a new snapshot's content, once per commit attempt."""

    snapshot_field: ClassVar[str]  # the Snapshot field naming that file

    @abstractmethod
    def write(self, io: FileIO, attempt: Attempt) -> WrittenIndex:
        """Write the list or root of the new snapshot on ``attempt.head``; raise to give up
        (a conflict when the change no longer applies to that head)."""
