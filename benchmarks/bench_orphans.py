"""Benchmark `icectl remove-orphan-files` against Spark's `remove_orphan_files` procedure.

One table of N live data files (tiny Parquet files in 100 folders, registered with icectl's
``add_files`` in chunks, one append snapshot per chunk) and M orphans (copies of live files
under new names, spread over the same folders, plus a stale manifest); every file ten days old.
The table is built once, kept pristine, and restored to the same path (``cp -a``) before each
timed run. Contenders, each a whole process from the command line as a cron job runs it:

* ``icectl remove-orphan-files TABLE --older-than 3d [--dry-run] --json`` (a fresh interpreter);
* a fresh ``python`` that starts a SparkSession (as the test suite does) and runs
  ``CALL local.system.remove_orphan_files(table => ..., older_than => ..., dry_run => ...)``.

Dry run and real run each on a fresh copy. Checks both found the same orphans and deleted the
same files, then prints the wall-clock figures side by side with the load average.

    python benchmarks/bench_orphans.py                      # 10000 live files, 1000 orphans
    python benchmarks/bench_orphans.py --live 2000 --orphans 200 --dir /tmp/bo --reuse

Needs the test extra (pyspark, the Iceberg runtime, Java 17): ``pip install -e ".[test]"``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
for _p in (REPO, TESTS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from icectl.config import parse_config  # noqa: E402
from icectl.ops.create.table import SchemaSource, create  # noqa: E402
from icectl.ops.files.add_files import add_files  # noqa: E402
from icectl.storage import FileIO  # noqa: E402
from icectl.table import load_table  # noqa: E402

NAME = "orphans_bench"
DAY_S = 86400
TIMEOUT_S = 3600

SPARK_CHILD = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    from support.spark import start_spark
    warehouse, table, cutoff, dry_run = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    spark = start_spark(warehouse)
    t1 = time.perf_counter()
    rows = spark.sql(f"CALL local.system.remove_orphan_files(table => '{table}', "
                     f"older_than => TIMESTAMP '{cutoff}', dry_run => {dry_run})").collect()
    t2 = time.perf_counter()
    spark.stop()
    print(json.dumps({"orphans": [r["orphan_file_location"] for r in rows], "startup_s": t1 - t0,
                      "call_s": t2 - t1}))
""")


def build(table_dir: Path, live: int, orphans: int) -> None:
    config, io = parse_config({}), FileIO()
    create(str(table_dir), SchemaSource(ddl="id long, payload string"), config=config, io=io)
    folders = [table_dir / "data" / f"bucket={i:03d}" for i in range(100)]
    for f in folders:
        f.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(live):
        p = folders[i % len(folders)] / f"{i:06d}-live.parquet"
        pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "payload": [f"row {i}"]}), p)
        paths.append(str(p))
    chunk = 1000
    for start in range(0, len(paths), chunk):
        add_files(load_table(str(table_dir), config, io), paths[start:start + chunk])
    for i in range(orphans):
        src = paths[i % len(paths)]
        shutil.copyfile(src, os.path.join(os.path.dirname(src), f"{i:06d}-orphan.parquet"))
    manifest = next((table_dir / "metadata").glob("*-m0.avro"))
    shutil.copyfile(manifest, table_dir / "metadata" / "stale-m0.avro")
    old = time.time() - 10 * DAY_S
    for root, _dirs, names in os.walk(table_dir):
        for n in names:
            os.utime(os.path.join(root, n), (old, old))


def restore(pristine: Path, live: Path) -> None:
    if live.exists():
        shutil.rmtree(live)
    live.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(pristine), str(live)], check=True)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), str(TESTS), e.get("PYTHONPATH")]))
    return e


def plain(p: str) -> str:
    return os.path.normpath(p.removeprefix("file://").removeprefix("file:"))


def run_icectl(table_dir: Path, dry_run: bool) -> tuple[float, set[str], dict[str, float]]:
    cmd = [sys.executable, "-m", "icectl", "remove-orphan-files", str(table_dir), "--older-than", "3d", "--json"]
    if dry_run:
        cmd.append("--dry-run")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env(), timeout=TIMEOUT_S)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"FAIL: icectl exited {proc.returncode}: {proc.stderr.strip()}")
    return wall, {plain(p) for p in json.loads(proc.stdout)["orphan_file_locations"]}, {}


def run_spark(warehouse: Path, dry_run: bool) -> tuple[float, set[str], dict[str, float]]:
    cutoff = datetime.datetime.fromtimestamp(time.time() - 3 * DAY_S, datetime.timezone.utc)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", SPARK_CHILD, str(warehouse), f"db.{NAME}",
                           cutoff.strftime("%Y-%m-%d %H:%M:%S.%f"), str(dry_run).lower()],
                          capture_output=True, text=True, cwd=REPO, env=env(), timeout=TIMEOUT_S)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"FAIL: Spark exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    return wall, {plain(p) for p in doc["orphans"]}, {"startup_s": doc["startup_s"], "call_s": doc["call_s"]}


def on_disk(d: Path) -> set[str]:
    return {os.path.join(r, n) for r, _ds, ns in os.walk(d) for n in ns if not n.startswith(".")}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--live", type=int, default=10_000)
    ap.add_argument("--orphans", type=int, default=1_000)
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one, removed)")
    ap.add_argument("--reuse", action="store_true", help="reuse the pristine table already in --dir")
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-orphans-"))
    warehouse = root / "warehouse"
    live, pristine = warehouse / "db" / NAME, root / "pristine" / NAME
    if not (args.reuse and pristine.exists()):
        if pristine.exists():
            shutil.rmtree(pristine)
        t0 = time.perf_counter()
        restore_target = live
        if restore_target.exists():
            shutil.rmtree(restore_target)
        build(live, args.live, args.orphans)
        pristine.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(live), str(pristine)], check=True)
        print(f"built {args.live} live files + {args.orphans} orphans in {time.perf_counter() - t0:.1f}s")
    rows = []
    results: dict[tuple[str, bool], set[str]] = {}
    contenders = [("icectl", lambda dry: run_icectl(live, dry))]
    if not args.no_spark:
        contenders.append(("spark", lambda dry: run_spark(warehouse, dry)))
    for dry in (True, False):
        for name, fn in contenders:
            restore(pristine, live)
            before = on_disk(live)
            load = os.getloadavg()[0]
            wall, found, extra = fn(dry)
            gone = before - on_disk(live)
            if dry and gone:
                sys.exit(f"FAIL: {name} dry run deleted {len(gone)} files")
            if not dry and gone != found:
                sys.exit(f"FAIL: {name} deleted {len(gone)} files but reported {len(found)}")
            results[(name, dry)] = found
            rows.append((name, "dry run" if dry else "real", wall, len(found), load, extra))
    for dry in (True, False):
        if ("spark", dry) in results and results[("spark", dry)] != results[("icectl", dry)]:
            sys.exit(f"FAIL: different orphans ({'dry' if dry else 'real'}): "
                     f"{sorted(results[('spark', dry)] ^ results[('icectl', dry)])[:5]}")
    print(f"\nremove-orphan-files: {args.live} live files, {args.orphans + 1} orphans "
          f"(cpus {os.cpu_count()})")
    print(f"{'contender':<10} {'run':<8} {'wall s':>8} {'orphans':>8} {'load1':>6}  detail")
    for name, run, wall, n, load, extra in rows:
        detail = " ".join(f"{k}={v:.1f}" for k, v in extra.items())
        print(f"{name:<10} {run:<8} {wall:>8.2f} {n:>8} {load:>6.2f}  {detail}")
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
