"""Where a command's heavy part runs: on this machine (the local engine) or on Spark (the Spark engine).

The heavy part of expire-snapshots, remove-orphan-files, compact, inspect files|entries|partitions
and validate is the same everywhere: one function applied to each of many items (a manifest to
decode, a bin of entries to write), each item on its own. An :class:`Engine` runs such a function
over the items and gives the results back in order:

- :class:`LocalEngine`: threads of this process, a bounded read-ahead (:func:`icectl.threads.ordered_map`,
  the one ordered parallel map every local path uses);
- :class:`icectl.engine.spark.SparkEngine`: Spark tasks (``mapInArrow`` over the items), the results
  streamed back to the driver in order; set algebra as Spark joins (:mod:`icectl.engine.spark_reach`).

Everything that decides (plans, the commit and its retries, the delete fence, what stays reachable)
runs on the driver in the code both engines share: an engine only runs the functions it is given.

**How an operation gets its engine.** Explicitly: an operation whose heavy part can run on an
engine takes ``engine: Engine | None = None``, and the command framework passes the run's engine
(``command(..., engine=True)`` in :mod:`icectl.cli.framework`; the command function declares an
``engine`` parameter and hands it on). ``None`` means :func:`active`, the context value a library
caller may set with ``with using(engine): ...``; one that never sets it gets the local engine.
The framework sets the context value too, for the code that still reads it (the Spark set algebra
of expire-snapshots and remove-orphan-files, reached through :mod:`icectl.engine.spark_reach`).

**What an operation may ask an engine.** Its capabilities, never its class: an operation or a
validate module does not test ``isinstance(engine, LocalEngine / SparkEngine)``.

- :meth:`Engine.map`: run a function over items, results in order;
- :attr:`Engine.runs_in_process`: True when the functions run in this process, on its threads (the
  local engine). The caller then takes its in-process path (for a manifest read, the read-ahead
  of :mod:`icectl.table.scan`, which shares the manifest cache and the decoder processes) instead
  of shipping each item as a task: the results are the same, the in-process path is cheaper here;
- :meth:`Engine.report`, :meth:`Engine.mark`, :meth:`Engine.report_since`: what the JSON says of a run.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from icectl import progress
from icectl.errors import IcectlError, UsageError
from icectl.threads import READ_WORKERS, ordered_map

if TYPE_CHECKING:  # the set algebra's types: reading them at start-up would load the manifest codecs
    from icectl.spec.metadata import TableMetadata
    from icectl.storage import FileIO
    from icectl.table.deletes import Executor
    from icectl.table.reach import FileSet, ReadCache

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

ENGINES = ("local", "spark")
# From this many manifests in one batch, a terminal run of the default local engine suggests --engine spark:
# at 20,000 manifests (2M entries) Spark local[2] already beat the local engine on the same two cores for
# inspect files and validate (benchmarks/bench_spark_engine.py, README), and a cluster has more cores.
SPARK_SUGGESTED_MANIFESTS = 20_000


@dataclass(frozen=True)
class EngineSettings:
    """``[engine]`` of the config, overridden by ``--engine``, ``--spark-master`` and ``--spark-conf``.

    ``master`` is a Spark master URL (``local[4]``, ``spark://host:7077``, ``yarn``,
    ``k8s://https://...``) or a Spark Connect URL (``sc://host:15002``); None joins the session this
    process already has, else starts ``local[*]``. ``executor_deletes``: executors delete the files
    (remove-orphan-files, expire-snapshots) instead of the driver streaming them.
    """

    name: str = "local"
    master: str | None = None
    conf: tuple[tuple[str, str], ...] = ()
    executor_deletes: bool = False

    def check(self) -> EngineSettings:
        if self.name not in ENGINES:
            raise UsageError(f"unknown engine {self.name!r}", hint=f"use one of: {', '.join(ENGINES)}")
        return self


def parse_spark_conf(items: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE`` pairs (``--spark-conf``), in order; a later key replaces an earlier one."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-conf {item!r} is not KEY=VALUE",
                             hint="e.g. --spark-conf spark.executor.memory=4g")
        out[key.strip()] = value
    return tuple(out.items())


@dataclass
class EngineReport:
    """What an engine says of a run: its name and, for Spark, the master and the tasks it ran."""

    name: str
    master: str | None = None
    spark_jobs: int | None = None
    spark_tasks: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name}
        if self.name == "spark":
            doc.update(master=self.master, spark_jobs=self.spark_jobs, spark_tasks=self.spark_tasks)
        return doc


class Engine:
    """Runs a function over many items and yields the results in the items' order.

    ``fn(shared, item)`` must be picklable by reference (a module-level function of icectl) for the
    Spark engine; ``shared`` (table metadata, the FileIO) travels once per task, each item on its own.
    An :class:`IcectlError` raised by ``fn`` reaches the caller as itself, at the item that raised it.
    ``items_per_task``: how many items one task takes at most (1 for heavy items, such as a file
    group to rewrite, so that every core gets one); None: the engine packs light items as it sees fit.
    """

    name = "local"
    #: The functions run in this process, on its threads: callers take their in-process path
    #: (see the module docstring). False for an engine that ships items elsewhere as tasks.
    runs_in_process: ClassVar[bool] = False

    def map(self, fn: Callable[[S, T], R], items: Sequence[T], *, shared: S, description: str,
            range_keys: Sequence[Any] | None = None, items_per_task: int | None = None) -> Generator[R, None, None]:
        raise NotImplementedError

    def report(self) -> EngineReport:
        return EngineReport(self.name)

    # -- set algebra and deletes: what an engine may do its own way (the Spark engine: as joins)

    def doomed_files(self, before: TableMetadata, expired: list[int], after: TableMetadata, io: FileIO,
                     cache: ReadCache, *, extra: Callable[[set[str]], FileSet] | None = None) -> FileSet:
        """What the ``expired`` snapshots of ``before`` (and ``extra``) reach and no snapshot of
        ``after`` reaches: :func:`icectl.table.reach.files_to_delete` on this machine (imported when
        asked: ``icectl --help`` and ``inspect table`` import this module, not the manifest codecs)."""
        from icectl.table.reach import files_to_delete

        return files_to_delete(before, expired, after, io, cache, extra)

    def valid_frame(self, md: TableMetadata, io: FileIO,
                    extras: Callable[[], list[tuple[str, str]]]) -> tuple[Any, int] | None:
        """remove-orphan-files' valid files (what ``md``'s snapshots reach, and ``extras()``) as the
        engine's own set and their count; None: judged on this machine by the orphan matcher."""
        return None

    def orphan_candidates(self, valid: Any, listed: list[tuple[str, int, bool]], *, valid_lookup: Any,
                          listed_lookup: Any, shared: Any) -> tuple[list[tuple[str, int, bool]], list[str]]:
        """Of ``listed``, the files left to judge and the valid paths judging them needs (``valid``:
        from :meth:`valid_frame`)."""
        raise NotImplementedError(f"the {self.name} engine keeps no valid-file set of its own")

    def remote_deletes(self) -> Executor | None:
        """How deletes run on the engine (``--executor-deletes``), for
        :func:`icectl.table.deletes.delete_checked`; None: on this machine's threads."""
        return None

    def mark(self) -> Any:
        """A point to report from (:meth:`report_since`): one table of an ``--all`` run."""
        return None

    def report_since(self, mark: Any) -> EngineReport:
        return self.report()

    def close(self) -> None:
        return None


@dataclass
class LocalEngine(Engine):
    """Threads of this process with a bounded read-ahead: memory stays flat however many items."""

    workers: int = READ_WORKERS
    name: str = field(default="local", init=False)
    runs_in_process: ClassVar[bool] = True

    def map(self, fn: Callable[[S, T], R], items: Sequence[T], *, shared: S, description: str,
            range_keys: Sequence[Any] | None = None, items_per_task: int | None = None) -> Generator[R, None, None]:
        todo = list(items)
        if not todo:
            return
        with progress.task(description, len(todo)) as advance:
            for got in ordered_map(functools.partial(fn, shared), todo, workers=self.workers):
                advance(1)
                yield got


_LOCAL = LocalEngine()
_active: ContextVar[Engine] = ContextVar("icectl_engine", default=_LOCAL)


def active() -> Engine:
    """The engine of this run (the local engine unless :func:`using` set another)."""
    return _active.get()


@contextmanager
def using(engine: Engine) -> Iterator[Engine]:
    token = _active.set(engine)
    try:
        yield engine
    finally:
        _active.reset(token)


def open_engine(settings: EngineSettings) -> Engine:
    """The engine ``settings`` name; the Spark engine starts or joins a SparkSession."""
    settings.check()
    if settings.name == "local":
        return _LOCAL
    from icectl.engine import spark  # run-time import: pyspark and a JVM only when asked for

    return spark.SparkEngine.start(settings)


# --------------------------------------------------------------------------- errors across processes


def pack_error(e: IcectlError) -> bytes:
    """An icectl error as bytes an executor sends back (rebuilt by :func:`unpack_error`): the class and
    its attributes, never its constructor (subclasses take other arguments)."""
    return pickle.dumps((type(e), str(e), dict(e.__dict__)))


def unpack_error(data: bytes) -> IcectlError:
    cls, text, attrs = pickle.loads(data)
    err = cls.__new__(cls)
    Exception.__init__(err, text)
    err.__dict__.update(attrs)
    return err


__all__ = ["ENGINES", "SPARK_SUGGESTED_MANIFESTS", "Engine", "EngineReport", "EngineSettings", "LocalEngine",
           "active", "open_engine", "parse_spark_conf", "using"]
