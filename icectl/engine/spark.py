"""The Spark engine: icectl's own functions run as Spark tasks, the driver keeps every decision.

- **Session.** :meth:`SparkEngine.start` joins the SparkSession this process already has (a PySpark
  job calling icectl as a library, the tests), else builds one from ``[engine]`` / ``--spark-master``
  / ``--spark-conf``: a master URL (``local[N]``, ``spark://``, ``yarn``, ``k8s://``) or a Spark
  Connect URL (``sc://``).
- **Shipping icectl.** The executors need icectl's code: the installed package is zipped once per
  version of its files (:mod:`icectl.engine.shipping`) and added with ``SparkContext.addPyFile`` (Spark
  Connect: ``addArtifacts(pyfile=True)``). Its dependencies (pyarrow, fastavro, pyroaring, fsspec,
  s3fs, mmh3) must be on the executors' Python: see the README (``--archives`` of a packed
  environment on YARN and standalone, the image on Kubernetes).
- **Work.** :meth:`SparkEngine.map` puts the items in a DataFrame (one row each, ``i``, the item
  pickled), ``mapInArrow`` runs the function on the executors and the results come back in order
  through ``toLocalIterator`` (one partition at a time: the driver never holds them all).
  ``range_keys`` range-partitions the items by that key first (compaction: by partition value).
- **Credentials.** The table's FileIO travels with the job (the S3 settings the driver resolved:
  the config's or a REST catalog's vended keys); AWS_* variables of the driver are passed to
  executors this engine starts as ``spark.executorEnv.*`` (redacted in Spark's UI).
- **Tasks.** Every job runs in the engine's job group; :meth:`report` counts their completed tasks
  through Spark's status tracker (None on Spark Connect, which has none), a run's own jobs by id (those
  above the mark taken before it). The tracker keeps the last ``spark.ui.retainedJobs`` /
  ``retainedStages`` (1,000) of them: only one run of more jobs than that under-counts.
"""

from __future__ import annotations

import os
import pickle
import sys
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from icectl import progress
from icectl.engine import Engine, EngineReport, EngineSettings, pack_error, spark_reach, unpack_error
from icectl.engine.shipping import package_zip
from icectl.errors import IcectlError, StorageError, UsageError
from icectl.spec.metadata import TableMetadata
from icectl.storage import FileIO
from icectl.table.deletes import Executor
from icectl.table.reach import FileSet, ReadCache, statistics_files
from icectl.threads import streaming_pool

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

# Items per Spark task: a task's fixed cost (~10-50 ms: scheduling, a Python worker, unpickling the
# shared state) must stay small against decoding its manifests (~1-5 ms each).
ITEMS_PER_TASK = 64
MIN_ITEMS_PER_TASK = 16
# Items per job: bounds what the driver holds (two windows of results) on a big cluster.
WINDOW_ITEMS = 8192
# Environment passed on to executors this engine starts (Spark's documented spark.executorEnv.*).
_FORWARDED_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                  "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "ICECTL_CACHE_DIR")


@dataclass
class SparkEngine(Engine):
    spark: SparkSession
    master: str | None = None
    executor_deletes: bool = False
    group: str = field(default_factory=lambda: f"icectl-{uuid.uuid4().hex[:12]}")
    name: str = field(default="spark", init=False)
    _connect: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._connect = not hasattr(self.spark, "sparkContext") or _is_connect(self.spark)
        if self.master is None:
            self.master = _master_of(self.spark)
        _ship(self.spark, self._connect)

    @classmethod
    def start(cls, settings: EngineSettings) -> SparkEngine:
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise UsageError("--engine spark needs PySpark", hint="pip install 'icectl[spark]'") from None
        running = SparkSession.getActiveSession()
        if running is not None and settings.master is None and not settings.conf:
            return cls(running, executor_deletes=settings.executor_deletes)
        builder = SparkSession.builder
        master = settings.master or "local[*]"
        connect = master.startswith("sc://")
        if connect:
            builder = builder.remote(master)
        else:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            # icectl draws its own progress bar; Spark's console bar would share stderr with it.
            builder = builder.master(master).appName("icectl").config("spark.ui.showConsoleProgress", "false")
            if not any(k == "spark.driver.extraJavaOptions" for k, _v in settings.conf):
                builder = builder.config("spark.driver.extraJavaOptions",
                                         f"-Dlog4j2.configurationFile=file:{_quiet_log4j()}")
            for key in _FORWARDED_ENV:
                if os.environ.get(key):
                    builder = builder.config(f"spark.executorEnv.{key}", os.environ[key])
        for key, value in settings.conf:
            builder = builder.config(key, value)
        try:
            spark = builder.getOrCreate()
        except Exception as e:  # py4j / JVM start-up failures have no common importable base
            raise StorageError(f"could not start or reach Spark at {master}: {type(e).__name__}: "
                               f"{' '.join(str(e).split())[:300]}",
                               hint="check --spark-master, [engine] master and JAVA_HOME") from None
        # getOrCreate hands back a session this process already had (whatever master was asked for):
        # that one is the user's, and keeps its settings.
        if running is None and not connect and "spark.sql.shuffle.partitions" not in dict(settings.conf):
            # Spark's default of 200 shuffle partitions (kept as it is by persisted frames, which
            # adaptive execution does not coalesce) made expiry's joins thousands of tiny tasks:
            # two per core instead, in the session icectl started (a joined session keeps its own).
            cores = max(1, int(spark.sparkContext.defaultParallelism))
            spark.conf.set("spark.sql.shuffle.partitions", str(2 * cores))
        return cls(spark, master=master, executor_deletes=settings.executor_deletes)

    # -- set algebra and deletes as Spark jobs (icectl.engine.spark_reach)

    def doomed_files(self, before: TableMetadata, expired: list[int], after: TableMetadata, io: FileIO,
                     cache: ReadCache, *, extra: Callable[[set[str]], FileSet] | None = None) -> FileSet:
        """As Spark joins (:func:`icectl.engine.spark_reach.doomed_files`) for v1-v3 tables without
        ``extra`` (leftovers of earlier runs); v4 tables and leftovers are judged on the driver."""
        if extra is not None or not spark_reach.supports(before, after):
            return super().doomed_files(before, expired, after, io, cache, extra=extra)
        return FileSet(dict(spark_reach.doomed_files(self, before, expired, after, io,
                                                     statistics_files(before) if expired else set(),
                                                     statistics_files(after), memo=cache.spark)))

    def valid_frame(self, md: TableMetadata, io: FileIO,
                    extras: Callable[[], list[tuple[str, str]]]) -> tuple[Any, int] | None:
        """v1-v3 tables: :func:`icectl.engine.spark_reach.valid_frame`; v4 ones are judged on the driver."""
        if not spark_reach.supports(md):
            return None
        return spark_reach.valid_frame(self, md, io, extras())

    def orphan_candidates(self, valid: Any, listed: list[tuple[str, int, bool]], *, valid_lookup: Any,
                          listed_lookup: Any, shared: Any) -> tuple[list[tuple[str, int, bool]], list[str]]:
        return spark_reach.orphan_candidates(self, valid, listed, valid_lookup=valid_lookup,
                                             listed_lookup=listed_lookup, shared=shared)

    def remote_deletes(self) -> Executor | None:
        if not self.executor_deletes:
            return None
        return lambda fn, items, shared, description: spark_reach.run_deletes(self, fn, items, shared=shared,
                                                                              description=description)

    # ------------------------------------------------------------------ work

    def map(self, fn: Callable[[S, T], R], items: Sequence[T], *, shared: S, description: str,
            range_keys: Sequence[Any] | None = None, items_per_task: int | None = None) -> Generator[R, None, None]:
        todo = list(items)
        if not todo:
            return
        run = _executor_function(fn, pickle.dumps(shared))
        with progress.task(description, len(todo)) as advance:
            if range_keys is not None:  # one job, range-partitioned; back in item order (results are small)
                self._set_group(description)
                df = self._items_frame(todo, list(range_keys), 0, items_per_task)
                for row in sorted(self._collect(df, run), key=lambda r: r["i"]):
                    advance(1)
                    yield _result(row)
                return
            # Windows of items, one job each, the next computed while this one is handed out: every core
            # busy (toLocalIterator would run one partition at a time), the driver holding two windows.
            size = self._window()
            windows = [(start, todo[start:start + size]) for start in range(0, len(todo), size)]

            def window(start: int, chunk: list[Any]) -> list[Any]:
                self._set_group(description)  # the job group is per thread (PySpark's pinned threads)
                return sorted(self._collect(self._items_frame(chunk, None, start, items_per_task), run),
                              key=lambda r: r["i"])

            with streaming_pool(1) as pool:
                pending = pool.submit(window, *windows[0])
                for k in range(len(windows)):
                    rows = pending.result()
                    if k + 1 < len(windows):
                        pending = pool.submit(window, *windows[k + 1])
                    for row in rows:
                        advance(1)
                        yield _result(row)

    def _collect(self, df: Any, run: Callable[[Iterator[Any]], Iterator[Any]]) -> list[Any]:
        try:
            return df.mapInArrow(run, "i long, ok boolean, payload binary").collect()
        except Exception as e:  # a lost executor, a Python error there: py4j/PySpark errors share no base
            lines = [x.strip() for x in str(e).splitlines() if x.strip()]
            last = next((x for x in reversed(lines) if "Error" in x or "Exception" in x), lines[-1] if lines else "")
            raise StorageError(f"a Spark job failed: {type(e).__name__}: {last[:300]}",
                               hint="nothing was committed by it; see the Spark logs, or rerun with --debug") from e

    def _window(self) -> int:
        """Items per job: enough for two rounds of tasks on every core, at most WINDOW_ITEMS."""
        return max(ITEMS_PER_TASK, min(WINDOW_ITEMS, self._parallelism() * 2 * ITEMS_PER_TASK))

    def _items_frame(self, todo: list[Any], range_keys: list[Any] | None, offset: int,
                     items_per_task: int | None = None) -> Any:
        from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

        # Two tasks per core, each of MIN_ITEMS_PER_TASK to ITEMS_PER_TASK items: a small table
        # takes one or two tasks (a task costs ~0.1 s on local[N]), a big one spreads.
        spread = -(-len(todo) // (self._parallelism() * 2))
        per_task = max(1, min(ITEMS_PER_TASK, max(spread, min(MIN_ITEMS_PER_TASK, ITEMS_PER_TASK))))
        if items_per_task is not None:  # heavy items: at most this many a task, so every core gets some
            per_task = max(1, min(per_task, items_per_task))
        slices = max(1, -(-len(todo) // per_task))
        schema = StructType([StructField("i", LongType(), False), StructField("key", StringType(), True),
                             StructField("item", BinaryType(), False)])
        keys = [None] * len(todo) if range_keys is None else [_sortable(k) for k in range_keys]
        rows = [(offset + i, k, pickle.dumps(item)) for i, (item, k) in enumerate(zip(todo, keys, strict=True))]
        if self._connect:
            df = self.spark.createDataFrame(rows, schema)
        else:
            df = self.spark.createDataFrame(self.spark.sparkContext.parallelize(rows, slices), schema)
        if range_keys is not None:
            df = df.repartitionByRange(slices, "key", "i")
        return df

    def _parallelism(self) -> int:
        if self._connect:
            return 2
        return max(1, int(self.spark.sparkContext.defaultParallelism))

    def describe(self, description: str) -> None:
        """Put the next Spark jobs of this thread in the engine's job group (counted by :meth:`report`):
        for DataFrame jobs run outside :meth:`map` (icectl.engine.spark_reach's joins)."""
        self._set_group(description)

    def _set_group(self, description: str) -> None:
        if self._connect:
            self.spark.addTag(self.group)
            return
        sc = self.spark.sparkContext
        sc.setJobGroup(self.group, f"icectl: {description}", interruptOnCancel=True)

    # ------------------------------------------------------------------ reports

    def mark(self) -> Any:
        """The newest job id of the engine's group so far (job ids only grow): what ran since is
        what has a larger id, however many older jobs Spark has stopped retaining."""
        jobs = self._job_ids()
        return max(jobs, default=-1) if jobs is not None else None

    def report(self) -> EngineReport:
        jobs, tasks = self._counts(-1)
        return EngineReport("spark", self.master, jobs, tasks)

    def report_since(self, mark: Any) -> EngineReport:
        jobs, tasks = self._counts(mark if isinstance(mark, int) else -1)
        return EngineReport("spark", self.master, jobs, tasks)

    def _job_ids(self) -> list[int] | None:
        if self._connect:
            return None
        return list(self.spark.sparkContext.statusTracker().getJobIdsForGroup(self.group))

    def _counts(self, after: int) -> tuple[int | None, int | None]:
        """Jobs of the group with an id above ``after``, and the tasks their stages completed."""
        ids = self._job_ids()
        if ids is None:
            return None, None
        tracker = self.spark.sparkContext.statusTracker()
        jobs = [j for j in ids if j > after]
        stages: set[int] = set()  # a job reading another's shuffle lists that stage again
        for j in jobs:
            info = tracker.getJobInfo(j)
            stages.update(info.stageIds if info else ())
        tasks = 0
        for s in stages:
            stage = tracker.getStageInfo(s)
            # Completed, not planned: a stage Spark skips (a shuffle's output reused) runs no task.
            tasks += stage.numCompletedTasks if stage else 0
        return len(jobs), tasks

    def frame(self, rows: list[tuple[Any, ...]], schema: str, *, per_task: int = 1024) -> Any:
        """A DataFrame of driver-side rows (listings, keys), ``per_task`` rows a task (at most four tasks
        per core)."""
        if self._connect:
            return self.spark.createDataFrame(rows, schema)
        slices = max(1, min(-(-len(rows) // per_task), self._parallelism() * 4))
        return self.spark.createDataFrame(self.spark.sparkContext.parallelize(rows, slices), schema)


_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def _quiet_log4j() -> str:
    """A log4j2 file that lets Spark print errors only: stderr is icectl's one line per problem."""
    path = os.path.join(os.path.dirname(package_zip()), "log4j2-icectl.properties")
    if not os.path.isfile(path) or Path(path).read_text() != _LOG4J2:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            fh.write(_LOG4J2)
        os.replace(tmp, path)
    return path


def _result(row: Any) -> Any:
    if row["ok"]:
        return pickle.loads(row["payload"])
    raise unpack_error(row["payload"])


def _sortable(key: Any) -> str:
    """A range key as text that sorts as the key does (repr of a tuple of partition values)."""
    return key if isinstance(key, str) else repr(key)


def _executor_function(fn: Callable[[Any, Any], Any], shared: bytes) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs on the executors: each item through ``fn``, in order."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        os.environ.setdefault("ICECTL_DECODE_PROCESSES", "0")  # the executor's cores are Spark's
        state = pickle.loads(shared)
        for batch in batches:
            idx, oks, payloads = [], [], []
            for i, item in zip(batch.column("i").to_pylist(), batch.column("item").to_pylist(), strict=True):
                try:
                    payloads.append(pickle.dumps(fn(state, pickle.loads(item))))
                    oks.append(True)
                except IcectlError as e:  # the driver raises it as itself
                    payloads.append(pack_error(e))
                    oks.append(False)
                idx.append(i)
            yield pa.RecordBatch.from_arrays([pa.array(idx, pa.int64()), pa.array(oks, pa.bool_()),
                                              pa.array(payloads, pa.binary())], names=["i", "ok", "payload"])

    return run


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _master_of(spark: Any) -> str | None:
    try:
        return str(spark.sparkContext.master)
    except Exception:  # Spark Connect has no SparkContext
        return None


_SHIPPED: set[tuple[int, str]] = set()


def _ship(spark: Any, connect: bool) -> None:
    """icectl's code to the executors, once per session and version of the code."""
    path = package_zip()
    key = (id(spark), path)
    if key in _SHIPPED:
        return
    if connect:
        spark.addArtifacts(path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(path)
    _SHIPPED.add(key)


__all__ = ["ITEMS_PER_TASK", "WINDOW_ITEMS", "SparkEngine"]
