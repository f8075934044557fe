"""Benchmark `icectl compact` against Spark's `rewrite_manifests` procedure on identical tables.

For each size N: a file-system table of N single-file append snapshots whose head lists N small
manifests (built once, as bench_expire.py builds its tables, and restored to the same path before
every timed run). Contenders merge those N manifests into one: the icectl CLI and a Spark job, each
as one process from the command line; Spark's procedure in a warm, running session; icectl's core
in-process. Every run is checked (one data manifest left, the same N live files), then a table of
figures is printed.

    python benchmarks/bench_compact.py                          # 200 and 2000 manifests, 3 runs
    python benchmarks/bench_compact.py --manifests 200 --runs 1
    python benchmarks/bench_compact.py --dir /tmp/bc --reuse --no-spark-cli

Needs the test extra (pyspark, the Iceberg runtime, Java 17): ``pip install -e ".[test]"``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

# The table builders, restore and CPU accounting of the expire benchmark (it also puts the
# repository and tests/ on sys.path).
from bench_expire import (  # noqa: E402
    REPO,
    SUBPROCESS_TIMEOUT_S,
    Layout,
    _children_cpu,
    _cli_env,
    _plain_path,
    _proc_cpu,
    ensure_table,
    restore,
)

from icectl.ops.compact.manifests import compact  # noqa: E402
from icectl.ops.compact.plan import CompactOptions  # noqa: E402
from icectl.spec.properties import MANIFEST_TARGET_SIZE_BYTES  # noqa: E402
from icectl.table import load_table  # noqa: E402
from icectl.table import scan as icectl_scan  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# A fresh interpreter that starts Spark as the test suite does and runs the procedure once: the
# whole process is timed, as a cron job would pay it; the parts are reported too.
SPARK_CHILD = textwrap.dedent("""
    import json, os, sys, time
    t0 = time.perf_counter()
    from support.spark import start_spark
    warehouse, table = sys.argv[1], sys.argv[2]
    spark = start_spark(warehouse)
    t1 = time.perf_counter()
    row = spark.sql(f"CALL local.system.rewrite_manifests(table => '{table}')").collect()[0]
    t2 = time.perf_counter()
    jvm_pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    with open(f"/proc/{jvm_pid}/stat") as fh:
        jvm_cpu_s = sum(int(x) for x in fh.read().rsplit(")", 1)[1].split()[11:13]) / os.sysconf("SC_CLK_TCK")
    spark.stop()
    t3 = time.perf_counter()
    print(json.dumps({"row": row.asDict(), "startup_s": t1 - t0, "call_s": t2 - t1, "stop_s": t3 - t2,
                      "jvm_cpu_s": jvm_cpu_s}))
""")


class CompactLayout(Layout):
    def name(self, n: int) -> str:
        return f"compact_{self.builder}_{n}"


@dataclass
class Outcome:
    replaced: int
    created: int
    cpu: float
    inner: dict[str, float] = field(default_factory=dict)


@dataclass
class Contender:
    name: str
    fn: Callable[[], Outcome]
    in_process: bool = False
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)


def icectl_cli(table_dir: Path) -> Outcome:
    cpu = _children_cpu()
    proc = subprocess.run([sys.executable, "-m", "icectl", "compact", str(table_dir), "--json"], capture_output=True,
                          text=True, cwd=REPO, env=_cli_env(), timeout=SUBPROCESS_TIMEOUT_S)
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"FAIL: icectl CLI exited {proc.returncode}: {proc.stderr.strip()}")
    doc = json.loads(proc.stdout)
    return Outcome(doc["manifests_replaced"], doc["manifests_created"], cpu)


def icectl_cli_startup(table_dir: Path) -> Outcome:
    cpu = _children_cpu()
    subprocess.run([sys.executable, "-m", "icectl", "inspect", "table", str(table_dir), "--json"], check=True,
                   stdout=subprocess.DEVNULL, cwd=REPO, env=_cli_env(), timeout=SUBPROCESS_TIMEOUT_S)
    return Outcome(0, 0, _children_cpu() - cpu)


def icectl_core(table_dir: Path) -> Outcome:
    cpu = time.process_time()
    result = compact(load_table(str(table_dir)), CompactOptions())
    cpu = time.process_time() - cpu
    return Outcome(result.data["manifests_replaced"], result.data["manifests_created"], cpu)


def spark_cli(warehouse: Path, name: str) -> Outcome:
    cpu = _children_cpu()
    proc = subprocess.run([sys.executable, "-c", SPARK_CHILD, str(warehouse), f"db.{name}"], capture_output=True,
                          text=True, cwd=REPO, env=_cli_env(), timeout=SUBPROCESS_TIMEOUT_S)
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"FAIL: Spark job exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    row = doc["row"]
    return Outcome(row["rewritten_manifests_count"], row["added_manifests_count"], cpu + doc["jvm_cpu_s"],
                   {k: doc[k] for k in ("startup_s", "call_s", "stop_s")})


def spark_call(spark: SparkSession, name: str) -> Outcome:
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]
    cpu = _proc_cpu(jvm_pid) + time.process_time()
    row = spark.sql(f"CALL local.system.rewrite_manifests(table => 'db.{name}')").collect()[0]
    return Outcome(row["rewritten_manifests_count"], row["added_manifests_count"],
                   _proc_cpu(jvm_pid) + time.process_time() - cpu)


def observe(table_dir: Path) -> tuple[int, frozenset[str]]:
    """(data manifests of the head, live data files) as icectl reads the table."""
    t = load_table(str(table_dir))
    md = t.metadata
    ms = icectl_scan.manifests_of(md, md.current_snapshot(), t.io)
    files = frozenset(_plain_path(e.data_file.file_path)
                      for _, e in icectl_scan.iter_entries(md, t.io, ms, fields={"file_path"}, live_only=True))
    return len(ms), files


def time_rounds(layout: CompactLayout, n: int, contenders: list[Contender], runs: int,
                spark: SparkSession | None) -> None:
    restore(layout, n)
    expected = observe(layout.live(n))[1]
    t = load_table(str(layout.live(n)))
    total = sum(m.manifest_length for m in icectl_scan.manifests_of(t.metadata, t.metadata.current_snapshot(), t.io))
    # Spark's action aims at ceil(sum of manifest lengths / target) manifests: the tiny manifests'
    # headers count, so it may write more than one; icectl measures entries and writes one.
    created_by = {"icectl": 1, "Spark": math.ceil(total / MANIFEST_TARGET_SIZE_BYTES.default)}
    for c in contenders:
        if c.in_process:  # one untimed run: imports, class loading, JIT
            restore(layout, n)
            c.fn()
    for r in range(runs):
        for c in contenders:
            restore(layout, n)
            start = time.perf_counter()
            outcome = c.fn()
            c.seconds.append(time.perf_counter() - start)
            c.cpu.append(outcome.cpu)
            c.outcomes.append(outcome)
            if not outcome.replaced:
                continue  # the start-up reference row
            manifests, files = observe(layout.live(n))
            k = created_by[c.name.split()[0]]
            if (outcome.replaced, outcome.created, manifests) != (n, k, k) or files != expected:
                sys.exit(f"FAIL: {c.name}: replaced {outcome.replaced}, created {outcome.created}, "
                         f"{manifests} manifests and {len(files)} live files left (expected {n}, {k}, {k}, {n})")
            if r == 0 and spark is not None:
                seen = spark.sql(f"SELECT count(*) FROM local.db.{layout.name(n)}.files").collect()[0][0]
                if seen != n:
                    sys.exit(f"FAIL: after {c.name}, Spark sees {seen} files, expected {n}")
        print(f"  round {r + 1}/{runs}: " + ", ".join(f"{c.name} {c.seconds[-1]:.2f}s" for c in contenders),
              flush=True)


def report(rows: list[tuple[int, dict[str, Any], list[Contender]]], runs: int) -> None:
    print(f"\n## Figures: merge N one-entry manifests into one, {runs} runs, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("ratio = best wall time of the row / best wall time of the icectl CLI (>1: slower than icectl)\n")
    print("| manifests | contender | best s | median s | CPU s | manifests written | vs icectl CLI |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for n, _info, contenders in rows:
        ref = next(c for c in contenders if c.name == "icectl CLI")
        for c in contenders:
            written = str(c.outcomes[0].created) if c.outcomes[0].replaced else "-"
            print(f"| {n} | {c.name} | {min(c.seconds):.3f} | {statistics.median(c.seconds):.3f} | {min(c.cpu):.3f} "
                  f"| {written} | {min(c.seconds) / min(ref.seconds):.2f} |")
    print()
    for n, info, contenders in rows:
        by = {c.name: c for c in contenders}
        line = f"{n} manifests ({info['bytes'] / 1e6:.1f} MB table, built in {info['build_s']:.1f}s):"
        if "Spark CLI" in by:
            s, i = by["Spark CLI"], by["icectl CLI"]
            inner = {k: statistics.median(o.inner[k] for o in s.outcomes) for k in ("startup_s", "call_s", "stop_s")}
            line += (f" icectl CLI is {min(s.seconds) / min(i.seconds):.1f}x faster than Spark from the command "
                     f"line (Spark job median start-up {inner['startup_s']:.1f}s, CALL {inner['call_s']:.1f}s, "
                     f"stop {inner['stop_s']:.1f}s)")
        if "Spark CALL (warm)" in by:
            line += (f"; warm Spark CALL / icectl core = "
                     f"{min(by['Spark CALL (warm)'].seconds) / min(by['icectl core'].seconds):.2f}")
        print(line)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--manifests", type=int, nargs="+", default=[200, 2000], help="table sizes (default 200 2000)")
    ap.add_argument("--runs", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--builder", choices=("icectl", "spark"), default="icectl",
                    help="who writes the tables (see bench_expire.py)")
    ap.add_argument("--dir", type=Path, help="work here and keep it (default: a temp dir, removed)")
    ap.add_argument("--reuse", action="store_true", help="reuse the pristine tables already in --dir")
    ap.add_argument("--no-spark", action="store_true", help="icectl only")
    ap.add_argument("--no-spark-cli", action="store_true", help="skip the Spark command-line runs")
    args = ap.parse_args(argv)
    if args.reuse and not args.dir:
        ap.error("--reuse needs --dir")
    root = args.dir or Path(tempfile.mkdtemp(prefix="icectl-bench-compact-"))
    root.mkdir(parents=True, exist_ok=True)
    layout = CompactLayout(root.resolve(), args.builder)
    layout.warehouse.mkdir(parents=True, exist_ok=True)
    session: list[SparkSession] = []

    def spark() -> SparkSession:
        if not session:
            from support.spark import start_spark

            start = time.perf_counter()
            session.append(start_spark(str(layout.warehouse)))
            print(f"  Spark session started in {time.perf_counter() - start:.1f}s", flush=True)
        return session[0]

    rows: list[tuple[int, dict[str, Any], list[Contender]]] = []
    try:
        for n in args.manifests:
            print(f"\n# {n} manifests", flush=True)
            info = ensure_table(layout, n, args.reuse, spark)
            live, name = layout.live(n), layout.name(n)
            contenders = [Contender("icectl CLI", lambda live=live: icectl_cli(live)),
                          Contender("icectl CLI start-up (inspect table)", lambda live=live: icectl_cli_startup(live)),
                          Contender("icectl core", lambda live=live: icectl_core(live), in_process=True)]
            warm = None if args.no_spark else spark()
            if warm is not None:
                if not args.no_spark_cli:
                    contenders.append(Contender("Spark CLI", lambda name=name: spark_cli(layout.warehouse, name)))
                contenders.append(Contender("Spark CALL (warm)", lambda name=name, s=warm: spark_call(s, name),
                                            in_process=True))
            print(f"  timing ({args.runs} rounds, contenders interleaved, each on a fresh copy)", flush=True)
            time_rounds(layout, n, contenders, args.runs, warm)
            rows.append((n, info, contenders))
        report(rows, args.runs)
    finally:
        for s in session:
            s.stop()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
