"""Random table histories for expire-snapshots tests, with an independent model of every file.

A :class:`HistoryBuilder` makes a real file-system Iceberg table (format v2 or v3) with icectl's
own writers (``write_manifest``, ``write_manifest_list``, ``commit``/``add_snapshot``) and no
Spark, so a property test can build hundreds of histories in seconds. Alongside it keeps its
OWN model: for each snapshot its manifest list, its manifests and each manifest's entries
(status, snapshot id, sequence numbers), hence its live data and delete files; the refs; and a
category for every file written. Tests judge icectl's expiry against this model, never against
icectl's readers.

Operations (:data:`Op`) are small frozen dataclasses whose choices are plain integers resolved
against the table's state at the time they run (``pick % len(choices)``), so any sequence is
valid and hypothesis shrinks them freely; an operation that does not apply (a delete on an
empty branch) is recorded as skipped. Timestamps come from a model clock in whole ``UNIT_MS``
steps, so a policy's cutoffs can be drawn exactly on, just before or just after a snapshot.

Two writer habits are modelled too. Paths are written in one of several spellings of the same
local file (``/t/x``, ``file:/t/x`` as Spark's Hadoop tables write them, ``file:///t/x``,
``/t/data/../x``), and a manifest compaction may re-spell the paths it copies; the model
identifies files by :func:`physical` path, so a file named two ways is one file. With
``checksums`` every file the builder writes gets the ``.<name>.crc`` sidecar Hadoop's local file
system writes next to it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest, write_manifest_list
from icectl.config import Config
from icectl.ops.create.metadata import new_table_metadata
from icectl.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import LONG, STRING, NestedField, Schema
from icectl.spec.snapshots import (
    MAIN_BRANCH,
    PartitionStatisticsFile,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    StatisticsFile,
)
from icectl.spec.updates import set_properties, snapshot_change
from icectl.table import Table, load_table
from icectl.table.commit import commit, create_table
from support.forge import forge_commit

T0_MS = 1_700_000_000_000
UNIT_MS = 60_000  # one clock step; every timestamp is T0_MS + k * UNIT_MS

# File categories of the model; CATEGORY_TO_RESULT: Spark's expire_snapshots output names (deleted_<name>_count).
MANIFEST_LIST = "manifest_list"
MANIFEST = "manifest"
DATA = "data"
POSITION_DELETE = "position_delete"
STATISTICS = "statistics"
CATEGORY_TO_RESULT = {MANIFEST_LIST: "manifest_lists", MANIFEST: "manifest_files", DATA: "data_files",
                      POSITION_DELETE: "position_delete_files", STATISTICS: "statistics_files"}

ADDED, EXISTING, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED

_SCHEMA = Schema((NestedField(1, "id", LONG, required=True), NestedField(2, "data", STRING)))
_REF_NAMES = ("b1", "b2", "b3", "t1", "t2", "t3")  # b* become branches, t* tags

# Spellings of one local file: as given, Hadoop's "file:/x", a full URI, and a non-normal path.
SPELLINGS = ("plain", "file:", "file://", "dotdot")


def physical(path: str) -> str:
    """The local file a path names, independent of icectl's storage helpers."""
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            path = path[len(prefix):]
            break
    return os.path.normpath(path)


def spell(path: str, style: str) -> str:
    """``path`` (absolute, normal) in spelling ``style``."""
    if style == "file:":
        return "file:" + path
    if style == "file://":
        return "file://" + path
    if style == "dotdot":  # /t/data/x -> /t/data/../data/x
        head, tail = os.path.split(path)
        return f"{head}/../{os.path.basename(head)}/{tail}"
    return path


def checksum_sidecar(path: str) -> str:
    """Hadoop's local file system checksum file for ``path``."""
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")


# --------------------------------------------------------------------------- operations


@dataclass(frozen=True)
class Append:
    """Fast append of ``files`` new data files on a branch (one new manifest)."""

    branch: int = 0
    files: int = 1
    gap: int = 1  # clock steps before this commit


@dataclass(frozen=True)
class Delete:
    """Remove one live data file: its manifest is rewritten with it DELETED, the rest EXISTING."""

    branch: int = 0
    pick: int = 0
    gap: int = 1


@dataclass(frozen=True)
class Overwrite:
    """Delete one live data file and add ``files`` new ones in one snapshot."""

    branch: int = 0
    pick: int = 0
    files: int = 1
    gap: int = 1


@dataclass(frozen=True)
class RewriteFiles:
    """Data compaction (operation ``replace``): ``count`` live files become one new file, or the
    same path re-added (``same_path``: the remove-and-re-add case of apache/iceberg#17304)."""

    branch: int = 0
    pick: int = 0
    count: int = 2
    same_path: bool = False
    gap: int = 1


@dataclass(frozen=True)
class AddDeletes:
    """Row-level deletes on ``count`` live data files: v2 one position-delete file per data file;
    v3 deletion vectors sharing one Puffin file, replacing a data file's previous DV."""

    branch: int = 0
    pick: int = 0
    count: int = 1
    gap: int = 1


@dataclass(frozen=True)
class CompactManifests:
    """Rewrite all data manifests (and, with ``deletes``, all delete manifests) into one each,
    live entries as EXISTING (operation ``replace``)."""

    branch: int = 0
    deletes: bool = False
    respell: int = 0  # > 0: copy entries with their paths in SPELLINGS[respell % 4] (another writer's habit)
    gap: int = 1


@dataclass(frozen=True)
class SetRef:
    """Create a branch or tag (``_REF_NAMES[name]``) at any snapshot, or move an existing one."""

    name: int = 0
    at: int = 0
    gap: int = 1


@dataclass(frozen=True)
class RemoveRef:
    """Drop a branch or tag other than main."""

    pick: int = 0
    gap: int = 1


@dataclass(frozen=True)
class Rollback:
    """Move main to its ``steps``-th ancestor; the snapshots after it lose main's reference."""

    steps: int = 1
    gap: int = 1


@dataclass(frozen=True)
class SetStatistics:
    """Attach a (fake) statistics or partition-statistics file to a snapshot, replacing any."""

    at: int = 0
    partition: bool = False
    gap: int = 1


@dataclass(frozen=True)
class Orphan:
    """A file in data/ or metadata/ that no snapshot references (a failed writer's leftover)."""

    in_metadata: bool = False
    gap: int = 0


Op = (Append | Delete | Overwrite | RewriteFiles | AddDeletes | CompactManifests | SetRef | RemoveRef | Rollback
      | SetStatistics | Orphan)


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class ModelEntry:
    """One manifest entry as the model wrote it (tracking values after inheritance)."""

    path: str
    content: DataFileContent
    status: ManifestEntryStatus
    snapshot_id: int
    data_seq: int
    file_seq: int
    record_count: int = 1
    first_row_id: int | None = None
    referenced_data_file: str | None = None  # DVs: the data file it deletes from
    content_offset: int | None = None
    content_size: int | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        # DVs of one Puffin file share a path: the data file they apply to tells them apart.
        return physical(self.path), physical(self.referenced_data_file) if self.referenced_data_file else None

    @property
    def is_live(self) -> bool:
        return self.status != DELETED

    def to_icectl(self, new_snapshot_id: int) -> ManifestEntry:
        """As written: ADDED entries of the committing snapshot inherit their sequence numbers."""
        inherit = self.status == ADDED and self.snapshot_id == new_snapshot_id
        df = DataFile(
            content=self.content, file_path=self.path,
            file_format="PUFFIN" if self.content_offset is not None else "PARQUET",
            partition=(), record_count=self.record_count, file_size_in_bytes=16,
            first_row_id=self.first_row_id if self.content == DataFileContent.DATA else None,
            referenced_data_file=self.referenced_data_file, content_offset=self.content_offset,
            content_size_in_bytes=self.content_size)
        return ManifestEntry(self.status, self.snapshot_id, None if inherit else self.data_seq,
                             None if inherit else self.file_seq, df)


@dataclass(frozen=True)
class ModelManifest:
    path: str
    content: ManifestContent
    entries: tuple[ModelEntry, ...]
    info: ManifestFile  # the manifest-list row as written (sequence numbers resolved)

    def live(self) -> Iterator[ModelEntry]:
        return (e for e in self.entries if e.is_live)


@dataclass(frozen=True)
class ModelSnapshot:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int
    sequence_number: int
    operation: str
    manifest_list: str
    manifests: tuple[str, ...]


@dataclass(frozen=True)
class ModelRef:
    snapshot_id: int
    type: str  # "branch" | "tag"
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None

    def to_icectl(self) -> SnapshotRef:
        return SnapshotRef(self.snapshot_id, "branch" if self.type == "branch" else "tag",
                           self.min_snapshots_to_keep, self.max_snapshot_age_ms, self.max_ref_age_ms)


@dataclass
class HistoryBuilder:
    """A table under ``table_dir`` and the model of everything written to it."""

    table_dir: Path
    format_version: int = 2
    spelling: str = "plain"  # how this writer spells the paths it writes (SPELLINGS)
    checksums: bool = False  # write Hadoop's .<name>.crc next to every file written
    clock_ms: int = T0_MS
    snapshots: dict[int, ModelSnapshot] = field(default_factory=dict)  # in commit order
    manifests: dict[str, ModelManifest] = field(default_factory=dict)
    refs: dict[str, ModelRef] = field(default_factory=dict)
    properties: dict[str, str] = field(default_factory=dict)  # set by configure (the table starts with zstd)
    categories: dict[str, str] = field(default_factory=dict)  # physical path -> category, every file referenced
    statistics: dict[int, str] = field(default_factory=dict)  # snapshot id -> statistics path
    partition_statistics: dict[int, str] = field(default_factory=dict)
    orphans: set[str] = field(default_factory=set)  # physical paths written, never referenced
    applied: list[str] = field(default_factory=list)  # what each op did, for failure reports
    _counter: int = 0  # file names
    _last_snapshot_id: int = 1000  # ids 1001, 1002, ... in commit order, never reused after expiry

    def __post_init__(self) -> None:
        self.table_dir = self.table_dir.resolve()
        # Spark's Hadoop tables say file:/...; the location never uses the non-normal spelling.
        location = spell(str(self.table_dir), self.spelling if self.spelling != "dotdot" else "plain")
        md = new_table_metadata(schema=_SCHEMA, location=location, partition_spec=None,
                                sort_order=None, properties={}, format_version=self.format_version,
                                table_uuid="00000000-0000-4000-8000-000000000000", now_ms=self.clock_ms)
        create_table(str(self.table_dir), None, md)
        self.table: Table = load_table(str(self.table_dir), config=Config(catalogs={}))

    # ------------------------------------------------------------------ model queries

    def reachable(self, snapshot_id: int) -> dict[str, str]:
        """Physical path -> category of every file the model says ``snapshot_id`` reaches (live
        entries only, as Iceberg's reachable cleanup counts them), including its statistics files."""
        snap = self.snapshots[snapshot_id]
        out = {physical(snap.manifest_list): MANIFEST_LIST}
        for mpath in snap.manifests:
            out[physical(mpath)] = MANIFEST
            for e in self.manifests[mpath].live():
                out[physical(e.path)] = DATA if e.content == DataFileContent.DATA else POSITION_DELETE
        for stats in (self.statistics, self.partition_statistics):
            if snapshot_id in stats:
                out[physical(stats[snapshot_id])] = STATISTICS
        return out

    def reachable_from(self, snapshot_ids: Iterable[int]) -> dict[str, str]:
        out: dict[str, str] = {}
        for sid in snapshot_ids:
            out.update(self.reachable(sid))
        return out

    def live_files(self, snapshot_id: int) -> tuple[set[str], set[str]]:
        """The physical paths of ``snapshot_id``'s live data files and live delete files."""
        data = {physical(e.path) for e in self.live_entries(snapshot_id, DataFileContent.DATA)}
        return data, {physical(e.path) for e in self.live_entries(snapshot_id, DataFileContent.POSITION_DELETES)}

    def live_entries(self, snapshot_id: int, content: DataFileContent) -> list[ModelEntry]:
        snap = self.snapshots[snapshot_id]
        return [e for m in snap.manifests for e in self.manifests[m].live() if e.content == content]

    def ancestors(self, snapshot_id: int) -> list[int]:
        """``snapshot_id`` and its ancestors, newest first (the model's parent links)."""
        out = []
        current: int | None = snapshot_id
        while current is not None and current in self.snapshots:
            out.append(current)
            current = self.snapshots[current].parent_id
        return out

    def branches(self) -> list[str]:
        return sorted((n for n, r in self.refs.items() if r.type == "branch"), key=lambda n: (n != MAIN_BRANCH, n))

    def describe(self) -> str:
        return "\n".join(self.applied)

    # ------------------------------------------------------------------ running ops

    def apply(self, op: Op) -> None:
        self.clock_ms += op.gap * UNIT_MS
        handler = {Append: self._append, Delete: self._delete, Overwrite: self._overwrite,
                   RewriteFiles: self._rewrite_files, AddDeletes: self._add_deletes,
                   CompactManifests: self._compact, SetRef: self._set_ref, RemoveRef: self._remove_ref,
                   Rollback: self._rollback, SetStatistics: self._set_statistics, Orphan: self._orphan}[type(op)]
        what = handler(op)  # type: ignore[operator]
        self.applied.append(f"{op!r} -> {what or 'skipped'}")

    def _name(self, stem: str) -> str:
        self._counter += 1
        return f"{self._counter:04d}-{stem}"

    def _write(self, subdir: str, name: str, data: bytes) -> str:
        """Write a file (and its checksum sidecar); return its path in this writer's spelling."""
        path = self.table_dir / subdir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if self.checksums:
            Path(checksum_sidecar(str(path))).write_bytes(b"crc")
        return spell(str(path), self.spelling)

    def _write_file(self, subdir: str, name: str) -> str:
        return self._write(subdir, name, name.encode())  # unique content; expire never opens data files

    def _branch(self, pick: int) -> str:
        names = self.branches()
        return names[pick % len(names)] if names else MAIN_BRANCH

    def _head(self, branch: str) -> int | None:
        ref = self.refs.get(branch)
        return ref.snapshot_id if ref else None

    def _new_entry(self, path: str, content: DataFileContent, sid: int, seq: int, **kw: object) -> ModelEntry:
        return ModelEntry(path, content, ADDED, sid, seq, seq, **kw)  # type: ignore[arg-type]

    def _next_ids(self) -> tuple[int, int]:
        self._last_snapshot_id += 1
        return self._last_snapshot_id, self.table.metadata.last_sequence_number + 1

    def _remove(self, head: int | None, keys: set[tuple[str, str | None]], sid: int, seq: int
                ) -> tuple[list[tuple[ManifestContent, list[ModelEntry]]], list[str]]:
        """Java's MergingSnapshotProducer filter: each manifest of ``head`` holding a live entry in
        ``keys`` is rewritten with that entry DELETED (by ``sid``, sequence numbers kept) and the
        other live entries EXISTING; earlier DELETED entries are dropped. Returns the new
        manifests' entries and the manifests kept as they are."""
        rewritten: list[tuple[ManifestContent, list[ModelEntry]]] = []
        kept: list[str] = []
        for mpath in self.snapshots[head].manifests if head is not None else ():
            m = self.manifests[mpath]
            if not any(e.key in keys for e in m.live()):
                kept.append(mpath)
                continue
            entries = [dataclasses.replace(e, status=DELETED, snapshot_id=sid) if e.key in keys
                       else dataclasses.replace(e, status=EXISTING) for e in m.live()]
            rewritten.append((m.content, entries))
        return rewritten, kept

    def _commit_snapshot(self, branch: str, operation: str, sid: int, seq: int,
                         new: list[tuple[ManifestContent, list[ModelEntry]]], kept: list[str]) -> str:
        """Write ``new`` manifests and the manifest list (new first, then ``kept``), commit the
        snapshot on ``branch`` and record it in the model."""
        md = self.table.metadata
        v = self.format_version
        written: list[tuple[str, ManifestContent, list[ModelEntry], ManifestFile]] = []
        for i, (content, entries) in enumerate(new):
            spec = md.spec()
            result = write_manifest([e.to_icectl(sid) for e in entries], schema=md.schema(), spec=spec,
                                    partition_type=spec.partition_type(md.schema()), format_version=v,
                                    content=content, snapshot_id=sid)
            path = self._write("metadata", f"{self._name(f'm{i}')}-{sid}.avro", result.data)
            written.append((path, content, entries,
                            result.to_manifest_file(path, len(result.data), spec.spec_id, sid, UNASSIGNED_SEQ)))
        parent = self._head(branch)
        first_row_id = md.next_row_id if v >= 3 else None
        listed = [w[3] for w in written] + [self.manifests[p].info for p in kept]
        ml = write_manifest_list(listed, format_version=v, snapshot_id=sid, parent_snapshot_id=parent,
                                 sequence_number=seq, first_row_id=first_row_id)
        list_path = self._write("metadata", f"snap-{sid}-1-{self._name('list')}.avro", ml.data)
        snapshot = Snapshot(snapshot_id=sid, timestamp_ms=self.clock_ms, parent_snapshot_id=parent,
                            sequence_number=seq, manifest_list=list_path, summary={"operation": operation},
                            schema_id=md.current_schema_id, first_row_id=first_row_id, added_rows=ml.added_rows)
        commit(self.table, lambda base: snapshot_change(base, snapshot, branch=branch))
        # The model, only once the commit succeeded.
        for (path, content, entries, _), info in zip(written, ml.manifests, strict=False):
            self.manifests[path] = ModelManifest(path, content, tuple(_assign_row_ids(entries, info)), info)
            self.categories[physical(path)] = MANIFEST
            for e in entries:
                if e.status == ADDED:
                    self.categories[physical(e.path)] = DATA if e.content == DataFileContent.DATA else POSITION_DELETE
        self.categories[physical(list_path)] = MANIFEST_LIST
        self.snapshots[sid] = ModelSnapshot(sid, parent, self.clock_ms, seq, operation, list_path,
                                            tuple(w[0] for w in written) + tuple(kept))
        ref = self.refs.get(branch)
        self.refs[branch] = dataclasses.replace(ref, snapshot_id=sid) if ref else ModelRef(sid, "branch")
        return f"snapshot {sid} ({operation}) on {branch}, parent {parent}"

    def _new_data(self, sid: int, seq: int, n: int) -> list[ModelEntry]:
        return [self._new_entry(self._write_file("data", f"{self._name('data')}.parquet"), DataFileContent.DATA,
                                sid, seq, record_count=1 + i) for i in range(n)]

    def _append(self, op: Append) -> str:
        branch = self._branch(op.branch)
        head = self._head(branch)
        sid, seq = self._next_ids()
        kept = list(self.snapshots[head].manifests) if head is not None else []
        return self._commit_snapshot(branch, "append", sid, seq,
                                     [(ManifestContent.DATA, self._new_data(sid, seq, op.files))], kept)

    def _picked_data(self, head: int | None, pick: int, count: int) -> list[ModelEntry]:
        live = self.live_entries(head, DataFileContent.DATA) if head is not None else []
        if not live:
            return []
        start = pick % len(live)
        return [live[(start + i) % len(live)] for i in range(min(count, len(live)))]

    def _dangling_dvs(self, head: int, removed: list[ModelEntry]) -> set[tuple[str, str | None]]:
        # v3: Java drops the DVs of data files it removes (a DV must not outlive its data file).
        if self.format_version < 3:
            return set()
        gone = {physical(e.path) for e in removed}
        return {d.key for d in self.live_entries(head, DataFileContent.POSITION_DELETES)
                if d.referenced_data_file is not None and physical(d.referenced_data_file) in gone}

    def _delete(self, op: Delete) -> str | None:
        branch = self._branch(op.branch)
        head = self._head(branch)
        victims = self._picked_data(head, op.pick, 1)
        if not victims or head is None:
            return None
        sid, seq = self._next_ids()
        new, kept = self._remove(head, {v.key for v in victims} | self._dangling_dvs(head, victims), sid, seq)
        return self._commit_snapshot(branch, "delete", sid, seq, new, kept) + f", removed {_short(victims)}"

    def _overwrite(self, op: Overwrite) -> str | None:
        branch = self._branch(op.branch)
        head = self._head(branch)
        victims = self._picked_data(head, op.pick, 1)
        if not victims or head is None:
            return None
        sid, seq = self._next_ids()
        new, kept = self._remove(head, {v.key for v in victims} | self._dangling_dvs(head, victims), sid, seq)
        new.insert(0, (ManifestContent.DATA, self._new_data(sid, seq, op.files)))
        return self._commit_snapshot(branch, "overwrite", sid, seq, new, kept) + f", removed {_short(victims)}"

    def _rewrite_files(self, op: RewriteFiles) -> str | None:
        branch = self._branch(op.branch)
        head = self._head(branch)
        victims = self._picked_data(head, op.pick, 1 if op.same_path else op.count)
        if not victims or head is None:
            return None
        sid, seq = self._next_ids()
        new, kept = self._remove(head, {v.key for v in victims} | self._dangling_dvs(head, victims), sid, seq)
        if op.same_path:
            added = [self._new_entry(victims[0].path, DataFileContent.DATA, sid, seq,
                                     record_count=victims[0].record_count)]
        else:
            added = self._new_data(sid, seq, 1)
        new.insert(0, (ManifestContent.DATA, added))
        return self._commit_snapshot(branch, "replace", sid, seq, new, kept) + f", rewrote {_short(victims)}"

    def _add_deletes(self, op: AddDeletes) -> str | None:
        branch = self._branch(op.branch)
        head = self._head(branch)
        targets = self._picked_data(head, op.pick, op.count)
        if not targets or head is None:
            return None
        sid, seq = self._next_ids()
        if self.format_version >= 3:
            puffin = self._write_file("data", f"{self._name('dvs')}.puffin")
            added = [self._new_entry(puffin, DataFileContent.POSITION_DELETES, sid, seq,
                                     referenced_data_file=t.path, content_offset=4 + 10 * i, content_size=10)
                     for i, t in enumerate(targets)]
            # One DV per data file: the new one replaces (merges) the previous DV of each target.
            new, kept = self._remove(head, self._dangling_dvs(head, targets), sid, seq)
        else:
            added = [self._new_entry(self._write_file("data", f"{self._name('deletes')}.parquet"),
                                     DataFileContent.POSITION_DELETES, sid, seq, referenced_data_file=t.path)
                     for t in targets]
            new, kept = [], list(self.snapshots[head].manifests)
        new.insert(0, (ManifestContent.DELETES, added))
        return self._commit_snapshot(branch, "delete", sid, seq, new, kept) + f", deletes for {_short(targets)}"

    def _compact(self, op: CompactManifests) -> str | None:
        branch = self._branch(op.branch)
        head = self._head(branch)
        if head is None:
            return None
        sid, seq = self._next_ids()
        contents = {ManifestContent.DATA} | ({ManifestContent.DELETES} if op.deletes else set())
        kept: list[str] = []
        merged: dict[ManifestContent, list[ModelEntry]] = {c: [] for c in contents}
        for mpath in self.snapshots[head].manifests:
            m = self.manifests[mpath]
            if m.content in contents:
                merged[m.content].extend(
                    dataclasses.replace(e, status=EXISTING, path=spell(physical(e.path), SPELLINGS[op.respell % 4])
                                        if op.respell else e.path) for e in m.live())
            else:
                kept.append(mpath)
        new = [(c, entries) for c, entries in merged.items() if entries]  # no live entry: no manifest
        return self._commit_snapshot(branch, "replace", sid, seq, new, kept)

    def _metadata_commit(self, change: dict[str, object]) -> None:
        """A commit that changes refs/statistics only, stamped with the model clock."""
        forge_commit(self.table, lambda base: base.replace(**change, last_updated_ms=self.clock_ms))

    def _refs_json(self) -> dict[str, SnapshotRef]:
        return {n: r.to_icectl() for n, r in self.refs.items()}

    def _set_ref(self, op: SetRef) -> str | None:
        if not self.snapshots:
            return None
        name = _REF_NAMES[op.name % len(_REF_NAMES)]
        ids = list(self.snapshots)
        at = ids[op.at % len(ids)]
        kind = "branch" if name.startswith("b") else "tag"
        self.refs[name] = ModelRef(at, kind)
        self._metadata_commit({"refs": self._refs_json()})
        return f"{kind} {name} -> {at}"

    def _remove_ref(self, op: RemoveRef) -> str | None:
        names = sorted(n for n in self.refs if n != MAIN_BRANCH)
        if not names:
            return None
        name = names[op.pick % len(names)]
        del self.refs[name]
        self._metadata_commit({"refs": self._refs_json()})
        return f"removed ref {name}"

    def _rollback(self, op: Rollback) -> str | None:
        head = self._head(MAIN_BRANCH)
        older = self.ancestors(head)[1:] if head is not None else []
        if not older:
            return None
        target = older[min(op.steps, len(older)) - 1]
        self.refs[MAIN_BRANCH] = dataclasses.replace(self.refs[MAIN_BRANCH], snapshot_id=target)
        log = (*self.table.metadata.snapshot_log, SnapshotLogEntry(self.clock_ms, target))
        self._metadata_commit({"refs": self._refs_json(), "current_snapshot_id": target, "snapshot_log": log})
        return f"main rolled back {head} -> {target}"

    def _set_statistics(self, op: SetStatistics) -> str | None:
        if not self.snapshots:
            return None
        ids = list(self.snapshots)
        at = ids[op.at % len(ids)]
        path = self._write_file("metadata", f"{self._name('partition-stats' if op.partition else 'stats')}"
                                            f"-{at}.{'parquet' if op.partition else 'puffin'}")
        md = self.table.metadata
        if op.partition:
            # Replacing a snapshot's statistics leaves the old file unreferenced: an orphan now.
            self.orphans.update(physical(p) for s, p in self.partition_statistics.items() if s == at)
            self.partition_statistics[at] = path
            change: dict[str, object] = {"partition_statistics": (
                *(s for s in md.partition_statistics if s.snapshot_id != at), PartitionStatisticsFile(at, path, 16))}
        else:
            self.orphans.update(physical(p) for s, p in self.statistics.items() if s == at)
            self.statistics[at] = path
            change = {"statistics": (*(s for s in md.statistics if s.snapshot_id != at),
                                     StatisticsFile(at, path, 16, 8))}
        for p in self.orphans:
            self.categories.pop(p, None)
        self.categories[physical(path)] = STATISTICS
        self._metadata_commit(change)
        return f"{'partition ' if op.partition else ''}statistics for {at}"

    def _orphan(self, op: Orphan) -> str:
        path = (self._write_file("metadata", f"{self._name('orphan')}.avro") if op.in_metadata
                else self._write_file("data", f"{self._name('orphan')}.parquet"))
        self.orphans.add(physical(path))
        return f"orphan {os.path.basename(path)}"

    # ------------------------------------------------------------------ before expiry

    def configure(self, properties: dict[str, str], ref_retention: dict[str, tuple[int | None, int | None, int | None]]
                  ) -> None:
        """Set table properties and per-ref (min-snapshots-to-keep, max-snapshot-age-ms, max-ref-age-ms)
        in one commit; tags only take max-ref-age-ms."""
        for name, (min_keep, max_age, max_ref_age) in ref_retention.items():
            ref = self.refs[name]
            branch = ref.type == "branch"
            self.refs[name] = dataclasses.replace(ref, min_snapshots_to_keep=min_keep if branch else None,
                                                  max_snapshot_age_ms=max_age if branch else None,
                                                  max_ref_age_ms=max_ref_age)
        self.properties.update(properties)
        if not properties and not ref_retention:
            return
        refs = self._refs_json()

        def build(base: TableMetadata) -> TableMetadata:
            return set_properties(base, properties).replace(refs=refs, last_updated_ms=self.clock_ms)

        forge_commit(self.table, build)


    def expired(self, snapshot_ids: Iterable[int], now_ms: int) -> None:
        """After an expiry: forget the expired snapshots and the refs the table no longer has, and
        re-read the table, so more operations can follow (on a history with missing parents)."""
        gone = set(snapshot_ids)
        self.table = load_table(str(self.table_dir), config=Config(catalogs={}))
        md = self.table.metadata
        self.snapshots = {sid: s for sid, s in self.snapshots.items() if sid not in gone}
        self.refs = {n: r for n, r in self.refs.items() if n in md.refs}
        self.statistics = {sid: p for sid, p in self.statistics.items() if sid not in gone}
        self.partition_statistics = {sid: p for sid, p in self.partition_statistics.items() if sid not in gone}
        # The clock never runs back: past the expiry's now and its commit's (real) last-updated-ms.
        latest = max(self.clock_ms, now_ms, md.last_updated_ms)
        self.clock_ms = T0_MS + -(-(latest - T0_MS) // UNIT_MS) * UNIT_MS
        self.applied.append(f"-- expired {sorted(gone)}; refs now {sorted(self.refs)}")


def _assign_row_ids(entries: list[ModelEntry], info: ManifestFile) -> list[ModelEntry]:
    """v3: the first_row_id readers give ADDED data entries (the manifest's, counted on), so a later
    rewrite can carry it explicitly as Java does."""
    next_id = info.first_row_id
    if next_id is None:
        return entries
    out = []
    for e in entries:
        if e.content == DataFileContent.DATA and e.first_row_id is None and e.is_live:
            e = dataclasses.replace(e, first_row_id=next_id)
            next_id += e.record_count
        out.append(e)
    return out


def _short(entries: list[ModelEntry]) -> str:
    return ", ".join(os.path.basename(e.path) for e in entries)


def read_current_metadata(table_dir: Path) -> tuple[Path, dict[str, Any]]:
    """The current metadata file and its JSON, found as Hadoop tables do (version-hint.text),
    parsed with :mod:`json` rather than icectl's reader."""
    version = int((table_dir / "metadata" / "version-hint.text").read_text().strip())
    path = table_dir / "metadata" / f"v{version}.metadata.json"
    return path, json.loads(path.read_text())

