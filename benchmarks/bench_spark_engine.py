"""Benchmark the Spark engine (issue 17): the local engine vs ``--engine spark`` on ``local[1]`` and
``local[2]`` vs Spark's own procedures, on a big table, in one run.

Tables (built once, reused from ``--dir``):

* **big**: one snapshot of 20,000 manifests x 100 entries (2,000,000 data files), written with
  icectl's own manifest writer on every core, partitioned by ``bucket(16, id), category`` with
  column bounds, plus 1,000 orphan files in ``data/``. The data files do not exist: every timed
  command reads manifests only (``validate`` without ``--deep``), and Spark's procedures used
  here read manifests only too.
* **expire**: ``bench_expire.py``'s table of 2,000 one-file fast appends (2,000 manifest lists,
  N^2/2 list rows).

Each figure is a whole process, as a user or a cron job pays it: ``python -m icectl <command>
--json`` with the local engine, with ``--engine spark --spark-master local[1]`` and with
``local[2]`` (each its own Spark: a fresh JVM per process, start-up included), and Spark's procedure
in one warm session (``local[2]``, the Iceberg runtime of the test extra, as
``tests/support/spark.py`` starts it; only the CALL is timed). Commands that write (``compact``,
``expire-snapshots``) run on a pristine copy restored before every run. Every icectl run is
checked: the local and Spark engines must report the same result (the JSON less its ``engine``
key and wall-clock values); Spark's procedures must find the same counts.

    python benchmarks/bench_spark_engine.py --dir /tmp/icectl-bench-spark            # full size
    python benchmarks/bench_spark_engine.py --small                                  # 500 manifests, 200 snapshots
    python benchmarks/bench_spark_engine.py --dir /tmp/b --only inspect validate --no-procedures

Prints one Markdown row per command: the three icectl figures side by side, Spark's procedure,
the speed-up of the added core (local[1] time / local[2] time) and the Spark tasks the run used.
Needs the test extra (pyspark, the Iceberg runtime) and Java 17. Full size: ~1-2 GB of manifests
in ``--dir``; the build takes several minutes on 2 cores, the run tens of minutes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

# The 2,000-snapshot table, its restore and the subprocess environment (it also puts the repository
# and tests/ on sys.path).
import bench_expire  # noqa: E402

from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest, write_manifest_list  # noqa: E402
from icectl.config import parse_config  # noqa: E402
from icectl.ops.create.table import SchemaSource, create  # noqa: E402
from icectl.spec.manifest import (  # noqa: E402
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from icectl.spec.metadata import TableMetadata  # noqa: E402
from icectl.spec.schema import LONG  # noqa: E402
from icectl.spec.snapshots import Snapshot  # noqa: E402
from icectl.spec.transforms import BucketTransform  # noqa: E402
from icectl.spec.updates import TableChange, snapshot_updates  # noqa: E402
from icectl.storage import FileIO  # noqa: E402
from icectl.table import load_table  # noqa: E402
from icectl.table.commit import commit, new_snapshot_id  # noqa: E402
from icectl.table.summary import SummaryBuilder  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = bench_expire.REPO
SCHEMA_DDL = "id long, category string, price double, payload string"
CATEGORIES = ("red", "green", "blue", "amber", "teal", "plum", "sand", "jade")
ORPHANS = 1000  # files no snapshot names, 3 days old
ORPHAN_AGE_H = 25  # remove-orphan-files' cutoff: Spark's procedure refuses one younger than 24 hours
OPERATIONS = ("inspect", "validate", "compact", "expire-dry-run", "expire", "orphans-dry-run")


@dataclass(frozen=True)
class Sizes:
    manifests: int
    entries: int  # per manifest
    snapshots: int  # of the expire table


FULL = Sizes(20_000, 100, 2000)
SMALL = Sizes(500, 100, 200)
ENGINES: dict[str, tuple[str, ...]] = {
    "local": (),
    "spark local[1]": ("--engine", "spark", "--spark-master", "local[1]"),
    "spark local[2]": ("--engine", "spark", "--spark-master", "local[2]"),
}
# Loopback only (containers often have no resolvable host name), no UI, room for the driver.
SPARK_CONF = ("spark.ui.enabled=false", "spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1",
              "spark.driver.memory=2g")


# --------------------------------------------------------------------------- the big table


def _write_manifests(table_dir: str, first: int, count: int, entries: int, snapshot_id: int
                     ) -> tuple[list[ManifestFile], SummaryBuilder]:
    """Manifests ``first .. first+count-1`` (a worker process's share) and their summary counts."""
    table = load_table(table_dir)
    md = table.metadata
    schema, spec = md.schema(), md.spec()
    ptype = spec.partition_type(schema, md.schemas)
    bucket = BucketTransform(16)
    summary = SummaryBuilder()
    out: list[ManifestFile] = []
    for i in range(first, first + count):
        rows = []
        for j in range(entries):
            lo = (i * entries + j) * 1000
            hi = lo + 999
            category = CATEGORIES[(i + j) % len(CATEGORIES)]
            f = DataFile(content=DataFileContent.DATA, file_path=f"{table_dir}/data/m{i:05d}-{j:03d}.parquet",
                         file_format="PARQUET", partition=(bucket.apply(lo, LONG), category), record_count=1000,
                         file_size_in_bytes=40_000 + j, column_sizes={1: 8000, 2: 900, 3: 8000, 4: 20_000},
                         value_counts={1: 1000, 2: 1000, 3: 1000, 4: 1000}, null_value_counts={1: 0, 2: 0, 3: 0, 4: 0},
                         nan_value_counts={3: 0},
                         lower_bounds={1: struct.pack("<q", lo), 2: category.encode(), 3: struct.pack("<d", lo / 3),
                                       4: f"row {lo}".encode()},
                         upper_bounds={1: struct.pack("<q", hi), 2: category.encode(), 3: struct.pack("<d", hi / 3),
                                       4: f"row {hi}".encode()},
                         split_offsets=(4,), sort_order_id=0)
            rows.append(ManifestEntry(ManifestEntryStatus.ADDED, snapshot_id, None, None, f))
            summary.added_file(f, repr(f.partition))
        written = write_manifest(rows, schema=schema, spec=spec, partition_type=ptype, format_version=md.format_version,
                                 content=ManifestContent.DATA, snapshot_id=snapshot_id)
        path = f"{table_dir}/metadata/{uuid.uuid4()}-m{i}.avro"
        table.io.write(path, written.data)
        out.append(written.to_manifest_file(path, len(written.data), spec.spec_id, snapshot_id, UNASSIGNED_SEQ))
    return out, summary


class _InProcess:
    """The executor interface of ProcessPoolExecutor, run here (a test process with a JVM must not fork)."""

    def __enter__(self) -> _InProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        fut.set_result(fn(*args))
        return fut


def build_big(table_dir: Path, sizes: Sizes, workers: int | None = None) -> None:
    """One append snapshot of ``sizes.manifests`` manifests, committed once; ``ORPHANS`` stray files.
    ``workers``: processes writing manifests (default: one per core; 1: this process only)."""
    config, fio = parse_config({}), FileIO()
    create(str(table_dir), SchemaSource(ddl=SCHEMA_DDL), config=config, io=fio,
           partition_by="bucket(16, id), category", properties={"format-version": "2"})
    table = load_table(str(table_dir), config, fio)
    md = table.metadata
    snapshot_id = new_snapshot_id(md)
    chunk = 250
    starts = range(0, sizes.manifests, chunk)
    manifests: list[ManifestFile] = []
    summary = SummaryBuilder()
    t0 = time.perf_counter()
    workers = workers or os.cpu_count() or 2
    with ProcessPoolExecutor(max_workers=workers) if workers > 1 else _InProcess() as pool:
        futures = [pool.submit(_write_manifests, str(table_dir), s, min(chunk, sizes.manifests - s), sizes.entries,
                               snapshot_id) for s in starts]
        for n, fut in enumerate(futures, 1):
            got, part = fut.result()
            manifests.extend(got)
            for k, v in part.metrics.items():
                summary.metrics[k] = summary.metrics.get(k, 0) + v
            summary.partitions |= part.partitions
            if n % 8 == 0:
                print(f"  {len(manifests):,} manifests ({time.perf_counter() - t0:.0f}s)", flush=True)
    seq = md.last_sequence_number + 1
    listed = write_manifest_list(manifests, format_version=md.format_version, snapshot_id=snapshot_id,
                                 parent_snapshot_id=None, sequence_number=seq)
    list_path = str(table_dir / "metadata" / f"snap-{snapshot_id}-1-{uuid.uuid4()}.avro")
    fio.write(list_path, listed.data)
    snap = Snapshot(snapshot_id=snapshot_id, timestamp_ms=max(md.last_updated_ms + 1, int(time.time() * 1000)),
                    parent_snapshot_id=None, sequence_number=seq, manifest_list=list_path,
                    summary=summary.build("append", None), schema_id=md.current_schema_id)
    updates = tuple(snapshot_updates(md, snap))

    def publish(base: TableMetadata) -> TableChange:
        if base.snapshots:
            raise RuntimeError(f"{table_dir} changed while it was being built")
        return TableChange((), updates)

    commit(table, publish)
    orphans = table_dir / "data" / "orphans"
    orphans.mkdir(parents=True, exist_ok=True)
    stale = time.time() - 3 * 86400  # older than Spark's procedure accepts to remove (24 h at least)
    for k in range(ORPHANS):
        (orphans / f"stray-{k:04d}.parquet").write_bytes(b"PAR1")
        os.utime(orphans / f"stray-{k:04d}.parquet", (stale, stale))


class BigLayout(bench_expire.Layout):
    def name(self, n: int) -> str:
        return f"engine_big_{n}"


def ensure_big(layout: BigLayout, sizes: Sizes) -> None:
    """Build the big table and its pristine copy, or reuse both (``<name>.json`` marks a finished build)."""
    n = sizes.manifests
    if layout.info_path(n).is_file() and layout.pristine(n).is_dir():
        print(f"  reusing {layout.pristine(n)}", flush=True)
        bench_expire.restore(layout, n)
        return
    for p in (layout.live(n), layout.pristine(n)):
        shutil.rmtree(p, ignore_errors=True)
    print(f"  building {n:,} manifests x {sizes.entries} entries in {layout.live(n)}", flush=True)
    start = time.perf_counter()
    build_big(layout.live(n), sizes)
    seconds = time.perf_counter() - start
    layout.pristine(n).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(layout.live(n)), str(layout.pristine(n))], check=True)
    layout.info_path(n).write_text(json.dumps({"manifests": n, "entries": sizes.entries, "build_s": seconds}))
    print(f"  built in {seconds:.0f}s", flush=True)


# --------------------------------------------------------------------------- one icectl process


@dataclass
class Run:
    seconds: float
    doc: dict[str, Any]  # the JSON; for inspect only its keys but rows, and "rows_count"


def icectl_run(args: list[str], engine: str, *, rows_only: bool = False) -> Run:
    """``python -m icectl <args> --json`` with ``engine``; ``rows_only``: count the rows as they stream
    (inspect's millions of rows are never held: stdout is read line by line, one row per line)."""
    extra = [a for kv in SPARK_CONF for a in ("--spark-conf", kv)] if ENGINES[engine] else []
    cmd = [sys.executable, "-m", "icectl", *args, "--json", *ENGINES[engine], *extra]
    # A cold manifest cache of its own: a run must not read what an earlier contender decoded (nor
    # fill the user's cache). Spark's workers inherit it (the engine forwards ICECTL_CACHE_DIR too).
    with tempfile.TemporaryFile() as err, tempfile.TemporaryDirectory(prefix="icectl-bench-cache-") as cache:
        env = {**bench_expire._cli_env(), "ICECTL_CACHE_DIR": cache}
        env.pop("ICECTL_CACHE", None)
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, cwd=REPO, env=env, text=True)
        assert proc.stdout is not None
        if rows_only:
            count, last = 0, ""
            for line in proc.stdout:
                count, last = count + 1, line
            _, sep, tail = last.rpartition('], "engine": ')  # the last row, then the document's tail
            doc = {"rows_count": count, **({"engine": json.loads(tail.strip()[:-1])} if sep else {})}
        else:
            doc = json.loads(proc.stdout.read())
        proc.wait(timeout=bench_expire.SUBPROCESS_TIMEOUT_S)
        seconds = time.perf_counter() - start
        err.seek(0)
        if proc.returncode not in (0, 7):  # 7: validate found errors (compared, not fatal)
            sys.exit(f"FAIL: {' '.join(cmd[2:])} exited {proc.returncode}: {err.read().decode()[-2000:]}")
    return Run(seconds, doc)


_CLOCK = re.compile(r'"(now_ms|max_snapshot_age_ms|snapshot_age_ms|older_than_ms)": \d+')
_RANDOM = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|snap-\d+-|\d{15,}")


def comparable(doc: dict[str, Any]) -> str:
    """The result less its engine key, clock values and the random names a write gives new files."""
    text = json.dumps({k: v for k, v in doc.items() if k not in ("engine", "metadata_location")}, sort_keys=True)
    return _RANDOM.sub("#", _CLOCK.sub("#", text))


# --------------------------------------------------------------------------- the operations


@dataclass
class Operation:
    name: str
    table: str  # "big" or "expire"
    args: Callable[[Path, str], list[str]]  # (table folder, the run's cutoff "now" in ISO 8601)
    restore: bool = False  # writes: run on a pristine copy each time
    procedure: Callable[[SparkSession, str], dict[str, Any]] | None = None
    procedure_name: str = ""


def _now(hours_back: int = 0) -> str:
    at = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=hours_back)
    return at.strftime("%Y-%m-%d %H:%M:%S.%f")


def _files_count(spark: SparkSession, name: str) -> dict[str, Any]:
    return {"rows_count": spark.sql(f"SELECT count(*) FROM local.db.{name}.files").collect()[0][0]}


def _rewrite(spark: SparkSession, name: str) -> dict[str, Any]:
    return spark.sql(f"CALL local.system.rewrite_manifests(table => 'db.{name}')").collect()[0].asDict()


def _expire(spark: SparkSession, name: str) -> dict[str, Any]:
    return spark.sql(f"CALL local.system.expire_snapshots(table => 'db.{name}', older_than => TIMESTAMP '{_now()}', "
                     "retain_last => 1)").collect()[0].asDict()


def _orphans(spark: SparkSession, name: str) -> dict[str, Any]:
    rows = spark.sql(f"CALL local.system.remove_orphan_files(table => 'db.{name}', dry_run => true, "
                     f"older_than => TIMESTAMP '{_now(ORPHAN_AGE_H)}')").collect()
    return {"orphan_file_count": len(rows)}


OPS = {
    "inspect": Operation("inspect files (count)", "big", lambda d, _now: ["inspect", "files", str(d)],
                         procedure=_files_count, procedure_name="SELECT count(*) FROM t.files"),
    "validate": Operation("validate", "big", lambda d, _now: ["validate", str(d)]),
    "compact": Operation("compact", "big", lambda d, _now: ["compact", str(d)], restore=True, procedure=_rewrite,
                         procedure_name="rewrite_manifests"),
    "expire-dry-run": Operation("expire-snapshots --dry-run", "expire",
                                lambda d, now: ["expire-snapshots", str(d), "--older-than", now, "--retain-last",
                                                "1", "--dry-run"]),
    "expire": Operation("expire-snapshots", "expire",
                        lambda d, now: ["expire-snapshots", str(d), "--older-than", now, "--retain-last", "1"],
                        restore=True, procedure=_expire, procedure_name="expire_snapshots"),
    "orphans-dry-run": Operation("remove-orphan-files --dry-run", "big",
                                 lambda d, _now: ["remove-orphan-files", str(d), "--dry-run", "--older-than",
                                                  f"{ORPHAN_AGE_H}h"],
                                 procedure=_orphans, procedure_name="remove_orphan_files(dry_run)"),
}


@dataclass
class Row:
    """One command's figures: best seconds per contender, the Spark tasks, what each reported."""

    operation: str
    table: str
    seconds: dict[str, float] = field(default_factory=dict)
    tasks: dict[str, int | None] = field(default_factory=dict)
    procedure: str = ""
    procedure_seconds: float | None = None
    check: str = ""

    @property
    def per_core(self) -> float | None:
        one, two = self.seconds.get("spark local[1]"), self.seconds.get("spark local[2]")
        return one / two if one and two else None


def _check(op: Operation, docs: dict[str, dict[str, Any]], proc: dict[str, Any] | None) -> str:
    """Every engine's result is the local engine's; Spark's procedure counts what icectl counts."""
    base = comparable(docs["local"])
    for engine, doc in docs.items():
        if comparable(doc) != base:
            sys.exit(f"FAIL: {op.name}: {engine} differs from the local engine:\n{comparable(doc)[:1500]}\n"
                     f"{base[:1500]}")
    local = docs["local"]
    if proc is None:
        return "engines agree"
    keys = {"rows_count": "rows_count", "orphan_file_count": "orphan_file_count",
            "deleted_manifest_lists_count": "deleted_manifest_lists_count",
            "rewritten_manifests_count": "manifests_replaced"}
    seen = {k: (v, local.get(keys[k])) for k, v in proc.items() if k in keys}
    return "engines agree; Spark " + ", ".join(f"{k} {a} (icectl {b})" for k, (a, b) in seen.items())


def measure(root: Path, sizes: Sizes, runs: int, only: tuple[str, ...], procedures: bool,
            spark_session: Callable[[], SparkSession] | None = None) -> list[Row]:
    """Build or reuse the tables under ``root`` (Spark's warehouse: ``root/warehouse``), run every
    operation of ``only``; the rows of the report. ``spark_session``: the caller's session on that
    warehouse (``run_all.py``'s), else one is started and stopped here."""
    big = BigLayout(root, "icectl")
    exp = bench_expire.Layout(root, "icectl")
    big.warehouse.mkdir(parents=True, exist_ok=True)
    ensure_big(big, sizes)
    session: list[SparkSession] = []

    def spark() -> SparkSession:
        if spark_session is not None:
            return spark_session()
        if not session:
            from support.spark import start_spark

            session.append(start_spark(str(big.warehouse)))
            session[0].sql("SHOW NAMESPACES IN local").collect()  # warm: catalog, class loading
        return session[0]

    if any(OPS[o].table == "expire" for o in only):
        bench_expire.ensure_table(exp, sizes.snapshots, True, spark)
    rows: list[Row] = []
    try:
        for key in only:
            op = OPS[key]
            layout, n = (big, sizes.manifests) if op.table == "big" else (exp, sizes.snapshots)
            label = (f"{sizes.manifests:,} manifests x {sizes.entries}" if op.table == "big"
                     else f"{sizes.snapshots:,} snapshots")
            row = Row(op.name, label)
            docs: dict[str, dict[str, Any]] = {}
            # One cutoff for every run of the operation: the engines' results must be equal, not near.
            now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            for r in range(runs):
                for engine in ENGINES:
                    if op.restore:
                        bench_expire.restore(layout, n)
                    got = icectl_run(op.args(layout.live(n), now), engine, rows_only=key == "inspect")
                    row.seconds[engine] = min(row.seconds.get(engine, float("inf")), got.seconds)
                    row.tasks[engine] = (got.doc.get("engine") or {}).get("spark_tasks")
                    docs[engine] = got.doc
                    print(f"  {op.name}, run {r + 1}: {engine} {got.seconds:.2f}s", flush=True)
            proc = None
            if procedures and op.procedure is not None:
                if op.restore:
                    bench_expire.restore(layout, n)
                session_now = spark()  # started (and warmed) before the clock starts
                start = time.perf_counter()
                proc = op.procedure(session_now, layout.name(n))
                row.procedure, row.procedure_seconds = op.procedure_name, time.perf_counter() - start
            row.check = _check(op, docs, proc)
            rows.append(row)
        if big.live(sizes.manifests).exists():
            bench_expire.restore(big, sizes.manifests)  # leave the reusable table pristine
    finally:
        for s in session:
            s.stop()
    return rows


def report(rows: list[Row], sizes: Sizes) -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n## Spark engine: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{os.cpu_count()} CPUs, load average {load}, Python {sys.version.split()[0]}")
    print(f"big table: {sizes.manifests:,} manifests x {sizes.entries} entries = "
          f"{sizes.manifests * sizes.entries:,} data files (not on disk); expire table: {sizes.snapshots:,} snapshots")
    print("each icectl figure is a whole process (Spark: its JVM start included); Spark's procedure: the CALL in a "
          "warm local[2] session\n")
    print("| command | table | local | spark local[1] | spark local[2] | local[1] / local[2] "
          "| Spark procedure | tasks (local[2]) | check |")
    print("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | --- |")
    for r in rows:
        s = r.seconds
        core = f"{r.per_core:.2f}x" if r.per_core else "-"
        proc = f"{r.procedure} {r.procedure_seconds:.2f}s" if r.procedure_seconds is not None else "-"
        print(f"| {r.operation} | {r.table} | {s['local']:.2f}s | {s['spark local[1]']:.2f}s "
              f"| {s['spark local[2]']:.2f}s | {core} | {proc} | {r.tasks.get('spark local[2]')} | {r.check} |")
    faster = [r.operation for r in rows if r.seconds["local"] <= r.seconds["spark local[2]"]]
    print(f"\nlocal engine faster than spark local[2] on: {', '.join(faster) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "icectl-bench-spark-engine",
                    help="build the tables here, reuse them in later runs (default: %(default)s)")
    ap.add_argument("--small", action="store_true", help="500 manifests x 100 entries, 200 snapshots: a quick run")
    ap.add_argument("--manifests", type=int, help="manifests of the big table (default 20000; --small 500)")
    ap.add_argument("--runs", type=int, default=1, help="timed runs per contender, best kept (default 1)")
    ap.add_argument("--only", nargs="+", choices=OPERATIONS, default=list(OPERATIONS))
    ap.add_argument("--no-procedures", action="store_true", help="no Spark procedures (no Iceberg runtime needed)")
    ap.add_argument("--json", type=Path, help="also write the rows here as JSON")
    args = ap.parse_args(argv)
    sizes = SMALL if args.small else FULL
    if args.manifests:
        sizes = Sizes(args.manifests, sizes.entries, sizes.snapshots)
    rows = measure(args.dir.resolve(), sizes, args.runs, tuple(args.only), not args.no_procedures)
    report(rows, sizes)
    if args.json:
        args.json.write_text(json.dumps({"sizes": asdict(sizes), "rows": [asdict(r) for r in rows]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
