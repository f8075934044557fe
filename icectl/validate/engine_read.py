"""``validate`` on an engine other than the local one (issue 17): each manifest checked where it is read.

Before the walk over the snapshots (:func:`icectl.validate._check_snapshots`), :func:`start` reads the
manifest lists once and sends every distinct manifest they name, in first-listed order, to the engine
(one item each). A task runs, for its manifest, what the walk would run on the driver: the list row's
own checks (:func:`~icectl.validate.manifest_list_rules.check_manifest_file`), the fetch (the stored
outcome, or the bytes and the cached entries) and the entry rules
(:func:`~icectl.validate.manifest_rules.check_manifest`), storing a new outcome in the outcome cache
where the task runs, exactly as the local walk does. Its reporter records every call; the walk, at
the very point it would have checked the manifest itself, takes the task's result and replays its
calls through the run's reporter, so findings, their de-duplication and their order are the local
engine's. The rules over a whole snapshot or table (list rules, deletes per snapshot, sequence
bounds, ``--deep``'s file checks) stay in the walk, on the driver.

A manifest the walk meets under another listing than the one planned (a list that reads differently
the second time, a v4 root's leaf) is checked by the walk itself. Errors raised in a task come back
as values and are raised where the walk would have met them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from icectl.engine import Engine, pack_error, unpack_error
from icectl.errors import IcectlError, NotFoundError
from icectl.spec.manifest import ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO
from icectl.table.manifest_read import manifest_list
from icectl.validate import manifest_list_rules, outcome_cache
from icectl.validate.context import Context, ManifestSummary
from icectl.validate.fetch import check_fetched, fetch, report_missing
from icectl.validate.rules import CATALOGUE, Reporter


@dataclass(frozen=True)
class Planned:
    """A manifest as first listed: the list, its row's ordinal and the row; its outcome key."""

    list_path: str | None
    ordinal: int
    manifest: ManifestFile
    key: str | None = field(default=None, compare=False)


@dataclass
class CheckTask:
    """What every task needs (pickled once per Spark task)."""

    metadata: TableMetadata
    io: FileIO
    metadata_location: str
    enabled: frozenset[str]
    deep: bool


@dataclass
class Checked:
    """A task's outcome: the calls of the row's checks and whether the entries are to be read; then
    the calls of the manifest's checks and its summary (None: unreadable, or not read); an error met
    (packed), ``at_row`` when the row's checks met it."""

    row_calls: list[outcome_cache.Call]
    readable: bool = False
    calls: list[outcome_cache.Call] = field(default_factory=list)
    summary: ManifestSummary | None = None
    missing: bool = False  # gone between its size being taken and its read
    error: bytes | None = None
    at_row: bool = False


def check_task(task: CheckTask, item: Planned) -> Checked:
    """One manifest's per-manifest checks, where the engine runs it (module level: pickled by reference)."""
    recorder = outcome_cache.Recorder(Reporter(task.enabled))
    ctx = Context(task.metadata, task.io, task.metadata_location, recorder, deep=task.deep, outcome_base=None)
    m = item.manifest
    try:
        readable = manifest_list_rules.check_manifest_file(ctx, item.list_path, m, item.ordinal)
    except IcectlError as e:
        return Checked(recorder.calls, error=pack_error(e), at_row=True)
    done = Checked(recorder.calls, readable)
    if not readable:
        return done
    recorder.calls = []
    try:
        got = fetch(ctx, m, item.key)
    except NotFoundError:
        done.missing = True
        return done
    except IcectlError as e:
        done.error = pack_error(e)
        return done
    try:
        done.summary = check_fetched(ctx, item.list_path, m, item.ordinal, item.key, got)
    except IcectlError as e:
        done.error = pack_error(e)
    done.calls = recorder.calls
    return done


def replay(ctx: Context, calls: list[outcome_cache.Call]) -> None:
    for rule_id, file, entry, message, values in calls:
        ctx.reporter.report(CATALOGUE[rule_id], file, message, entry=entry, **values)


class Remote:
    """The engine's results, taken by the walk in the order it meets the manifests."""

    def __init__(self, engine: Engine, task: CheckTask, planned: list[Planned]) -> None:
        self._planned = {p.manifest.manifest_path: p for p in planned}
        self._results: Iterator[Checked] = engine.map(check_task, planned, shared=task,
                                                      description="checking manifests")
        self._order = iter(planned)
        self._ready: dict[str, Checked] = {}  # arrived, not yet met by the walk
        self._rows_done: dict[str, Checked] = {}  # row checked, entries next

    def row(self, ctx: Context, list_path: str | None, ordinal: int, m: ManifestFile) -> bool | None:
        """The row checks of ``m`` replayed (True: read its entries), or None: not planned so, check here."""
        path = m.manifest_path
        if self._planned.get(path) != Planned(list_path, ordinal, m):
            return None
        del self._planned[path]
        while path not in self._ready:
            p = next(self._order)
            self._ready[p.manifest.manifest_path] = next(self._results)
        got = self._ready.pop(path)
        replay(ctx, got.row_calls)
        if got.at_row and got.error is not None:
            raise unpack_error(got.error)
        if got.readable:
            self._rows_done[path] = got
        return got.readable

    def manifest(self, path: str) -> Checked | None:
        """The manifest's checks, when its row was taken by :meth:`row`."""
        return self._rows_done.pop(path, None)

    def close(self) -> None:
        close = getattr(self._results, "close", None)
        if close is not None:
            close()


def outcome(ctx: Context, got: Checked, list_path: str | None, ordinal: int, m: ManifestFile) -> ManifestSummary | None:
    """A task's manifest checks replayed through the run's reporter: its summary (None: unreadable)."""
    if got.missing:
        report_missing(ctx, list_path, ordinal, m)
        return None
    replay(ctx, got.calls)
    if got.error is not None:
        raise unpack_error(got.error)
    return got.summary


def start(ctx: Context, snapshots: list[Snapshot], engine: Engine) -> Remote | None:
    """The engine's checks of every distinct listed manifest, under way; None on an engine that runs in
    this process (:attr:`~icectl.engine.Engine.runs_in_process`: the walk checks each manifest itself)."""
    if engine.runs_in_process:
        return None
    seen: set[str] = set()
    planned: list[Planned] = []
    md = ctx.metadata
    for snap in snapshots:
        if snap.root_manifest is not None or not snap.manifest_list:
            continue  # v4 roots and v1 embedded lists: the walk reads them
        if manifest_list_rules.is_relative(ctx, snap.manifest_list):
            continue  # never resolved against the working directory: the walk reports it
        try:
            manifests = manifest_list(ctx.io, snap.manifest_list, format_version=md.format_version,
                                      use_cache=not ctx.deep)
        except IcectlError:
            continue  # the walk reports it
        for i, m in enumerate(manifests):
            if m.manifest_path not in seen:
                seen.add(m.manifest_path)
                planned.append(Planned(snap.manifest_list, i, m,
                                       outcome_cache.outcome_key(ctx, snap.manifest_list, m, i)))
    if not planned:
        return None
    task = CheckTask(md, ctx.io, ctx.metadata_location, ctx.reporter.enabled, ctx.deep)
    return Remote(engine, task, planned)
