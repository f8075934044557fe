"""What earlier expiries of a table removed from its metadata but left on disk.

An expiry commits first and deletes afterwards; a process killed in between (or a failed
cleanup) leaves the expired snapshots' files behind, and nothing in the current metadata names
them any more. The metadata log still does: an earlier metadata file holds the snapshots the
current one lacks. :func:`leftover_snapshots` collects them, so that expire can delete what they
reach and no retained snapshot reaches, through its own path (fence, post-commit re-read,
commit-lost check).

Only earlier metadata files that can be trusted to be this table's are read: named by the current
metadata's log, in the same folder as the current metadata file, older by version number, holding
the same ``table-uuid`` and ``location``. Anything else in the log (another table's metadata, a
data file, garbage) is skipped with a note; a missing file is skipped silently (normal once
``write.metadata.delete-after-commit.enabled`` removed it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from icectl.catalog.hadoop import version_of
from icectl.errors import IcectlError, NotFoundError
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.storage import FileIO, file_key, parent


@dataclass
class Leftovers:
    """Snapshots earlier metadata files have and the current one lacks, with the metadata that
    describes each (its format version, specs and statistics), and why log entries were skipped."""

    snapshots: dict[int, TableMetadata] = field(default_factory=dict)  # snapshot id -> earlier metadata
    notes: list[str] = field(default_factory=list)
    on_disk: set[int] = field(default_factory=set)  # those whose manifest list (v4: root) still exists

    def by_metadata(self) -> list[tuple[TableMetadata, list[int]]]:
        """The snapshot ids grouped by the metadata they were found in."""
        groups: dict[int, tuple[TableMetadata, list[int]]] = {}
        for sid, md in self.snapshots.items():
            groups.setdefault(id(md), (md, []))[1].append(sid)
        return list(groups.values())

    @property
    def ids(self) -> list[int]:
        return sorted(self.snapshots)


def _same_location(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and file_key(a).rstrip("/") == file_key(b).rstrip("/")


def leftover_snapshots(io: FileIO, current: TableMetadata, current_location: str,
                       also: Leftovers | None = None) -> Leftovers:
    """The snapshots earlier metadata files of this table hold and ``current`` lacks.

    ``also``: leftovers found before (on the base of a commit); kept when ``current`` still lacks
    their snapshots, since the commit may have trimmed (or deleted) the metadata files naming them.
    """
    out = Leftovers(notes=list(also.notes) if also else [])
    if also is not None:
        out.snapshots.update({i: md for i, md in also.snapshots.items() if current.snapshot_by_id(i) is None})
    if current.table_uuid is None or current.location is None:
        return out  # nothing tells an earlier file of this table from another table's: trust none
    folder = file_key(parent(current_location))
    current_version = version_of(current_location)
    for entry in reversed(current.metadata_log):  # newest first: a snapshot's newest description wins
        path = entry.metadata_file
        if file_key(path) == file_key(current_location):
            continue
        if file_key(parent(path)) != folder:
            out.notes.append(f"skipped metadata-log entry {path}: not in the table's metadata folder")
            continue
        version = version_of(path)
        if current_version is not None and version is not None and version >= current_version:
            out.notes.append(f"skipped metadata-log entry {path}: not older than the current metadata")
            continue
        try:
            md = parse_table_metadata(io.read(path))
        except NotFoundError:
            continue  # removed by delete-after-commit or by hand: nothing to learn from it
        except (IcectlError, OSError, ValueError, TypeError, KeyError, RecursionError, OverflowError) as e:
            # Garbage in the log must not stop the expiry it only helps to finish.
            why = e.one_line() if isinstance(e, IcectlError) else f"{type(e).__name__}: {e}"
            out.notes.append(f"skipped metadata-log entry {path}: unreadable ({why[:200]})")
            continue
        if md.table_uuid != current.table_uuid or not _same_location(md.location, current.location):
            out.notes.append(f"skipped metadata-log entry {path}: another table's metadata "
                             f"(table-uuid {md.table_uuid}, location {md.location})")
            continue
        for s in md.snapshots:
            if current.snapshot_by_id(s.snapshot_id) is None:
                out.snapshots.setdefault(s.snapshot_id, md)
    out.notes = list(dict.fromkeys(out.notes))  # the same entry seen before and after a commit
    return out
