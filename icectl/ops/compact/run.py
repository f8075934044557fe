"""The write / verify / commit / replan loop of `icectl compact`, the same for every format version.

A format's compaction (:mod:`icectl.ops.compact.manifests` for v1-v3 manifest lists,
:mod:`icectl.ops.compact.v4` for v4 roots and leaves) supplies its :class:`Steps`: how to plan,
how to write and check the new manifests, and the snapshot layout that puts them on the branch
head at commit time (raising :class:`StalePlanError` when the plan no longer applies to it).
The commit is one ``replace`` snapshot through :func:`icectl.table.snapshot_writer.write_snapshot`
with Java's rewrite summary keys; a stale plan is planned once more from scratch, then the
command gives up with the conflict exit code. Replaced manifests stay on disk for older
snapshots; expiry removes them. The loop ends in a :class:`Compaction` (the last plan, what was
written and committed), which :mod:`icectl.ops.compact.report` makes the command's result.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from icectl import progress
from icectl.engine import Engine, active
from icectl.errors import CommitConflictError
from icectl.ops.compact.distribute import BinWriter, write_in_processes, write_on_engine
from icectl.ops.compact.plan import Bin, CompactOptions, GroupPlan
from icectl.spec.manifest import ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.table import Table
from icectl.table.commit import discard_on_failure
from icectl.table.layout import SnapshotLayout, WrittenIndex
from icectl.table.layout.manifest_list import manifest_path
from icectl.table.snapshot_writer import SnapshotChange, write_snapshot
from icectl.threads import ENCODE_WORKERS, ordered_map


class StalePlanError(CommitConflictError):
    """What the plan replaces changed in the branch head: another writer rewrote or removed it."""

    def __init__(self, message: str, fresh: TableMetadata) -> None:
        super().__init__(message, hint="run compact again")
        self.fresh = fresh


G = TypeVar("G", bound=GroupPlan)


@dataclass
class Plan(Generic[G]):
    """What one compaction of ``branch`` at ``base_snapshot`` does (each format adds what it read)."""

    table: str
    metadata: TableMetadata
    branch: str
    base_snapshot: Snapshot | None
    target_size: int
    groups: list[G]
    snapshot_id: int  # of the snapshot to commit (also the new manifests' added_snapshot_id)
    commit_id: str
    metadata_dir: str

    @property
    def rewritten(self) -> list[G]:
        return [g for g in self.groups if g.rewrite]

    @property
    def replaced(self) -> list[ManifestFile]:
        return [m for g in self.rewritten for m in g.manifests]

    @property
    def commits(self) -> bool:
        """Whether the plan changes anything."""
        return bool(self.rewritten)

    @property
    def manifests_kept(self) -> int:
        """Manifests (v4: live leaves) of the head as planned that the new snapshot keeps."""
        raise NotImplementedError

    @property
    def listing_path(self) -> str:
        """The manifest list (v4: root manifest) a dry run says it would write."""
        raise NotImplementedError

    def manifest_path(self, index: int) -> str:
        return manifest_path(self.metadata_dir, self.commit_id, index)


class Written(Protocol):
    """A manifest (v4: leaf) the compaction wrote."""

    group: Any  # the GroupPlan it was written for
    entries: int

    @property
    def path(self) -> str: ...

    @property
    def bytes(self) -> int | None: ...


P = TypeVar("P", bound=Plan[Any])
W = TypeVar("W", bound=Written)


@dataclass
class CommitOutcome:
    metadata_location: str
    snapshot: Snapshot
    attempts: int
    manifests_kept: int  # manifests (v4: live leaves) of the head carried over
    reapplied_on: list[int] = field(default_factory=list)  # heads of other writers' commits taken in


@dataclass
class Compaction(Generic[P, W]):
    """How a run ended: its (last) plan, the manifests it wrote and the commit (None: not done)."""

    plan: P
    dry_run: bool
    written: list[W] | None = None
    outcome: CommitOutcome | None = None
    replanned: bool = False  # a concurrent commit made the plan stale once


@dataclass(frozen=True)
class Steps(Generic[P, W]):
    """One format's compaction, as the loop calls it."""

    plan: Callable[[Table, CompactOptions, TableMetadata | None, Engine], P]  # reads on the engine
    write: Callable[[Table, P, Engine], list[W]]  # write and verify the new manifests (deleted again on failure)
    # The layout of the new snapshot, and the head it builds on; heads of other writers' commits
    # the plan is re-applied on are appended to the list.
    layout: Callable[[Table, P, list[W], list[int]], tuple[SnapshotLayout, Callable[[TableMetadata], Snapshot | None]]]
    rivals: str  # what a stale plan lost to twice, for the message


def write_bins(table: Table, plan: P, write_one: Callable[[G, Bin, str], W], verify: Callable[[G, list[W]], None],
               what: str, engine: Engine | None = None) -> list[W]:
    """Write one manifest per bin of every rewritten group (in parallel), then verify each group
    against what it replaces; returns them in listing order. On failure every path goes, also
    those a failed pool task may have left half-done.

    A :class:`~icectl.ops.compact.distribute.BinWriter` runs on the engine's executors (``None``: the
    active engine) unless it runs in this process; the verification stays here, the same for both."""
    jobs: list[tuple[Any, Bin, str]] = []
    for g in plan.rewritten:
        for b in g.bins:
            jobs.append((g, b, plan.manifest_path(len(jobs))))
    written: list[W] = []
    engine = engine or active()
    with discard_on_failure(table.io, [path for _, _, path in jobs]):
        if isinstance(write_one, BinWriter) and not engine.runs_in_process:
            # Executors write the files (paths chosen here, so the discard above covers them).
            written.extend(write_on_engine(engine, write_one, jobs, f"writing {what}"))
        elif isinstance(write_one, BinWriter) and \
                (in_workers := write_in_processes(write_one, jobs, f"writing {what}")) is not None:
            written.extend(in_workers)  # big bins of rows: encoded on every core
        else:
            # wait=True: on a failure no write is still under way when the discard above runs
            results = ordered_map(lambda job: write_one(*job), jobs, workers=ENCODE_WORKERS, wait=True)
            with progress.task(f"writing {what}", len(jobs)) as advance, closing(results):
                for w in results:
                    written.append(w)
                    advance(1)
        for g in plan.rewritten:
            verify(g, [w for w in written if w.group is g])
    return written


def rewrite_summary(plan: Plan[Any], created: int, kept: int) -> dict[str, str]:
    """Java's RewriteManifests summary keys."""
    return {"manifests-created": str(created), "manifests-kept": str(kept),
            "manifests-replaced": str(len(plan.replaced)),
            "entries-processed": str(sum(g.live_entries for g in plan.rewritten)),
            "changed-partition-count": "0"}  # as Java's rewrite writes it


def commit_plan(table: Table, steps: Steps[P, W], plan: P, written: list[W],
                on_planned: Callable[[P], None] | None = None) -> CommitOutcome:
    """One ``replace`` snapshot on the branch head at commit time."""
    paths = [w.path for w in written]
    reapplied: list[int] = []

    def extra(index: WrittenIndex) -> dict[str, str]:
        return rewrite_summary(plan, len(written), index.kept_manifests)

    with discard_on_failure(table.io, paths):  # never referenced by a committed snapshot
        layout, head = steps.layout(table, plan, written, reapplied)
        change = SnapshotChange("replace", layout, extra=extra, written=paths)
        if on_planned is not None:
            on_planned(plan)
        done = write_snapshot(table, plan.branch, change, snapshot_id=plan.snapshot_id, head=head)
    return CommitOutcome(done.metadata_location, done.snapshot, done.attempts, done.index.kept_manifests, reapplied)


def run_compaction(table: Table, options: CompactOptions, steps: Steps[P, W], *, dry_run: bool = False,
                   on_planned: Callable[[P], None] | None = None, engine: Engine | None = None) -> Compaction[P, W]:
    """Plan, then write, verify and commit; plan once more when the plan went stale meanwhile.
    ``engine``: where manifests are read and written (None: :func:`icectl.engine.active`).

    ``on_planned`` runs after the new manifests are written, before the commit (tests use it to
    commit as a concurrent writer would).
    """
    engine = engine or active()
    plan = steps.plan(table, options, None, engine)
    if dry_run or not plan.commits:
        return Compaction(plan, dry_run)
    replanned = False
    while True:
        try:
            written = steps.write(table, plan, engine)
            outcome = commit_plan(table, steps, plan, written, on_planned)
            break
        except StalePlanError as e:
            if replanned:
                raise CommitConflictError(f"compacting {table.identifier} lost to concurrent {steps.rivals} twice "
                                          f"({e.message})", hint="run it again when the other writer is done") from e
            replanned = True
            plan = steps.plan(table, options, e.fresh, engine)
            if not plan.commits:
                return Compaction(plan, False, replanned=True)
    return Compaction(plan, False, written, outcome, replanned)
