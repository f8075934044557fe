"""Compaction's heavy part on the run's engine (the ``engine`` given to :func:`~icectl.ops.compact.manifests.compact`,
else :func:`icectl.engine.active`): reading the manifests (v4: leaves) of the groups being rewritten, and writing
the new ones.

With the local engine nothing here changes how compaction runs (threads of this process, as
always). With the Spark engine:

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
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from icectl.engine import Engine
from icectl.ops.compact.plan import Bin, GroupPlan
from icectl.spec.manifest import ManifestContent, ManifestEntry

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
    return BinJob(g.spec_id, g.content, b.entries, path)


def range_key(g: GroupPlan, b: Bin) -> tuple[Any, ...]:
    """Where a bin goes among the tasks: its group, then the partition value of its first entry
    (bins are clustered by partition value, so neighbouring bins share tasks and storage prefixes)."""
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
    for wave in waves(jobs, lambda job: len(job[1].entries)):
        results = engine.map(writer.task, [job_of(*job) for job in wave], shared=writer.shared,
                             description=description, range_keys=[range_key(g, b) for g, b, _ in wave])
        for (g, b, _), r in zip(wave, results, strict=True):
            yield writer.wrap(g, b, r)


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
