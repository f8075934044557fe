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
from typing import Any

from icectl.catalog.hadoop_layout import version_of
from icectl.errors import CorruptInputError, IcectlError, NotFoundError
from icectl.spec.metadata import TableMetadata, metadata_json
from icectl.storage import FileIO, parent
from icectl.table.delete_fence import file_identity
from icectl.threads import STAT_WORKERS, ordered_map


@dataclass
class Leftovers:
    """Snapshots earlier metadata files have and the current one lacks, with the metadata that
    describes each (its format version, specs and statistics), and why log entries were skipped."""

    snapshots: dict[int, TableMetadata] = field(default_factory=dict)  # snapshot id -> earlier metadata
    notes: list[str] = field(default_factory=list)
    on_disk: set[int] = field(default_factory=set)  # those whose manifest list (v4: root) still exists
    examined: set[str] = field(default_factory=set)  # earlier metadata files looked at (file_identity)
    heads: dict[str, bool] = field(default_factory=dict)  # manifest list or root -> still exists

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
    return a is not None and b is not None and file_identity(a) == file_identity(b)


def leftover_snapshots(io: FileIO, current: TableMetadata, current_location: str,
                       also: Leftovers | None = None, ignore: frozenset[int] = frozenset()) -> Leftovers:
    """The snapshots earlier metadata files of this table hold and ``current`` lacks, as far as
    their manifest list (v4: root) is still on disk (else they reach nothing that can be found).

    ``also``: leftovers found before (on the base of a commit); kept when ``current`` still lacks
    their snapshots, since the commit may have trimmed (or deleted) the metadata files naming them;
    the files it examined are not read again. ``ignore``: snapshot ids that are no leftovers (the
    ones this run expired itself: their files are judged with the run's own).

    Each earlier file is decoded as JSON and looked at first; only one that names a snapshot the
    current metadata lacks and whose manifest list still exists is built into the model (after a
    clean expiry, none is: this keeps a run on a table with a long metadata log cheap).
    """
    out = Leftovers(notes=list(also.notes) if also else [])
    if also is not None:
        out.snapshots.update({i: md for i, md in also.snapshots.items()
                              if current.snapshot_by_id(i) is None and i not in ignore})
        out.examined |= also.examined
        out.heads.update(also.heads)
    if current.table_uuid is None or current.location is None:
        return out  # nothing tells an earlier file of this table from another table's: trust none
    # Identities, not text: a table addressed by a relative path (./warehouse/db/t) has absolute
    # metadata-log entries.
    folder = file_identity(parent(current_location))
    current_file = file_identity(current_location)
    current_version = version_of(current_location)
    for entry in reversed(current.metadata_log):  # newest first: a snapshot's newest description wins
        path = entry.metadata_file
        ident = file_identity(path)
        if ident == current_file or ident in out.examined:
            continue
        out.examined.add(ident)
        if file_identity(parent(path)) != folder:
            out.notes.append(f"skipped metadata-log entry {path}: not in the table's metadata folder")
            continue
        version = version_of(path)
        if current_version is not None and version is not None and version >= current_version:
            out.notes.append(f"skipped metadata-log entry {path}: not older than the current metadata")
            continue
        try:
            doc = metadata_json(io.read(path))
            if not isinstance(doc, dict):
                raise CorruptInputError("table metadata is not a JSON object")
            if doc.get("table-uuid") != current.table_uuid or not isinstance(doc.get("location"), str) \
                    or not _same_location(doc["location"], current.location):
                out.notes.append(f"skipped metadata-log entry {path}: another table's metadata "
                                 f"(table-uuid {doc.get('table-uuid')}, location {doc.get('location')})")
                continue
            if not _names_present_leftover(io, doc, current, out, ignore):
                continue
            md = TableMetadata.from_json(doc)
        except NotFoundError:
            continue  # removed by delete-after-commit or by hand: nothing to learn from it
        except (IcectlError, OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError,
                OverflowError) as e:
            # Garbage in the log must not stop the expiry it only helps to finish.
            why = e.one_line() if isinstance(e, IcectlError) else f"{type(e).__name__}: {e}"
            out.notes.append(f"skipped metadata-log entry {path}: unreadable ({why[:200]})")
            continue
        for s in md.snapshots:
            if current.snapshot_by_id(s.snapshot_id) is None and s.snapshot_id not in ignore:
                out.snapshots.setdefault(s.snapshot_id, md)
    out.notes = list(dict.fromkeys(out.notes))  # the same entry seen before and after a commit
    return out


def _names_present_leftover(io: FileIO, doc: dict[str, Any], current: TableMetadata, out: Leftovers,
                            ignore: frozenset[int]) -> bool:
    """Whether the raw metadata ``doc`` has a snapshot ``current`` lacks whose manifest list or
    root is still there (a v1 snapshot with inline ``manifests`` always counts)."""
    heads: list[str] = []
    for s in doc.get("snapshots") or []:
        sid = s.get("snapshot-id") if isinstance(s, dict) else None
        if not isinstance(sid, int) or current.snapshot_by_id(sid) is not None or sid in out.snapshots \
                or sid in ignore:
            continue
        head = s.get("root-manifest") or s.get("manifest-list")
        if not isinstance(head, str):
            return True
        heads.append(head)
    todo = [h for h in dict.fromkeys(heads) if h not in out.heads]
    if todo:
        out.heads.update(zip(todo, ordered_map(lambda h: _exists(io, h), todo, workers=STAT_WORKERS), strict=True))
    return any(out.heads[h] for h in heads)


def _exists(io: FileIO, path: str) -> bool:
    try:
        return io.exists(path)
    except IcectlError:
        return True  # cannot tell: build the model and let the reading path note the failure
