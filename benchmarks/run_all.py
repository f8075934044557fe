"""Every benchmark of issue 15 in one run, each figure beside its reference, its ratio and its target.

Builds the tables (or reuses them from ``--dir``), then measures, as a user or a cron job pays it
(a whole ``python -m icectl`` process each time):

* ``inspect files --json`` with and without ``--metrics``, cold (empty cache folder) and warm (the
  same folder after one run), against PyIceberg 0.12 ``inspect.files()`` (in-process, imports warm);
* ``expire-snapshots`` on 200 and 2,000 one-manifest snapshots against Spark's ``expire_snapshots``,
  from the command line (a whole Spark process) and warm (the CALL in a running session);
* ``compact`` against Spark's ``rewrite_manifests``, the same two ways;
* ``validate`` on 2,000 snapshots x 100 files, current snapshot and ``--all-snapshots``, cold and warm;
* start-up: ``--help``, ``--version`` and ``inspect table`` against ``python -c "import json"``
  (median of 10 runs);
* peak memory (max RSS) of ``inspect files --json`` at 100k and 1M entries;
* ``rewrite-data-files`` (issue 30, ``bench_rewrite_data_files.py``) on Spark-built v2 and v3 tables of
  2,000 files of ~256 KB with 10% of the rows deleted (position deletes, DVs), against Spark's
  ``rewrite_data_files`` warm and from the command line (not with ``--quick`` or ``--no-spark``);
* the Spark engine (issue 17, ``bench_spark_engine.py``): each command with ``--engine spark`` on
  ``local[2]`` against the local engine, with the speed-up of the second core (not with ``--quick``
  or ``--no-spark``).

    python benchmarks/run_all.py --dir /tmp/icectl-bench        # everything; keep the tables there
    python benchmarks/run_all.py --dir /tmp/icectl-bench --no-spark
    python benchmarks/run_all.py --quick                        # small sizes, no Spark: a smoke test
    python benchmarks/run_all.py --only startup memory --json report.json

The manifest cache lives in a temporary folder (``ICECTL_CACHE_DIR``) made for this run and removed
after it: "cold" is an empty folder, never the user's cache. The harness uses only that variable,
so it runs the same whether or not the icectl under test has a cache. Needs PyIceberg (the
``bench`` extra) and, unless ``--no-spark``, the test extra and Java 17 (as ``bench_expire.py``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import bench_compact  # noqa: E402
import bench_expire  # noqa: E402  (puts the repository and tests/ on sys.path)
import bench_inspect_files  # noqa: E402
import bench_rewrite_data_files  # noqa: E402
import bench_spark_engine  # noqa: E402
import bench_validate  # noqa: E402

REPO = bench_expire.REPO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SECTIONS = ("inspect", "expire", "compact", "validate", "startup", "memory", "scale", "rewrite", "engine")


@dataclass(frozen=True)
class Sizes:
    inspect: tuple[int, int]  # manifests, entries per manifest
    expire: tuple[int, ...]  # snapshots
    compact: tuple[int, ...]  # manifests
    validate: tuple[int, int]  # snapshots, files per snapshot
    memory: tuple[tuple[int, int], tuple[int, int]]  # (manifests, entries per manifest): small, large
    startup_runs: int
    rewrite: tuple[int, int] = (2000, 256)  # data files, KB each (the full size: 10,000 x 1,024)
    scale: tuple[int, int] = (10_000, 100_000)  # manifests of 100 entries: 1 and 10 million (issue 31)
    quick: bool = False  # a smoke test: no untimed warm-up runs, memory with a cold cache only


FULL = Sizes((100, 1000), (200, 2000), (200, 2000), (2000, 100), ((100, 1000), (1000, 1000)), 10)
QUICK = Sizes((4, 250), (20,), (20,), (20, 10), ((4, 250), (40, 250)), 2, scale=(10, 100), quick=True)


# --------------------------------------------------------------------------- figures


@dataclass
class Figure:
    """One measurement: icectl's value, the reference beside it, and what the issue asks of them."""

    section: str
    name: str
    value: float  # seconds, or MB for memory
    unit: str = "s"
    reference: str = ""
    reference_value: float | None = None
    ratio: float | None = None  # reference / icectl (> 1: icectl is faster), or large / small for memory
    ratio_text: str = ""
    target: str = ""
    met: bool | None = None
    load_before: float = 0.0
    load_after: float = 0.0
    runs: list[float] = field(default_factory=list)
    note: str = ""


@dataclass
class Report:
    header: dict[str, Any]
    figures: list[Figure] = field(default_factory=list)

    def add(self, fig: Figure) -> None:
        self.figures.append(fig)
        ref = f" | {fig.reference} {fig.reference_value:.3f}{fig.unit}" if fig.reference_value is not None else ""
        print(f"  -> {fig.section}: {fig.name} {fig.value:.3f}{fig.unit}{ref} {fig.ratio_text} "
              f"{'' if fig.met is None else ('(target met)' if fig.met else '(TARGET MISSED)')}", flush=True)


def load1() -> float:
    return os.getloadavg()[0]


def speedup(fig: Figure, reference: str, ref_value: float, minimum: float | None) -> Figure:
    """Fill in the ratio reference / icectl and whether it reaches ``minimum`` (None: no target)."""
    fig.reference, fig.reference_value = reference, ref_value
    fig.ratio = ref_value / fig.value if fig.value > 0 else None
    fig.ratio_text = f"{fig.ratio:.1f}x" if fig.ratio is not None else "-"
    if minimum is not None:
        fig.target = f">= {minimum:g}x"
        fig.met = fig.ratio is not None and fig.ratio >= minimum
    return fig


# --------------------------------------------------------------------------- processes and the cache folder


class CacheDirs:
    """Cache folders for this run only, under one temporary root: cold = a new, empty one."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="icectl-bench-cache-"))
        self.count = 0

    def fresh(self) -> Path:
        self.count += 1
        path = self.root / f"c{self.count}"
        path.mkdir()
        os.environ["ICECTL_CACHE_DIR"] = str(path)  # every child, and icectl in this process, use it
        return path

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("ICECTL_CACHE", None)  # "off" would make warm runs cold
    return env


@dataclass
class Run:
    seconds: float
    max_rss_mb: float
    returncode: int
    stdout: bytes


# Starts the command from a small interpreter and reports its peak RSS: Linux carries a process's
# peak RSS across exec, so a child forked straight from this (large) process would report at least
# this process's size. Forked from the launcher, it starts from the launcher's few MB.
RSS_LAUNCHER = """
import os, sys
out, cmd = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.execv(cmd[0], cmd)
_, status, usage = os.wait4(pid, 0)
with open(out, "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_process(cmd: list[str], *, keep_stdout: bool = False, measure_rss: bool = False) -> Run:
    """One process, timed. ``measure_rss``: also its peak RSS (MB), as ``wait4`` reports it for a
    child of :data:`RSS_LAUNCHER`: the largest of the process and its waited-for descendants (the
    read layer's decoding workers). Output goes to files, so no pipe fills up while we wait."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as rss:
        argv = [sys.executable, "-c", RSS_LAUNCHER, rss.name, *cmd] if measure_rss else cmd
        start = time.perf_counter()
        proc = subprocess.run(argv, stdout=out if keep_stdout else subprocess.DEVNULL, stderr=err, cwd=REPO,
                              env=cli_env(), check=False)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
        max_rss_mb = int(rss.read() or 0) / 1024 if measure_rss else 0.0
    if proc.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd[2:])} exited {proc.returncode}: {stderr.decode(errors='replace')[-2000:]}")
    return Run(seconds, max_rss_mb, proc.returncode, stdout)


def icectl(*args: str) -> list[str]:
    return [sys.executable, "-m", "icectl", *args]


# --------------------------------------------------------------------------- tables


def inspect_table(root: Path, manifests: int, per_manifest: int) -> bench_inspect_files.TableInfo:
    """The wide-manifest table of bench_inspect_files.py, built once per size under ``root``."""
    table_dir = root / f"inspect_{manifests}x{per_manifest}"
    if (table_dir / "metadata" / "v1.metadata.json").is_file():
        info = bench_inspect_files.existing_table(table_dir)
        print(f"  reusing {table_dir}: {info.manifests} manifests, {info.entries:,} entries")
        return info
    shutil.rmtree(table_dir, ignore_errors=True)
    print(f"  building {manifests} manifests x {per_manifest} entries in {table_dir}", flush=True)
    start = time.perf_counter()
    info = bench_inspect_files.build_table(table_dir, manifests, per_manifest, seed=7)
    print(f"  built in {time.perf_counter() - start:.1f}s ({info.manifest_bytes / 1e6:.1f} MB of manifests)")
    return info


def validate_table(root: Path, snapshots: int, files: int) -> Path:
    table_dir = root / f"validate_{snapshots}x{files}" / "t"
    done = table_dir.parent / "built.json"
    if done.is_file():
        print(f"  reusing {table_dir}")
        return table_dir
    shutil.rmtree(table_dir.parent, ignore_errors=True)
    table_dir.parent.mkdir(parents=True)
    print(f"  building {snapshots} snapshots x {files} files in {table_dir}", flush=True)
    start = time.perf_counter()
    bench_validate.build(table_dir, snapshots, files)
    done.write_text(json.dumps({"snapshots": snapshots, "files": files, "build_s": time.perf_counter() - start}))
    return table_dir


# --------------------------------------------------------------------------- sections


# DuckDB's iceberg_metadata() over the same table, as a whole process (import, extensions, query, every
# row fetched into Arrow), so it compares with the icectl process; the extensions come from their PyPI
# packages (the bench extra), never downloaded.
DUCKDB_SCRIPT = """
import glob, pathlib, sys
import duckdb, duckdb_extension_avro, duckdb_extension_iceberg
con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
for mod, name in ((duckdb_extension_avro, "avro"), (duckdb_extension_iceberg, "iceberg")):
    folder = pathlib.Path(mod.__file__).parent / "extensions"
    con.execute("LOAD '%s'" % glob.glob(str(folder / "*" / (name + ".duckdb_extension")))[0])
rows = con.execute("SELECT * FROM iceberg_metadata(?)", [sys.argv[1]]).arrow()
print((rows.read_all() if hasattr(rows, "read_all") else rows).num_rows)
"""


def duckdb_available() -> bool:
    return all(importlib.util.find_spec(m) is not None
               for m in ("duckdb", "duckdb_extension_avro", "duckdb_extension_iceberg"))


def section_inspect(report: Report, root: Path, sizes: Sizes, runs: int, caches: CacheDirs) -> None:
    info = inspect_table(root, *sizes.inspect)
    caches.fresh()
    bench_inspect_files.verify(info)  # icectl, its CLI and PyIceberg see the same files
    load0 = load1()
    times: dict[str, list[float]] = {}
    for r in range(runs):
        for flags in ((), ("--metrics",)):
            caches.fresh()
            cmd = icectl("inspect", "files", str(info.dir), "--json", *flags)
            # warm: the second run on the same cache folder, a replay of the first run's document
            # (icectl.replay); "manifest cache": the same with replays off, rendered again
            for temp, prefix in (("cold", []), ("warm", []), ("manifest cache", ["env", "ICECTL_REPLAY=off"])):
                times.setdefault(f"{temp}{''.join(flags)}", []).append(run_process([*prefix, *cmd]).seconds)
        start = time.perf_counter()
        bench_inspect_files.pyiceberg_files(info.metadata_path)
        times.setdefault("pyiceberg", []).append(time.perf_counter() - start)
        if duckdb_available():
            duck = run_process([sys.executable, "-c", DUCKDB_SCRIPT, str(info.metadata_path)], keep_stdout=True)
            assert duck.returncode == 0 and int(duck.stdout.strip()) >= info.entries, duck.stdout  # DELETED too
            times.setdefault("duckdb", []).append(duck.seconds)
        print(f"  round {r + 1}/{runs}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()), flush=True)
    load_after = load1()
    ref = min(times["pyiceberg"])
    what = f"{info.entries:,} entries in {info.manifests} manifests"
    targets = {"cold": 10.0, "cold--metrics": 2.0, "warm": 50.0, "warm--metrics": None,  # issue 31's
               "manifest cache": None, "manifest cache--metrics": None}
    for key, minimum in targets.items():
        temp, _, metrics = key.partition("--")
        cache = {"cold": "cold cache", "warm": "warm cache (replayed)",
                 "manifest cache": "warm cache, ICECTL_REPLAY=off"}[temp]
        name = f"inspect files --json{' --metrics' if metrics else ''}, {cache} ({what})"
        fig = Figure("inspect", name, min(times[key]), load_before=load0, load_after=load_after, runs=times[key])
        report.add(speedup(fig, "PyIceberg inspect.files()", ref, minimum))
    if "duckdb" in times:  # issue 31: no slower than DuckDB's iceberg_metadata(), cold
        fig = Figure("inspect", f"inspect files --json, cold cache, vs DuckDB ({what})", min(times["cold"]),
                     load_before=load0, load_after=load_after, runs=times["cold"])
        report.add(speedup(fig, "DuckDB 1.5.5 iceberg_metadata(), whole process", min(times["duckdb"]), 1.0))


class Spark:
    """One SparkSession for the expire and compact sections (their tables share a warehouse)."""

    def __init__(self, warehouse: Path, enabled: bool) -> None:
        self.warehouse, self.enabled = warehouse, enabled
        self.session: SparkSession | None = None

    def get(self) -> SparkSession:
        if self.session is None:
            from support.spark import start_spark

            start = time.perf_counter()
            self.session = start_spark(str(self.warehouse))
            print(f"  Spark session started in {time.perf_counter() - start:.1f}s", flush=True)
        return self.session

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()


def _cold(caches: CacheDirs, fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        caches.fresh()
        return fn()
    return run


def section_expire(report: Report, root: Path, sizes: Sizes, runs: int, caches: CacheDirs, spark: Spark,
                   spark_cli: bool) -> None:
    layout = bench_expire.Layout(root.resolve(), "icectl")
    for n in sizes.expire:
        print(f"  expire, {n} snapshots", flush=True)
        bench_expire.ensure_table(layout, n, True, spark.get)
        live, name = layout.live(n), layout.name(n)
        warm = spark.get() if spark.enabled else None
        ours = _cold(caches, lambda live=live: bench_expire.icectl_cli(live))
        contenders = [bench_expire.Contender("icectl CLI", ours)]
        if warm is not None:
            if spark_cli:
                contenders.append(bench_expire.Contender(
                    "Spark CLI", lambda name=name: bench_expire.spark_cli(layout.warehouse, name)))
            contenders.append(bench_expire.Contender(
                "Spark CALL (warm)", lambda name=name, s=warm: bench_expire.spark_call(s, name), in_process=True))
        load0 = load1()
        bench_expire.time_rounds(layout, n, contenders, runs, warm)
        bench_expire.verify(n, contenders)  # every run deleted the same files, left the same table
        load_after = load1()
        ours = contenders[0]
        fig = Figure("expire", f"expire-snapshots, {n} snapshots (CLI)", ours.best, runs=ours.seconds,
                     load_before=load0, load_after=load_after, note=f"CPU {min(ours.cpu):.2f}s")
        report.add(fig)
        big = n == max(sizes.expire) and n >= 2000
        minimums = {"Spark CLI": 10.0, "Spark CALL (warm)": 4.0}  # the targets at 2,000 snapshots
        for c in contenders[1:]:
            minimum = minimums[c.name]
            fig = Figure("expire", f"expire-snapshots, {n} snapshots, vs {c.name}", ours.best, runs=ours.seconds,
                         load_before=load0, load_after=load_after)
            report.add(speedup(fig, f"Spark expire_snapshots, {c.name}", c.best, minimum if big else None))


def section_compact(report: Report, root: Path, sizes: Sizes, runs: int, caches: CacheDirs, spark: Spark,
                    spark_cli: bool) -> None:
    layout = bench_compact.CompactLayout(root.resolve(), "icectl")
    for n in sizes.compact:
        print(f"  compact, {n} manifests", flush=True)
        bench_expire.ensure_table(layout, n, True, spark.get)
        live, name = layout.live(n), layout.name(n)
        warm = spark.get() if spark.enabled else None
        ours = _cold(caches, lambda live=live: bench_compact.icectl_cli(live))
        contenders = [bench_compact.Contender("icectl CLI", ours)]
        if warm is not None:
            if spark_cli:
                contenders.append(bench_compact.Contender(
                    "Spark CLI", lambda name=name: bench_compact.spark_cli(layout.warehouse, name)))
            contenders.append(bench_compact.Contender(
                "Spark CALL (warm)", lambda name=name, s=warm: bench_compact.spark_call(s, name), in_process=True))
        load0 = load1()
        bench_compact.time_rounds(layout, n, contenders, runs, warm)  # checks every run's result
        load_after = load1()
        ours = contenders[0]
        report.add(Figure("compact", f"compact, {n} manifests (CLI)", min(ours.seconds), runs=ours.seconds,
                          load_before=load0, load_after=load_after))
        for c in contenders[1:]:
            fig = Figure("compact", f"compact, {n} manifests, vs {c.name}", min(ours.seconds), runs=ours.seconds,
                         load_before=load0, load_after=load_after)
            report.add(speedup(fig, f"Spark rewrite_manifests, {c.name}", min(c.seconds), None))


def _validate_once(table_dir: Path, flags: tuple[str, ...]) -> float:
    run = run_process(icectl("validate", str(table_dir), "--json", *flags), keep_stdout=True)
    doc = json.loads(run.stdout)
    if doc.get("errors"):
        sys.exit(f"FAIL: validate {' '.join(flags)} found {doc['errors']} error(s) in {table_dir}: {doc['rows'][:2]}")
    return run.seconds


def section_validate(report: Report, root: Path, sizes: Sizes, runs: int, caches: CacheDirs) -> None:
    table_dir = validate_table(root, *sizes.validate)
    what = f"{sizes.validate[0]:,} snapshots x {sizes.validate[1]} files"
    for label, flags, warm_limit in (("current snapshot", (), None), ("--all-snapshots", ("--all-snapshots",), 3.0)):
        load0 = load1()
        cold, warm = [], []
        for _ in range(runs):
            caches.fresh()
            cold.append(_validate_once(table_dir, flags))
            warm.append(_validate_once(table_dir, flags))
        load_after = load1()
        report.add(Figure("validate", f"validate {label}, cold cache ({what})", min(cold), runs=cold,
                          load_before=load0, load_after=load_after))
        fig = Figure("validate", f"validate {label}, warm cache ({what})", min(warm), runs=warm,
                     load_before=load0, load_after=load_after)
        if warm_limit is not None:
            fig.target, fig.met = f"< {warm_limit:g} s", min(warm) < warm_limit
        report.add(fig)


def section_startup(report: Report, root: Path, sizes: Sizes, caches: CacheDirs) -> None:
    info = inspect_table(root, *sizes.inspect)  # one snapshot, small metadata JSON
    caches.fresh()
    commands = {"python -c 'import json'": [sys.executable, "-c", "import json"],
                "icectl --help": icectl("--help"), "icectl --version": icectl("--version"),
                "icectl inspect table": icectl("inspect", "table", str(info.dir), "--json")}
    load0 = load1()
    medians: dict[str, tuple[float, list[float]]] = {}
    for name, cmd in commands.items():
        if not sizes.quick:
            run_process(cmd)  # untimed: the page cache, .pyc files
        times = [run_process(cmd).seconds for _ in range(sizes.startup_runs)]
        medians[name] = (statistics.median(times), times)
    load_after = load1()
    base = medians["python -c 'import json'"][0]
    for name, (median, times) in medians.items():
        if name.startswith("python"):
            report.add(Figure("startup", f"{name} (median of {len(times)})", median, runs=times,
                              load_before=load0, load_after=load_after))
            continue
        fig = Figure("startup", f"{name} (median of {len(times)})", median, runs=times, load_before=load0,
                     load_after=load_after, reference="python -c 'import json'", reference_value=base,
                     ratio_text=f"+{median - base:.3f} s")
        if name != "icectl --version":  # the target names --help and inspect table
            fig.target, fig.met = "<= +0.1 s", median - base <= 0.1
        report.add(fig)


def section_memory(report: Report, root: Path, sizes: Sizes, caches: CacheDirs) -> None:
    (small_m, small_e), (large_m, large_e) = sizes.memory
    small = inspect_table(root, small_m, small_e)
    large = inspect_table(root, large_m, large_e)
    for temp in ("cold",) if sizes.quick else ("cold", "warm"):
        load0 = load1()
        peaks: dict[int, float] = {}
        for info in (small, large):
            caches.fresh()
            cmd = icectl("inspect", "files", str(info.dir), "--json")
            if temp == "warm":
                run_process(cmd)  # fills the cache folder
            peaks[info.entries] = run_process(cmd, measure_rss=True).max_rss_mb
        load_after = load1()
        a, b = peaks[small.entries], peaks[large.entries]
        report.add(Figure("memory", f"inspect files --json max RSS, {small.entries:,} entries, {temp} cache", a,
                          unit=" MB", load_before=load0, load_after=load_after))
        fig = Figure("memory", f"inspect files --json max RSS, {large.entries:,} entries, {temp} cache", b,
                     unit=" MB", load_before=load0, load_after=load_after, reference=f"{small.entries:,} entries",
                     reference_value=a, ratio=b / a, ratio_text=f"{b / a:.2f}x of {small.entries:,}",
                     target="<= 1.5x", met=b / a <= 1.5)
        report.add(fig)


def section_scale(report: Report, root: Path, sizes: Sizes, caches: CacheDirs) -> None:
    """Issue 31's decoding and scale targets: CPU per entry of icectl's native manifest decoding beside
    DataFusion's bare ``read_avro`` of the same files (<= 3x), and the peak memory of ``validate`` and
    ``inspect files --json`` at 1 and 10 million entries (``bench_spark_engine.build_big``'s table at
    two sizes, built once under ``--dir``; a cold cache each; 10 million <= 2x 1 million)."""
    decode_figure(report, inspect_table(root, *sizes.inspect))
    small_n, large_n = sizes.scale
    tables = {}
    for n in (small_n, large_n):
        table_dir = root / f"scale_{n}x100"
        if not (table_dir / "built.json").is_file():
            shutil.rmtree(table_dir, ignore_errors=True)
            print(f"  building {n:,} manifests x 100 entries in {table_dir}", flush=True)
            start = time.perf_counter()
            bench_spark_engine.build_big(table_dir, bench_spark_engine.Sizes(n, 100, 1))
            (table_dir / "built.json").write_text(json.dumps({"build_s": time.perf_counter() - start}))
        tables[n] = table_dir
    for args in (("validate",), ("inspect", "files")):
        load0 = load1()
        peaks = {}
        for n, table_dir in tables.items():
            caches.fresh()
            run = run_process(icectl(*args, str(table_dir), "--json"), measure_rss=True)
            assert run.returncode in (0, 7), (args, run.returncode)  # 7: validate's warnings
            peaks[n] = run.max_rss_mb
            report.add(Figure("scale", f"{' '.join(args)} --json, {n * 100:,} entries, cold cache", run.seconds,
                              load_before=load0, load_after=load1()))
        a, b = peaks[small_n], peaks[large_n]
        report.add(Figure("scale", f"{' '.join(args)} max RSS, {large_n * 100:,} entries, cold cache", b, unit=" MB",
                          reference=f"{small_n * 100:,} entries", reference_value=a, ratio=b / a,
                          ratio_text=f"{b / a:.2f}x of {small_n * 100:,}", target="<= 2x", met=b / a <= 2,
                          load_before=load0, load_after=load1()))


def decode_figure(report: Report, info: bench_inspect_files.TableInfo) -> None:
    """CPU seconds per entry, one thread: icectl's native manifest tables (the Arrow tables every hot
    path reads: inheritance, partitions, maps, the length check), decoded from bytes in memory in the
    batches the hot paths use, and DataFusion's bare ``read_avro`` of each file into Arrow (one
    session for all; no inheritance, no checks)."""
    import datafusion

    from icectl.codec.manifest_batch import manifest_tables
    from icectl.storage.paths import local_path
    from icectl.table import load_table
    from icectl.table.scan import manifests_of

    table = load_table(str(info.dir))
    md = table.metadata
    snapshot = md.current_snapshot()
    assert snapshot is not None
    files = [(m, table.io.read(m.manifest_path)) for m in manifests_of(md, snapshot, table.io, use_cache=False)]
    ptype = md.partition_type(files[0][0].partition_spec_id)
    load0 = load1()

    def ours() -> int:  # as the hot paths read them: batches of up to 4 MB, one native read each
        rows, batch, size = 0, [], 0
        for i, (m, data) in enumerate(files):
            batch.append((m, data))
            size += len(data)
            if size >= 4 << 20 or i == len(files) - 1:
                rows += sum(t.num_rows for t in manifest_tables([d for _, d in batch], [b for b, _ in batch], ptype,
                                                                md.format_version))
                batch, size = [], 0
        return rows

    def theirs() -> int:
        session = datafusion.SessionContext(datafusion.SessionConfig().with_target_partitions(1))
        return sum(session.read_avro(local_path(m.manifest_path)).to_arrow_table().num_rows for m, _ in files)

    best = {}
    for name, fn in (("icectl", ours), ("datafusion", theirs)):
        times = []
        for _ in range(3):
            start = time.process_time()
            rows = fn()
            times.append((time.process_time() - start) / rows * 1e6)
        best[name] = min(times)
    what = f"{info.entries:,} entries in {info.manifests} manifests"
    fig = Figure("scale", f"decode, CPU per entry, partitioned ({what})", best["icectl"], unit=" us",
                 load_before=load0, load_after=load1())
    fig.reference, fig.reference_value = "DataFusion 55 read_avro", best["datafusion"]
    fig.ratio = best["icectl"] / best["datafusion"]
    fig.ratio_text, fig.target, fig.met = f"{fig.ratio:.1f}x of DataFusion", "<= 3x", fig.ratio <= 3
    report.add(fig)


def section_rewrite(report: Report, root: Path, sizes: Sizes, runs: int, caches: CacheDirs, spark: Spark,
                    spark_cli: bool) -> None:
    """bench_rewrite_data_files.py's contenders: icectl's CLI against Spark's procedure, warm and as a
    whole process, on fresh twins of each Spark-built table (every run checked by Spark)."""
    if not spark.enabled:
        print("  skipped: Spark builds the tables (not with --quick or --no-spark)", flush=True)
        return
    files, kb = sizes.rewrite
    layout = bench_rewrite_data_files.Layout(root.resolve())
    options = bench_rewrite_data_files.parse_options(list(bench_rewrite_data_files.DEFAULT_OPTIONS))
    shapes = [bench_rewrite_data_files.Shape(v, files, kb, 4, 10) for v in (2, 3)]
    results = bench_rewrite_data_files.measure(layout, shapes, runs, options, spark.get, spark_cli_runs=spark_cli,
                                               before_icectl=caches.fresh)
    for res in results:
        ours = res.get("icectl CLI")
        assert ours is not None
        what = res.shape.describe()
        report.add(Figure("rewrite", f"rewrite-data-files, {what} (CLI)", ours.best.seconds,
                          runs=[r.seconds for r in ours.runs], load_before=ours.best.load_before,
                          load_after=ours.best.load_after, note=f"CPU {ours.best.outcome.cpu:.1f}s"))
        for c in res.contenders[1:]:
            fig = Figure("rewrite", f"rewrite-data-files, {what}, vs {c.name}", ours.best.seconds,
                         runs=[r.seconds for r in ours.runs], load_before=c.best.load_before,
                         load_after=c.best.load_after)
            report.add(speedup(fig, f"Spark rewrite_data_files, {c.name}", c.best.seconds, 1.0))


def section_engine(report: Report, root: Path, spark: Spark) -> None:
    """bench_spark_engine.py's rows as figures: ``--engine spark`` on local[2], the local engine as reference."""
    if not spark.enabled:
        print("  skipped: the Spark engine needs Spark (not with --quick or --no-spark)", flush=True)
        return
    # One round whatever --runs says: at 2,000,000 entries a round is tens of minutes on 2 cores.
    for r in bench_spark_engine.measure(root, bench_spark_engine.FULL, 1, bench_spark_engine.OPERATIONS, True,
                                        spark.get):
        load0 = load1()
        local, two = r.seconds["local"], r.seconds["spark local[2]"]
        note = (f"local[1] {r.seconds['spark local[1]']:.2f}s, second core {r.per_core or 0:.2f}x, "
                f"{r.tasks.get('spark local[2]')} tasks")
        fig = Figure("engine", f"{r.operation}, --engine spark local[2] ({r.table})", two, note=note,
                     load_before=load0, load_after=load1())
        report.add(speedup(fig, "local engine", local, None))
        if r.operation == "validate":  # the target for the local engine itself, cold cache
            report.add(Figure("engine", f"validate, local engine, cold cache ({r.table})", local, target="< 10 s",
                              met=local < 10, load_before=load0, load_after=load1()))


# --------------------------------------------------------------------------- report


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def header(quick: bool) -> dict[str, Any]:
    try:
        import pyiceberg

        pyiceberg_version = pyiceberg.__version__
    except ImportError:
        pyiceberg_version = "-"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "commit": git("rev-parse", "--short", "HEAD") + (" (uncommitted changes)" if dirty else ""),
            "branch": git("rev-parse", "--abbrev-ref", "HEAD"), "cpus": os.cpu_count(),
            "python": sys.version.split()[0], "pyiceberg": pyiceberg_version, "mode": "quick" if quick else "full",
            "load_before": list(os.getloadavg())}


def print_report(report: Report) -> None:
    h = report.header
    print("\n# icectl benchmarks (issue 15)\n")
    print(f"{h['date']}, commit {h['commit']} ({h['branch']}), {h['cpus']} CPUs, Python {h['python']}, "
          f"PyIceberg {h['pyiceberg']}, {h['mode']} run")
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{x:.2f}" for x in h["load_before"])
          + "; after: " + ", ".join(f"{x:.2f}" for x in h["load_after"]))
    print("ratio = reference / icectl (> 1: icectl is faster); times are the best of the runs, whole processes\n")
    print("| section | measurement | icectl | reference | ratio | target | met | load 1 min |")
    print("| --- | --- | ---: | --- | ---: | --- | --- | --- |")
    for f in report.figures:
        ref = f"{f.reference} {f.reference_value:.3f}{f.unit}" if f.reference_value is not None else "-"
        met = "-" if f.met is None else ("yes" if f.met else "**no**")
        note = f" ({f.note})" if f.note else ""
        print(f"| {f.section} | {f.name}{note} | {f.value:.3f}{f.unit} | {ref} | {f.ratio_text or '-'} "
              f"| {f.target or '-'} | {met} | {f.load_before:.1f} -> {f.load_after:.1f} |")
    missed = [f for f in report.figures if f.met is False]
    print(f"\n{sum(1 for f in report.figures if f.met)} target(s) met, {len(missed)} missed"
          + (": " + "; ".join(f.name for f in missed) if missed else ""))


def compiled_python(prefix: Path) -> None:
    """Every process of the run uses bytecode compiled once, into a folder of the workspace, as an
    installed icectl does: with PYTHONDONTWRITEBYTECODE set (as in some shells) each process would
    compile icectl from source again (~0.1 s)."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "icectl")], check=True,
                   stdout=subprocess.DEVNULL)


@contextmanager
def workspace(path: Path | None) -> Iterator[Path]:
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path.resolve()
        return
    tmp = Path(tempfile.mkdtemp(prefix="icectl-bench-all-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--dir", type=Path, help="build the tables here and reuse them in later runs "
                                             "(default: a temporary folder, removed)")
    ap.add_argument("--quick", action="store_true", help="small sizes, one run, no Spark: a smoke test")
    ap.add_argument("--runs", type=int, help="timed rounds per figure (default 3; 1 with --quick)")
    ap.add_argument("--only", nargs="+", choices=SECTIONS, help="run these sections only")
    ap.add_argument("--no-spark", action="store_true", help="no Spark contenders")
    ap.add_argument("--no-spark-cli", action="store_true", help="no whole-process Spark runs (the slowest)")
    ap.add_argument("--json", type=Path, help="also write the report here as JSON")
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    runs = args.runs or (1 if args.quick else 3)
    sections = args.only or SECTIONS
    report = Report(header(args.quick))
    caches = CacheDirs()
    report.header["cache_root"] = str(caches.root)
    with workspace(args.dir) as root:
        compiled_python(root / "pycache")
        spark = Spark(root / "appends" / "warehouse", enabled=not (args.quick or args.no_spark))
        (root / "appends" / "warehouse").mkdir(parents=True, exist_ok=True)
        try:
            for name in sections:
                print(f"\n## {name}", flush=True)
                if name == "inspect":
                    section_inspect(report, root, sizes, runs, caches)
                elif name == "expire":
                    section_expire(report, root / "appends", sizes, runs, caches, spark, not args.no_spark_cli)
                elif name == "compact":
                    section_compact(report, root / "appends", sizes, runs, caches, spark, not args.no_spark_cli)
                elif name == "validate":
                    section_validate(report, root, sizes, runs, caches)
                elif name == "startup":
                    section_startup(report, root, sizes, caches)
                elif name == "memory":
                    section_memory(report, root, sizes, caches)
                elif name == "scale":
                    section_scale(report, root, sizes, caches)
                elif name == "rewrite":
                    section_rewrite(report, root / "appends", sizes, runs, caches, spark, not args.no_spark_cli)
                elif name == "engine":
                    section_engine(report, root / "appends", spark)
        finally:
            spark.stop()
            caches.remove()
    report.header["load_after"] = list(os.getloadavg())
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps({"header": report.header, "figures": [asdict(f) for f in report.figures]},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
