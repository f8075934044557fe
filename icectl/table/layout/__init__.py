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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from icectl.errors import CommitConflictError, IcectlError
from icectl.spec.manifest import DataFile
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
    files: tuple[str, ...] = ()  # other files the attempt wrote (manifests rewritten for its deletes)
    # Delete files the attempt dropped beyond ``Deletes.files`` (``Deletes.drop_older``), with their
    # partition spec ids: the snapshot's summary counts them as removed.
    dropped: tuple[tuple[int, DataFile], ...] = ()


DeletedKey = tuple[str, int, str | None]  # (file_path, content, referenced_data_file): a DV shares its Puffin path


def deleted_key(f: DataFile) -> DeletedKey:
    """What names one content file among a snapshot's entries (a deletion vector by the data file it is for)."""
    return f.file_path, int(f.content), f.referenced_data_file


def _no_longer_live(missing: list[str]) -> IcectlError:
    return CommitConflictError(f"{len(missing)} file(s) to delete are no longer live in the branch head "
                               f"({missing[0]}, ...)", hint="another commit changed them; run the command again")


@dataclass
class Deletes:
    """The data and delete files a snapshot removes (Java's ``deleteFile``): each layout marks them
    DELETED on the branch head of every attempt; all must be live there, else ``missing(paths)``
    is raised (default: a commit conflict)."""

    files: Sequence[DataFile] = ()
    missing: Callable[[list[str]], IcectlError] = field(default=_no_longer_live)
    # Java's ``MergingSnapshotProducer.apply`` for a commit that deletes data files
    # (``dropDeleteFilesOlderThan``): also drop every live delete file whose data sequence number is
    # above 0 and below the smallest of the new snapshot's data manifests' (and the base's last
    # sequence number): it can apply to no live row. In the delete manifests Java reads for them:
    # every one; with delete files among ``files``, the manifests they were read from
    # (``delete_manifests``) when the head still lists them all, else those whose partition
    # summaries may hold one of theirs. v1-v3 manifest lists only.
    drop_older: bool = False
    # Where each delete file among ``files`` was read (Java's ``manifestLocation``); None: unknown.
    delete_manifests: frozenset[str] | None = None

    def keys(self) -> dict[DeletedKey, DataFile]:
        return {deleted_key(f): f for f in self.files}


class SnapshotLayout(ABC):
    """Writes the file that lists a new snapshot's content, once per commit attempt."""

    snapshot_field: ClassVar[str]  # the Snapshot field naming that file

    @abstractmethod
    def write(self, io: FileIO, attempt: Attempt, deletes: Deletes | None = None) -> WrittenIndex:
        """Write the list or root of the new snapshot on ``attempt.head``, with ``deletes`` marked
        DELETED; raise to give up (a conflict when the change no longer applies to that head)."""

    @abstractmethod
    def write_appended(self, io: FileIO, md: TableMetadata, folder: str, files: dict[int, list[DataFile]],
                       snapshot_id: int, written: list[str], *, data_sequence_number: int | None = None) -> None:
        """Write what an append of ``files`` (partition spec id -> data files) needs before the
        commit and list it in this layout (v1-v3: one manifest of ADDED entries per spec; v4: root
        entries, or new leaves past write.v4.root-max-added-files). ``data_sequence_number``: the
        files' data sequence number when it is not the new snapshot's (Java's
        ``RewriteFiles.dataSequenceNumber``: a rewrite keeps the starting snapshot's)."""

    @abstractmethod
    def appended_paths(self, md: TableMetadata, folder: str, files: dict[int, list[DataFile]], snapshot_id: int,
                       more_manifests: int = 0) -> list[str]:
        """What :meth:`write_appended` and :meth:`write` would write, for a dry run."""
