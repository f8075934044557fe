"""Compaction's heavy part on the run's engine (the ``engine`` given to :func:`~icectl.ops.compact.manifests.compact`,
else :func:`icectl.engine.active`): reading the manifests (v4: leaves) of the groups being rewritten, and writing
the new ones.

With the local engine, bins are written by threads of this process, and big bins planned over
the Arrow form (:mod:`icectl.ops.compact.columns`) by worker processes (:func:`write_in_processes`:
encoding holds the GIL). With the Spark engine:

- **Reading.** The distinct manifests to read go to the executors (``engine.map``); each task
  decodes its manifest with the local path's reader and the entries come back in manifest order,
  so the plan (clustering, rolling) is the one the local engine makes.
- **Writing.** Each bin of the plan is one item of ``engine.map``, range-partitioned by the bin's
  partition value (Java's RewriteManifestsSparkAction: clustered bins land in the same tasks); a
  task writes the bin's manifest to the path the driver chose, with the local path's writer, and
  returns the manifest-list row (v4: the root entry). The driver then verifies, commits once and
  discards the files on failure with the code the local engine runs
  (:func:`icectl.ops.compact.run.write_bins`, :func:`~icectl.ops.compact.run.commit_plan`).

What a bin ships: its entries, pickled, not "which rows of which manifests". The driver holds the
entries anyway (clustering, rolling and the verification need them), and a clustered bin draws
rows from nearly every input manifest, so executors re-reading them would decode each input
manifest once per bin. To keep the driver from holding the table a second time (pickled, and in
the JVM while a job runs), bins go out in waves of at most :data:`WAVE_ENTRIES` entries.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from icectl import progress
from icectl.engine import Engine
from icectl.ops.compact.plan import Bin, GroupPlan
from icectl.processes import discard_pool, pool_size, worker_pool
from icectl.spec.manifest import ManifestContent, ManifestEntry

if TYPE_CHECKING:
    import pyarrow as pa

T = TypeVar("T")
S = TypeVar("S")
R = TypeVar("R")
W = TypeVar("W")
G = TypeVar("G", bound=GroupPlan)  # the group type of a format (v4's carries its leaves' DVs)

# Entries per wave of bins sent to the executors: bounds the driver's pickled copy of the bins
# (~1 KiB an entry with column stats) while keeping a wave's job large enough to spread.
WAVE_ENTRIES = 250_000


@dataclass(frozen=True)
class BinJob:
    """What a task needs to write one bin: its group's spec and content, the entries, the path."""

    spec_id: int
    content: ManifestContent
    entries: list[ManifestEntry]
    path: str
    rows: pa.Table | None = None  # a bin planned over the Arrow form: its rows (``entries`` is empty)


@dataclass(frozen=True)
class BinWriter(Generic[G, S, R, W]):
    """How a bin is written: ``task(shared, job)`` (module-level: it runs on executors) writes the
    file and returns what it wrote; ``wrap`` makes that the driver's record of it (with its group).
    Called as ``writer(group, bin, path)``, it writes on this machine (the local engine's path)."""

    task: Callable[[S, BinJob], R]
    shared: S
    wrap: Callable[[G, Bin, R], W]

    def __call__(self, g: G, b: Bin, path: str) -> W:
        return self.wrap(g, b, self.task(self.shared, job_of(g, b, path)))


def job_of(g: GroupPlan, b: Bin, path: str) -> BinJob:
    return BinJob(g.spec_id, g.content, b.entries, path, b.rows)


def shipped_job(g: GroupPlan, b: Bin, path: str) -> BinJob:
    """:func:`job_of` for another process: a bin's rows copied out of the group's table (a pickled
    slice carries its parent's whole buffers: each bin of 2 million entries would ship all of them)."""
    job = job_of(g, b, path)
    if job.rows is None:
        return job
    import numpy as np
    import pyarrow as pa

    return replace(job, rows=job.rows.take(pa.array(np.arange(job.rows.num_rows, dtype=np.int64))))


def range_key(g: GroupPlan, b: Bin) -> tuple[Any, ...]:
    """Where a bin goes among the tasks: its group, then the partition value of its first entry
    (bins are clustered by partition value, so neighbouring bins share tasks and storage prefixes)."""
    if b.rows is not None:  # clustered rows: the bin's place in its group orders it as its first value would
        return (g.spec_id, int(g.content), (next(i for i, x in enumerate(g.bins) if x is b),))
    first = b.entries[0].data_file.partition if b.entries else None
    return (g.spec_id, int(g.content), tuple(first or ()))


def waves(jobs: Sequence[T], size: Callable[[T], int], limit: int | None = None) -> Iterator[list[T]]:
    """Consecutive runs of ``jobs`` of at most ``limit`` (default :data:`WAVE_ENTRIES`) in ``size``
    (a larger job goes alone)."""
    limit = WAVE_ENTRIES if limit is None else limit
    wave: list[T] = []
    total = 0
    for job in jobs:
        n = size(job)
        if wave and total + n > limit:
            yield wave
            wave, total = [], 0
        wave.append(job)
        total += n
    if wave:
        yield wave


def write_on_engine(engine: Engine, writer: BinWriter[G, Any, Any, W], jobs: Sequence[tuple[G, Bin, str]],
                    description: str) -> Iterator[W]:
    """Every bin written by the engine's tasks, wave after wave; the records in ``jobs`` order."""
    for wave in waves(jobs, lambda job: job[1].size):
        results = engine.map(writer.task, [shipped_job(*job) for job in wave], shared=writer.shared,
                             description=description, range_keys=[range_key(g, b) for g, b, _ in wave])
        for (g, b, _), r in zip(wave, results, strict=True):
            yield writer.wrap(g, b, r)


# Bins of rows are encoded in worker processes (:mod:`icectl.processes`) when they hold this many
# entries in all: encoding (fastavro over an object per entry, ~150 us an entry) holds the GIL, so
# threads use one core; a worker costs ~0.3 s to start and a pickled copy of its bin's rows.
PROCESS_MIN_ENTRIES = 100_000


def write_in_processes(writer: BinWriter[G, Any, Any, W], jobs: Sequence[tuple[G, Bin, str]],
                       description: str) -> list[W] | None:
    """Every bin written by worker processes, the records in ``jobs`` order; None when they do not
    apply (too little work, bins of entries, a writer that does not pickle, no pool: the caller
    writes in threads). A worker that dies has its bin written here. Returns only when no worker
    is still writing (the caller discards the paths on failure)."""
    import pickle
    from collections import deque
    from concurrent.futures import Future, wait
    from concurrent.futures.process import BrokenProcessPool

    if len(jobs) < 2 or any(b.rows is None for _, b, _ in jobs) or \
            sum(b.size for _, b, _ in jobs) < PROCESS_MIN_ENTRIES:
        return None
    try:
        pickle.dumps((writer.task, writer.shared))
    except Exception:  # a test's local FileIO, say: threads need no pickling
        return None
    pool = worker_pool()
    if pool is None:
        return None
    # Bins go out as workers free up (each shipped bin is a copy of its rows), results in order.
    todo = iter(jobs)
    pending: deque[tuple[tuple[G, Bin, str], Future[Any] | None]] = deque()

    def submit_next() -> None:
        job = next(todo, None)
        if job is None:
            return
        try:
            pending.append((job, pool.submit(writer.task, writer.shared, shipped_job(*job))))
        except (BrokenProcessPool, RuntimeError):  # the pool broke: this bin is written here
            discard_pool()
            pending.append((job, None))

    for _ in range(pool_size() + 1):
        submit_next()
    out: list[W] = []
    try:
        with progress.task(description, len(jobs)) as advance:
            while pending:
                (g, b, path), fut = pending.popleft()
                try:
                    got = fut.result() if fut is not None else writer.task(writer.shared, job_of(g, b, path))
                except BrokenProcessPool:  # a worker died: this bin is written here, which decides
                    discard_pool()
                    got = writer.task(writer.shared, job_of(g, b, path))
                out.append(writer.wrap(g, b, got))
                advance(1)
                submit_next()
    finally:
        futures = [f for _, f in pending if f is not None]
        for fut in futures:
            fut.cancel()
        wait(futures)
    return out


def map_distinct(engine: Engine, fn: Callable[[S, T], R], items: Sequence[T], key: Callable[[T], Hashable], *,
                 shared: S, description: str) -> Iterator[tuple[T, R]]:
    """``fn`` over the distinct items (by ``key``) on the engine; each item with its result, in
    ``items`` order (an item listed twice gets the result of its one run)."""
    first: dict[Hashable, T] = {}
    for i in items:
        first.setdefault(key(i), i)
    distinct = list(first.values())
    results = engine.map(fn, distinct, shared=shared, description=description)
    if len(distinct) == len(items):
        yield from zip(items, results, strict=True)
        return
    by_key = {key(i): r for i, r in zip(distinct, results, strict=True)}
    for i in items:
        yield i, by_key[key(i)]
