"""Benchmark `icectl rewrite-data-files` against Spark's `rewrite_data_files` procedure on identical tables.

Issue 30's acceptance: "side by side with Spark's procedure (warm CALL and CLI) on the same table
(e.g. 10,000 small files of 1 MB, with 10% rows deleted): icectl local at least as fast as Spark
local[2] on this machine".

For each format version (v2: position delete files; v3: deletion vectors) one table is built once by
real Spark (INSERTs of many small files, then a merge-on-read DELETE of ~10% of the rows) and kept
pristine; before every timed run the pristine copy is restored to the table's own path (``cp -a``:
new inodes, every absolute path of its metadata still valid), so each contender rewrites a fresh
twin of the very same table. Contenders, all with the same options (Spark's option names,
``--option``; icectl gets the matching flags):

* ``icectl CLI``: ``python -m icectl rewrite-data-files DIR --json [flags]``, a whole process;
* ``Spark CLI``: a fresh ``python`` that starts a SparkSession (``tests/support/spark.py``'s
  ``start_spark``: ``local[2]``, the Iceberg 1.10 runtime) and runs the CALL once, a whole process;
* ``Spark CALL (warm)``: ``CALL local.system.rewrite_data_files(table => ..., options => map(...))``
  in a session the benchmark started, after one untimed warm-up CALL on another twin;
* with ``--engine-spark-masters local[1] local[2]`` (off by default): ``icectl CLI --engine spark
  local[N]``, the icectl CLI with ``--engine spark --spark-master local[N]``, a whole process (its own
  JVM started, icectl's zip shipped, each file group a Spark task running icectl's code, the plan and
  the commit on the driver). Its CPU counts the JVM and the Python workers: the benchmark is their
  subreaper for that run (Linux ``prctl``) and waits for them after the CLI exits.

Every run is checked with the warm session: Spark's row count and checksum of the table equal the
pristine table's (v3: each row's ``_row_id`` and ``_last_updated_sequence_number`` too), every data
file was rewritten, and the data and delete files left are counted.

    python benchmarks/bench_rewrite_data_files.py                          # 2,000 files x ~256 KB, v2 and v3
    python benchmarks/bench_rewrite_data_files.py --files 10000 --file-kb 1024   # the issue's full size
    python benchmarks/bench_rewrite_data_files.py --dir /tmp/br --runs 3 --profile
    python benchmarks/bench_rewrite_data_files.py --dir /tmp/br --versions 3 --no-spark-cli
    python benchmarks/bench_rewrite_data_files.py --dir /tmp/br --engine-spark-masters 'local[1]' 'local[2]'

Needs the test extra (pyspark, the Iceberg runtime, Java 17): ``pip install -e ".[test]"``. The
profile uses py-spy when it is on PATH (``--py-spy``), every thread sampled; else cProfile (the main
thread only).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import pyarrow.parquet as pq  # noqa: E402
from bench_expire import REPO, SUBPROCESS_TIMEOUT_S, _children_cpu, _cli_env, _proc_cpu  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Parquet bytes per row of the generated rows (ZSTD, Iceberg's default codec), measured: sizes the
# rows per file from --file-kb.
BYTES_PER_ROW = 77
FILES_PER_INSERT = 500
DEFAULT_OPTIONS = ("min-input-files=2",)
COUNTS = ("rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count",
          "failed_data_files_count", "removed_delete_files_count")
# Spark option -> icectl flag (None: a boolean flag, given when the value is true).
FLAGS: dict[str, str | None] = {
    "target-file-size-bytes": "--target-file-size-bytes", "min-file-size-bytes": "--min-file-size-bytes",
    "max-file-size-bytes": "--max-file-size-bytes", "min-input-files": "--min-input-files",
    "max-file-group-size-bytes": "--max-file-group-size-bytes", "delete-file-threshold": "--delete-file-threshold",
    "delete-ratio-threshold": "--delete-ratio-threshold", "rewrite-all": None,
    "partial-progress.enabled": None, "partial-progress.max-commits": "--max-commits",
    "max-concurrent-file-group-rewrites": "--max-concurrent-file-group-rewrites",
}
BOOLEAN_FLAGS = {"rewrite-all": "--rewrite-all", "partial-progress.enabled": "--partial-progress"}

# A fresh interpreter that starts Spark as the test suite does and runs the procedure once: the
# whole process is what a cron job pays. It imports nothing of icectl.
SPARK_CHILD = textwrap.dedent("""
    import json, os, sys, time
    t0 = time.perf_counter()
    from support.spark import start_spark
    warehouse, table, options = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = start_spark(warehouse)
    t1 = time.perf_counter()
    row = spark.sql(f"CALL local.system.rewrite_data_files(table => '{table}'{options})").collect()[0]
    t2 = time.perf_counter()
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{jvm_pid}/stat") as fh:  # utime, stime: the JVM is not reaped by this process
        jvm_cpu_s = sum(int(x) for x in fh.read().rsplit(")", 1)[1].split()[11:13]) / os.sysconf("SC_CLK_TCK")
    spark.stop()
    t3 = time.perf_counter()
    print(json.dumps({"row": row.asDict(), "startup_s": t1 - t0, "call_s": t2 - t1, "stop_s": t3 - t2,
                      "jvm_cpu_s": jvm_cpu_s}))
""")


# --------------------------------------------------------------------------- the tables


@dataclass(frozen=True)
class Shape:
    """One table: ``files`` data files of ~``file_kb`` KB in ``partitions`` identity partitions (0:
    unpartitioned), format ``version``, ``delete_pct`` % of the rows deleted (merge-on-read)."""

    version: int
    files: int
    file_kb: int
    partitions: int
    delete_pct: int

    @property
    def name(self) -> str:
        return f"rewrite_v{self.version}_{self.files}x{self.file_kb}k_p{self.partitions}_d{self.delete_pct}"

    @property
    def rows_per_file(self) -> int:
        return max(1, self.file_kb * 1024 // BYTES_PER_ROW)

    def describe(self) -> str:
        parts = f"{self.partitions} partitions" if self.partitions else "unpartitioned"
        deletes = "position deletes" if self.version == 2 else "deletion vectors"
        return (f"v{self.version}, {self.files:,} files x ~{self.file_kb} KB, {parts}, {self.delete_pct}% rows "
                f"deleted ({deletes})")


@dataclass(frozen=True)
class Layout:
    """``<root>/warehouse/db/<name>`` is the live table (Spark: ``local.db.<name>``);
    ``<root>/pristine/<name>`` its untouched copy, restored to the live path before every run."""

    root: Path

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    def live(self, s: Shape) -> Path:
        return self.warehouse / "db" / s.name

    def pristine(self, s: Shape) -> Path:
        return self.root / "pristine" / s.name

    def info_path(self, s: Shape) -> Path:
        return self.root / "pristine" / f"{s.name}.json"


def restore(layout: Layout, s: Shape) -> None:
    """A fresh twin of the pristine table at the table's own path (new inodes)."""
    live = layout.live(s)
    if live.exists():
        shutil.rmtree(live)
    live.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(layout.pristine(s)), str(live)], check=True)


def _rows_sql(start: int, end: int, s: Shape) -> str:
    """Deterministic rows ``start <= id < end``; the ``rows_per_file`` rows of one task share one
    category, so each task writes exactly one file."""
    rpf = s.rows_per_file
    category = f"concat('c', cast(pmod(floor(id / {rpf}), {max(1, s.partitions)}) AS string))"
    return (f"SELECT id, {category} AS category, timestamp_seconds(1700000000 + pmod(id, 2592000)) AS ts, "
            f"CAST(pmod(xxhash64(id), 10000000) AS double) / 100 AS amount, "
            f"concat(sha2(CAST(id AS string), 256), sha2(CAST(id * 7 AS string), 256)) AS payload "
            f"FROM range({start}, {end}, 1, {(end - start) // rpf})")


def build(spark: SparkSession, layout: Layout, s: Shape) -> None:
    table = f"local.db.{s.name}"
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
    mor = ", ".join(f"'write.{op}.mode'='merge-on-read'" for op in ("delete", "update", "merge"))
    spark.sql(f"CREATE TABLE {table} (id bigint, category string, ts timestamp, amount double, payload string) "
              f"USING iceberg {'PARTITIONED BY (category)' if s.partitions else ''} "
              f"TBLPROPERTIES ('format-version'='{s.version}', 'write.distribution-mode'='none', {mor})")
    rpf = s.rows_per_file
    for first in range(0, s.files, FILES_PER_INSERT):  # one INSERT (one append snapshot) per 500 files
        k = min(FILES_PER_INSERT, s.files - first)
        spark.sql(f"INSERT INTO {table} {_rows_sql(first * rpf, (first + k) * rpf, s)}")
    if s.delete_pct:
        spark.sql(f"DELETE FROM {table} WHERE pmod(id, 100) < {s.delete_pct}")


def digest(spark: SparkSession, s: Shape) -> dict[str, Any]:
    """Spark's row count, a multiset checksum of the rows (the sum of each row's 64-bit hash) and,
    for v3, one of each row's lineage (``_row_id``, ``_last_updated_sequence_number``)."""
    table = f"local.db.{s.name}"
    lineage = (", CAST(sum(CAST(xxhash64(id, _row_id, _last_updated_sequence_number) AS decimal(38, 0))) AS string)"
               if s.version >= 3 else ", ''")
    # Row-based reads for the check: Iceberg's vectorized reader of `_row_id` (1.10) ran the 1 GB
    # session out of direct memory on icectl's 1.5M-row row groups after a few checks. The CALLs
    # timed run with the session's defaults.
    key = "spark.sql.iceberg.vectorization.enabled"
    spark.conf.set(key, "false")
    try:
        row = spark.sql(f"SELECT count(*), CAST(sum(CAST(xxhash64(id, category, ts, amount, payload) AS "
                        f"decimal(38, 0))) AS string){lineage} FROM {table}").collect()[0]
    finally:
        spark.conf.unset(key)
    return {"rows": int(row[0]), "checksum": row[1], "lineage": row[2]}


def file_counts(spark: SparkSession, s: Shape) -> dict[str, Any]:
    """Live data and delete files (and their bytes) as Spark's ``files`` metadata table lists them."""
    out = {"data_files": 0, "data_bytes": 0, "delete_files": 0, "delete_bytes": 0, "row_groups": 0}
    for content, path, size in spark.sql(f"SELECT content, file_path, file_size_in_bytes FROM local.db.{s.name}.files"
                                         ).collect():
        kind = "data" if content == 0 else "delete"
        out[f"{kind}_files"] += 1
        out[f"{kind}_bytes"] += int(size)
        if kind == "data" and out["data_files"] <= 100:  # the written files' layout (at most 100 footers)
            out["row_groups"] += pq.ParquetFile(path.removeprefix("file:")).metadata.num_row_groups
    return out


def ensure_table(layout: Layout, s: Shape, spark: Callable[[], SparkSession], rebuild: bool = False) -> dict[str, Any]:
    """Build the pristine table (or reuse the one in the layout); returns its description."""
    info_path = layout.info_path(s)
    if not rebuild and info_path.is_file() and layout.pristine(s).is_dir():
        info: dict[str, Any] = json.loads(info_path.read_text())
        print(f"  reusing {layout.pristine(s)} (built in {info['build_s']:.0f}s)", flush=True)
        return info
    for p in (layout.live(s), layout.pristine(s)):
        if p.exists():
            shutil.rmtree(p)
    print(f"  building {s.describe()} with Spark in {layout.live(s)}", flush=True)
    session = spark()
    start = time.perf_counter()
    build(session, layout, s)
    seconds = time.perf_counter() - start
    info = {"shape": s.__dict__, "build_s": seconds, **file_counts(session, s), **digest(session, s)}
    layout.pristine(s).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(layout.live(s)), str(layout.pristine(s))], check=True)
    info_path.write_text(json.dumps(info))
    print(f"  built in {seconds:.0f}s: {info['data_files']} data files ({info['data_bytes'] / 1e6:.0f} MB), "
          f"{info['delete_files']} delete files, {info['rows']:,} rows", flush=True)
    return info


# --------------------------------------------------------------------------- contenders


def parse_options(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in FLAGS:
            raise SystemExit(f"--option {item!r}: expected KEY=VALUE with KEY one of {', '.join(FLAGS)}")
        out[key] = value
    return out


def icectl_flags(options: dict[str, str]) -> list[str]:
    flags: list[str] = []
    for key, value in options.items():
        flag = FLAGS[key]
        if flag is None:
            if value.lower() == "true":
                flags.append(BOOLEAN_FLAGS[key])
        else:
            flags += [flag, value]
    return flags


def spark_options(options: dict[str, str]) -> str:
    if not options:
        return ""
    return ", options => map(" + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + ")"


@dataclass
class Outcome:
    counts: dict[str, int]
    cpu: float  # seconds of CPU, user + system, of every process involved (the JVM included)
    inner: dict[str, float] = field(default_factory=dict)


# The CLI with the Spark engine's smallest task size set first (a diagnostic: how the run scales
# when each file group is its own task); the rest of argv is the CLI's.
PACKED_CLI = textwrap.dedent("""
    import runpy, sys
    import icectl.engine.spark as spark_engine
    spark_engine.MIN_ITEMS_PER_TASK = int(sys.argv.pop(1))
    runpy.run_module("icectl", run_name="__main__", alter_sys=True)
""")


def icectl_cmd(table_dir: Path, options: dict[str, str], spark_master: str | None = None,
               min_items_per_task: int | None = None) -> list[str]:
    engine = ["--engine", "spark", "--spark-master", spark_master] if spark_master else []
    run = ["-c", PACKED_CLI, str(min_items_per_task)] if min_items_per_task else ["-m", "icectl"]
    return [sys.executable, *run, "rewrite-data-files", str(table_dir), "--json", *icectl_flags(options), *engine]


def icectl_cli(table_dir: Path, options: dict[str, str], spark_master: str | None = None,
               min_items_per_task: int | None = None) -> Outcome:
    """The CLI as a whole process; with ``spark_master``, ``--engine spark`` on it: the JVM the CLI
    starts (and its Python workers) outlive the CLI's process unreaped, so this process becomes
    their subreaper for the run and waits for them (their CPU then counts in RUSAGE_CHILDREN)."""
    before = _own_children()
    cpu = _children_cpu()
    with _subreaper(spark_master is not None):
        proc = subprocess.run(icectl_cmd(table_dir, options, spark_master, min_items_per_task), capture_output=True,
                              text=True, cwd=REPO, env=_cli_env(), timeout=SUBPROCESS_TIMEOUT_S)
        if spark_master is not None:
            _reap_left(before)
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"FAIL: icectl CLI exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    doc = json.loads(proc.stdout)
    engine = doc.get("engine") or {}
    inner = {"spark_tasks": float(engine["spark_tasks"])} if engine.get("spark_tasks") is not None else {}
    return Outcome({k: int(doc[k]) for k in COUNTS}, cpu, inner)


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


class _subreaper:
    """Orphaned descendants reparent to this process while it is on (Linux; elsewhere a no-op, and
    the JVM's CPU is then not counted)."""

    def __init__(self, on: bool) -> None:
        self.on = on and sys.platform.startswith("linux")

    def _set(self, value: int) -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, value, 0, 0, 0)

    def __enter__(self) -> None:
        if self.on:
            self._set(1)

    def __exit__(self, *exc: object) -> None:
        if self.on:
            self._set(0)


def _own_children() -> set[int]:
    """The pids whose parent is this process (zombies included), from /proc."""
    me, out = os.getpid(), set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == me:
                out.add(int(entry.name))
    return out


def _reap_left(before: set[int], timeout_s: float = 120.0) -> None:
    """Wait for the children this process gained since ``before`` (a CLI's orphaned JVM and Python
    workers, reparented here) until none is left; kill what is still running after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = _own_children() - before
        if not left:
            return
        for pid in left:
            try:
                if time.monotonic() > deadline:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                else:
                    os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.05)


def spark_cli(warehouse: Path, s: Shape, options: dict[str, str]) -> Outcome:
    cpu = _children_cpu()
    proc = subprocess.run([sys.executable, "-c", SPARK_CHILD, str(warehouse), f"db.{s.name}", spark_options(options)],
                          capture_output=True, text=True, cwd=REPO, env=_cli_env(), timeout=SUBPROCESS_TIMEOUT_S)
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"FAIL: Spark job exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    return Outcome({k: int(doc["row"][k]) for k in COUNTS}, cpu + doc["jvm_cpu_s"],
                   {k: doc[k] for k in ("startup_s", "call_s", "stop_s")})


def spark_call(spark: SparkSession, s: Shape, options: dict[str, str]) -> Outcome:
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]
    cpu = _proc_cpu(jvm_pid) + time.process_time()
    call = f"CALL local.system.rewrite_data_files(table => 'db.{s.name}'{spark_options(options)})"
    row = spark.sql(call).collect()[0]
    return Outcome({k: int(row[k]) for k in COUNTS}, _proc_cpu(jvm_pid) + time.process_time() - cpu)


ENGINE_CONTENDER = "icectl CLI --engine spark "


def engine_contender(master: str, min_items_per_task: int | None = None) -> str:
    return ENGINE_CONTENDER + master + (f" (MIN_ITEMS_PER_TASK={min_items_per_task})" if min_items_per_task else "")


# --------------------------------------------------------------------------- timing and checks


@dataclass
class Run:
    seconds: float
    outcome: Outcome
    load_before: float
    load_after: float
    after: dict[str, Any] = field(default_factory=dict)  # files left, lineage kept


@dataclass
class Contender:
    name: str
    fn: Callable[[], Outcome]
    warm_up: bool = False
    runs: list[Run] = field(default_factory=list)

    @property
    def best(self) -> Run:
        return min(self.runs, key=lambda r: r.seconds)

    @property
    def median(self) -> float:
        return statistics.median(r.seconds for r in self.runs)


@dataclass
class Result:
    shape: Shape
    info: dict[str, Any]
    contenders: list[Contender]

    def get(self, name: str) -> Contender | None:
        return next((c for c in self.contenders if c.name == name), None)


def check(spark: SparkSession | None, s: Shape, info: dict[str, Any], name: str, outcome: Outcome) -> dict[str, Any]:
    """The table a contender left: the same rows (and v3 lineage) as the pristine one, every data
    file rewritten, nothing failed. Returns the files left and whether the lineage was kept."""
    c = outcome.counts
    if c["failed_data_files_count"] or c["rewritten_data_files_count"] != info["data_files"]:
        sys.exit(f"FAIL: {name}: rewrote {c['rewritten_data_files_count']} of {info['data_files']} data files, "
                 f"{c['failed_data_files_count']} failed")
    if spark is None:
        return {}
    seen = digest(spark, s)
    if (seen["rows"], seen["checksum"]) != (info["rows"], info["checksum"]):
        sys.exit(f"FAIL: after {name}, Spark reads {seen['rows']:,} rows (checksum {seen['checksum']}), expected "
                 f"{info['rows']:,} ({info['checksum']})")
    after = file_counts(spark, s)
    if after["data_files"] != c["added_data_files_count"]:
        sys.exit(f"FAIL: after {name}, {after['data_files']} data files live, but it reported "
                 f"{c['added_data_files_count']} added")
    after["lineage_kept"] = seen["lineage"] == info["lineage"]
    if name.startswith("icectl") and not after["lineage_kept"]:
        sys.exit(f"FAIL: after {name}, the rows' _row_id / _last_updated_sequence_number changed")
    return after


def time_rounds(layout: Layout, s: Shape, info: dict[str, Any], contenders: list[Contender], runs: int,
                spark: SparkSession | None) -> None:
    for c in contenders:
        if c.warm_up:  # one untimed run on another twin: class loading, JIT
            restore(layout, s)
            check(spark, s, info, c.name, c.fn())
    for r in range(runs):
        for c in contenders:
            restore(layout, s)
            load0 = os.getloadavg()[0]
            start = time.perf_counter()
            outcome = c.fn()
            seconds = time.perf_counter() - start
            run = Run(seconds, outcome, load0, os.getloadavg()[0])
            run.after = check(spark, s, info, c.name, outcome)
            c.runs.append(run)
        done = (f"{c.name} {c.runs[-1].seconds:.2f}s (load {c.runs[-1].load_before:.1f})" for c in contenders)
        print(f"  round {r + 1}/{runs}: " + ", ".join(done), flush=True)


def measure(layout: Layout, shapes: list[Shape], runs: int, options: dict[str, str], spark: Callable[[], SparkSession],
            *, with_spark: bool = True, spark_cli_runs: bool = True, rebuild: bool = False,
            before_icectl: Callable[[], None] | None = None,
            engine_spark_masters: tuple[str, ...] = (), engine_min_items: tuple[int, ...] = ()) -> list[Result]:
    """Build (or reuse) each table and time the contenders on fresh twins of it (with
    ``engine_spark_masters``, the icectl CLI with ``--engine spark`` on each master too, as it is
    and with each of ``engine_min_items`` as the Spark engine's MIN_ITEMS_PER_TASK)."""
    results = []
    for s in shapes:
        print(f"\n# {s.describe()}", flush=True)
        info = ensure_table(layout, s, spark, rebuild)
        live = layout.live(s)

        def ours(live: Path = live) -> Outcome:
            if before_icectl is not None:
                before_icectl()
            return icectl_cli(live, options)

        contenders = [Contender("icectl CLI", ours)]
        for n in (None, *engine_min_items):
            for master in engine_spark_masters:
                contenders.append(Contender(engine_contender(master, n),
                                            lambda live=live, m=master, n=n: icectl_cli(live, options, m, n)))
        warm = spark() if with_spark else None
        if warm is not None:
            if spark_cli_runs:
                contenders.append(Contender("Spark CLI", lambda s=s: spark_cli(layout.warehouse, s, options)))
            contenders.append(Contender("Spark CALL (warm)", lambda s=s, w=warm: spark_call(w, s, options),
                                        warm_up=True))
        print(f"  timing ({runs} rounds, contenders interleaved, each on a fresh twin)", flush=True)
        time_rounds(layout, s, info, contenders, runs, warm)
        results.append(Result(s, info, contenders))
    return results


# --------------------------------------------------------------------------- profile


def _frame_key(frame: str) -> str:
    """``fn (path:line)`` -> ``fn (short path)``: one key per function."""
    fn, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/lib/python3", str(REPO) + "/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{fn} ({path})" if path else fn


def _counted_inclusive(key: str) -> bool:
    """Functions of icectl (but the CLI's entry points, which hold everything) and of pyarrow."""
    if "(icectl/cli/" in key or key.startswith("<module> (icectl/__main__"):
        return False
    return "(icectl/" in key or "(pyarrow/" in key


def profile(layout: Layout, s: Shape, options: dict[str, str], top: int, py_spy: str | None, dump: Path | None) -> None:
    """One more icectl CLI run on a fresh twin, profiled: py-spy (every thread, 100 samples/s; idle
    threads not counted) or, without it, cProfile (the main thread only)."""
    restore(layout, s)
    cmd = icectl_cmd(layout.live(s), options)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile"
        if py_spy:
            prof = [py_spy, "record", "-r", "100", "-f", "raw", "-o", str(out), "--"]
        else:
            prof = [sys.executable, "-m", "cProfile", "-o", str(out)]
            cmd = cmd[2:]  # cProfile runs the module itself
            prof += ["-m"]
        start = time.perf_counter()
        proc = subprocess.run(prof + cmd, capture_output=True, text=True, cwd=REPO, env=_cli_env(),
                              timeout=SUBPROCESS_TIMEOUT_S)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"FAIL: profiled icectl exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
        if dump:
            shutil.copy(out, dump)
        print(f"\n## Profile of icectl CLI, {s.describe()}: {seconds:.1f}s under "
              f"{'py-spy' if py_spy else 'cProfile'}, load {os.getloadavg()[0]:.1f}")
        if py_spy:
            own: Counter[str] = Counter()
            inclusive: Counter[str] = Counter()
            total = 0
            for line in out.read_text().splitlines():
                stack, _, n = line.rpartition(" ")
                if not stack:
                    continue
                count = int(n)
                frames = [_frame_key(f) for f in stack.split(";")]
                frames = [f for f in frames if not f.startswith(("process ", "thread "))] or frames
                total += count
                # Module imports as one line (their frames are the interpreter's, not icectl's).
                own["(module imports)" if any(f.startswith("_find_and_load ") for f in frames) else frames[-1]] += count
                for f in set(frames):
                    if _counted_inclusive(f):
                        inclusive[f] += count
            print(f"{total} samples over every thread (~{total / 100:.1f} thread-seconds busy)\n")
            for title, counter in (("own time", own), ("inclusive time (icectl and pyarrow)", inclusive)):
                print(f"| {title}: function | samples | % |\n| --- | ---: | ---: |")
                for key, hits in counter.most_common(top):
                    print(f"| `{key}` | {hits} | {100 * hits / total:.1f} |")
                print()
        else:
            stats = pstats.Stats(str(out))
            for key in ("tottime", "cumulative"):
                buf = io.StringIO()
                stats.stream = buf  # type: ignore[attr-defined]
                stats.sort_stats(key).print_stats(top)
                text = buf.getvalue()
                print(f"\n### cProfile by {key} (main thread only)\n{text[text.find('   ncalls'):]}")


# --------------------------------------------------------------------------- report


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def print_header(load_before: tuple[float, ...], options: dict[str, str], runs: int) -> None:
    dirty = git("status", "--porcelain", "--untracked-files=no")
    print(f"\n# rewrite-data-files benchmark (issue 30)\n\n"
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, commit "
          f"{git('rev-parse', '--short', 'HEAD')}{' (uncommitted changes)' if dirty else ''} "
          f"({git('rev-parse', '--abbrev-ref', 'HEAD')}), {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
          f"Spark local[2] with Iceberg 1.10; best of {runs} run(s)")
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{x:.2f}" for x in load_before) + "; after: "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"options (Spark's names; icectl gets the same as flags): {options or 'Spark defaults'}")


def print_rows(results: list[Result]) -> None:
    print("\nratio = best wall time of the contender / best wall time of the icectl CLI (local engine; > 1: the "
          "local icectl is faster)\n")
    print("| table | contender | best s | median s | CPU s | files in -> out | MB out | row groups out "
          "| delete files removed | left: data / delete files | v3 lineage kept | ratio | load 1 min |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- | ---: | --- |")
    for res in results:
        ours = res.get("icectl CLI")
        for c in res.contenders:
            b = c.best
            k = b.outcome.counts
            left = (f"{b.after['data_files']} / {b.after['delete_files']}" if b.after else "-")
            lineage = ("yes" if b.after.get("lineage_kept") else "**no**") if res.shape.version >= 3 and b.after \
                else "-"
            ratio = f"{b.seconds / ours.best.seconds:.2f}x" if ours and c is not ours else "-"
            layout = (f"{b.after['data_bytes'] / 1e6:.0f} | {b.after['row_groups']}" if b.after else "- | -")
            print(f"| {res.shape.describe()} | {c.name} | {b.seconds:.2f} | {c.median:.2f} | {b.outcome.cpu:.1f} "
                  f"| {k['rewritten_data_files_count']} -> {k['added_data_files_count']} | {layout} "
                  f"| {k['removed_delete_files_count']} | {left} | {lineage} | {ratio} "
                  f"| {b.load_before:.1f} -> {b.load_after:.1f} |")
    print()
    for res in results:
        ours = res.get("icectl CLI")
        line = f"{res.shape.describe()} (built in {res.info['build_s']:.0f}s, {res.info['data_bytes'] / 1e6:.0f} MB):"
        for name in ("Spark CALL (warm)", "Spark CLI"):
            other = res.get(name)
            if other and ours:
                met = ours.best.seconds <= other.best.seconds
                line += (f" vs {name} {other.best.seconds / ours.best.seconds:.2f}x "
                         f"({'target met' if met else 'TARGET MISSED'}: icectl at least as fast as Spark local[2]);")
        variants: dict[str, list[Contender]] = {}  # by what follows the master: the same code on each master
        for c in res.contenders:
            if c.name.startswith(ENGINE_CONTENDER):
                tasks = c.best.outcome.inner.get("spark_tasks")
                line += (f" {c.name.removeprefix('icectl CLI ')} {c.best.seconds:.2f}s (CPU {c.best.outcome.cpu:.1f}s"
                         f"{f', {tasks:.0f} Spark tasks' if tasks is not None else ''});")
                variant = c.name.removeprefix(ENGINE_CONTENDER).partition(" ")[2]
                variants.setdefault(variant, []).append(c)
        for engines in variants.values():
            if len(engines) >= 2:
                first, last = engines[0], engines[-1]
                line += (f" speed-up {first.name.removeprefix(ENGINE_CONTENDER)} -> "
                         f"{last.name.removeprefix(ENGINE_CONTENDER)}: {first.best.seconds / last.best.seconds:.2f}x;")
        spark = res.get("Spark CLI")
        if spark:
            inner = {k: statistics.median(r.outcome.inner[k] for r in spark.runs) for k in ("startup_s", "call_s",
                                                                                          "stop_s")}
            line += (f" Spark job median start-up {inner['startup_s']:.1f}s, CALL {inner['call_s']:.1f}s, "
                     f"stop {inner['stop_s']:.1f}s")
        print(line)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--files", type=int, default=2000, help="data files before the rewrite (default 2000)")
    ap.add_argument("--file-kb", type=int, default=256, help="approximate size of each, KB (default 256)")
    ap.add_argument("--partitions", type=int, default=4, help="identity partitions, 0: unpartitioned (default 4)")
    ap.add_argument("--delete-pct", type=int, default=10, help="%% of rows deleted, merge-on-read (default 10)")
    ap.add_argument("--versions", type=int, nargs="+", choices=(2, 3), default=[2, 3], help="format versions")
    ap.add_argument("--option", action="append", metavar="KEY=VALUE",
                    help=f"a rewrite option by Spark's name, for every contender (default {' '.join(DEFAULT_OPTIONS)}; "
                         f"--option '' for Spark's defaults)")
    ap.add_argument("--runs", type=int, default=1, help="timed rounds (default 1)")
    ap.add_argument("--dir", type=Path, help="work here and keep the tables for later runs (default: a temp dir)")
    ap.add_argument("--rebuild", action="store_true", help="build the tables again even if --dir has them")
    ap.add_argument("--no-spark", action="store_true", help="icectl only (Spark still builds the tables once)")
    ap.add_argument("--no-spark-cli", action="store_true", help="skip the whole-process Spark runs")
    ap.add_argument("--engine-spark-masters", nargs="+", default=[], metavar="MASTER",
                    help="also time the icectl CLI with --engine spark --spark-master MASTER for each (e.g. "
                         "'local[1]' 'local[2]'; default: not timed)")
    ap.add_argument("--engine-min-items-per-task", type=int, nargs="+", default=[], metavar="N",
                    help="diagnostic: also time each --engine-spark-masters run with the Spark engine's "
                         "MIN_ITEMS_PER_TASK set to N (1: a task per file group) in the CLI's process")
    ap.add_argument("--profile", action="store_true", help="then profile one icectl CLI run on the last table")
    ap.add_argument("--py-spy", default=shutil.which("py-spy"), help="py-spy binary (default: on PATH; else cProfile)")
    ap.add_argument("--profile-top", type=int, default=20)
    ap.add_argument("--profile-dump", type=Path, help="keep the raw profile here")
    args = ap.parse_args(argv)
    if any(f <= 0 for f in (args.files, args.file_kb)) or args.partitions < 0 or not 0 <= args.delete_pct < 100:
        ap.error("--files and --file-kb must be positive, --partitions >= 0, 0 <= --delete-pct < 100")
    options = parse_options([o for o in (args.option if args.option is not None else DEFAULT_OPTIONS) if o])
    root = args.dir or Path(tempfile.mkdtemp(prefix="icectl-bench-rewrite-"))
    root.mkdir(parents=True, exist_ok=True)
    layout = Layout(root.resolve())
    layout.warehouse.mkdir(parents=True, exist_ok=True)
    session: list[SparkSession] = []

    def spark() -> SparkSession:
        if not session:
            from support.spark import start_spark

            start = time.perf_counter()
            session.append(start_spark(str(layout.warehouse)))
            print(f"  Spark session started in {time.perf_counter() - start:.1f}s", flush=True)
        return session[0]

    load_before = os.getloadavg()
    shapes = [Shape(v, args.files, args.file_kb, args.partitions, args.delete_pct) for v in args.versions]
    try:
        results = measure(layout, shapes, args.runs, options, spark, with_spark=not args.no_spark,
                          spark_cli_runs=not args.no_spark_cli, rebuild=args.rebuild,
                          engine_spark_masters=tuple(args.engine_spark_masters),
                          engine_min_items=tuple(args.engine_min_items_per_task))
        print_header(load_before, options, args.runs)
        print_rows(results)
        if args.profile:
            profile(layout, shapes[-1], options, args.profile_top, args.py_spy, args.profile_dump)
    finally:
        for s in session:
            s.stop()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
