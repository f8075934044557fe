"""Benchmark `icectl expire-snapshots` against Spark's `expire_snapshots` procedure on identical tables.

One run, for each table size: build a file-system table of N single-file append snapshots (one new
manifest each) once, snapshot its directory, then restore that directory to the same path before
every timed expiry (all but the last snapshot: older than now, retain last 1). Contenders: the
icectl CLI and a Spark job, each as one process from the command line (what a cron job pays);
Spark's procedure in a warm, running session; icectl's core in-process. Checks that all of them
deleted the same files and left the same table, then prints a table of figures.

    python benchmarks/bench_expire.py                              # 200 and 2000 snapshots, 3 runs
    python benchmarks/bench_expire.py --snapshots 200 --runs 1
    python benchmarks/bench_expire.py --dir /tmp/be                 # build into /tmp/be and keep it
    python benchmarks/bench_expire.py --dir /tmp/be --reuse --no-spark --profile
    python benchmarks/bench_expire.py --builder spark --snapshots 200   # a table Spark wrote

Needs the test extra (pyspark, the Iceberg runtime, Java 17): ``pip install -e ".[test]"``.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
for _p in (REPO, TESTS):  # run from a checkout without `pip install -e .`; tests/support for Spark
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest, write_manifest_list  # noqa: E402
from icectl.config import parse_config  # noqa: E402
from icectl.ops import expire as icectl_expire  # noqa: E402
from icectl.ops.create.table import SchemaSource, create  # noqa: E402
from icectl.ops.expire import ExpirePolicy, expire_snapshots  # noqa: E402
from icectl.ops.files.add_files import read_data_file  # noqa: E402
from icectl.spec.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile  # noqa: E402
from icectl.spec.metadata import TableMetadata  # noqa: E402
from icectl.spec.snapshots import Snapshot  # noqa: E402
from icectl.spec.updates import TableChange, TableUpdate, apply_updates, snapshot_updates  # noqa: E402
from icectl.storage import FileIO  # noqa: E402
from icectl.table import load_table  # noqa: E402
from icectl.table import scan as icectl_scan  # noqa: E402
from icectl.table.commit import commit, new_snapshot_id  # noqa: E402
from icectl.table.summary import SummaryBuilder  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA_DDL = "id long, payload string"
SPARK_SCHEMA_DDL = "id bigint, payload string"
# Spark's expire_snapshots output columns (deleted_<category>_count), in its order.
CATEGORIES = ("data_files", "position_delete_files", "equality_delete_files", "manifest_files", "manifest_lists",
              "statistics_files")
SHORT = {"data_files": "data", "position_delete_files": "pos", "equality_delete_files": "eq",
         "manifest_files": "manifests", "manifest_lists": "lists", "statistics_files": "stats"}
SUBPROCESS_TIMEOUT_S = 3600

# A fresh interpreter that starts Spark as the test suite does and runs the procedure once: the
# whole process is what a cron job pays. It imports nothing of icectl.
SPARK_CHILD = textwrap.dedent("""
    import datetime, json, os, sys, time
    t0 = time.perf_counter()
    from support.spark import start_spark
    warehouse, table = sys.argv[1], sys.argv[2]
    spark = start_spark(warehouse)
    t1 = time.perf_counter()
    cutoff = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    row = spark.sql(f"CALL local.system.expire_snapshots(table => '{table}', "
                    f"older_than => TIMESTAMP '{cutoff}', retain_last => 1)").collect()[0]
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
class Layout:
    """``<dir>/warehouse/db/expire_<builder>_<n>`` is the live table (Spark: ``local.db.<name>``);
    ``<dir>/pristine/<name>`` its untouched copy, restored to the live path before every run."""

    root: Path
    builder: str

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse"

    def name(self, n: int) -> str:
        return f"expire_{self.builder}_{n}"

    def live(self, n: int) -> Path:
        return self.warehouse / "db" / self.name(n)

    def pristine(self, n: int) -> Path:
        return self.root / "pristine" / self.name(n)

    def info_path(self, n: int) -> Path:
        return self.root / "pristine" / f"{self.name(n)}.json"


def restore(layout: Layout, n: int) -> None:
    """The pristine table back at its own path: every absolute path in its metadata stays valid."""
    live = layout.live(n)
    if live.exists():
        shutil.rmtree(live)
    live.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(layout.pristine(n)), str(live)], check=True)


def _tiny_parquet(path: Path, i: int) -> None:
    pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "payload": [f"row {i}"]}), path)


def build_icectl(table_dir: Path, n: int) -> None:
    """N single-file appends with icectl's own writers, as `add-files` writes each one, chained in
    memory and published as one commit.

    Calling ``add_files`` N times costs O(N^2): every call re-reads the table's metadata, the
    parent's manifest list and (for its duplicate check) every manifest. Per snapshot this writes
    exactly what ``add_files`` writes: a one-entry manifest, and a manifest list of the new
    manifest followed by the parent's, with the sequence numbers and summary of a fast append.
    """
    config, fio = parse_config({}), FileIO()
    create(str(table_dir), SchemaSource(ddl=SCHEMA_DDL), config=config, io=fio)
    table = load_table(str(table_dir), config, fio)
    md = table.metadata
    schema, spec = md.schema(), md.spec()
    ptype = spec.partition_type(schema, md.schemas)
    (table_dir / "data").mkdir(parents=True, exist_ok=True)
    metadata_dir = table_dir / "metadata"
    timestamp_ms = md.last_updated_ms  # Java: no snapshot older than the metadata log's last entry
    parent: Snapshot | None = None
    parent_manifests: list[ManifestFile] = []
    updates: list[TableUpdate] = []
    for i in range(n):
        path = table_dir / "data" / f"{i:05d}-{uuid.uuid4()}.parquet"
        _tiny_parquet(path, i)
        data_file, partition = read_data_file(fio, str(path), schema, spec)
        snapshot_id = new_snapshot_id(md)
        seq = md.last_sequence_number + 1
        commit_id = uuid.uuid4()
        written = write_manifest([ManifestEntry(ManifestEntryStatus.ADDED, snapshot_id, None, None, data_file)],
                                 schema=schema, spec=spec, partition_type=ptype, format_version=md.format_version,
                                 content=ManifestContent.DATA, snapshot_id=snapshot_id)
        manifest_path = str(metadata_dir / f"{commit_id}-m0.avro")
        fio.write(manifest_path, written.data)
        manifest = written.to_manifest_file(manifest_path, len(written.data), spec.spec_id, snapshot_id,
                                            UNASSIGNED_SEQ)
        listed = write_manifest_list([manifest, *parent_manifests], format_version=md.format_version,
                                     snapshot_id=snapshot_id,
                                     parent_snapshot_id=parent.snapshot_id if parent else None, sequence_number=seq)
        list_path = str(metadata_dir / f"snap-{snapshot_id}-1-{commit_id}.avro")
        fio.write(list_path, listed.data)
        timestamp_ms = max(timestamp_ms + 1, int(time.time() * 1000))
        summary = SummaryBuilder()
        summary.added_file(data_file, partition)
        snap = Snapshot(snapshot_id=snapshot_id, timestamp_ms=timestamp_ms,
                        parent_snapshot_id=parent.snapshot_id if parent else None, sequence_number=seq,
                        manifest_list=list_path, summary=summary.build("append", parent.summary if parent else None),
                        schema_id=md.current_schema_id)
        ups = snapshot_updates(md, snap)
        md = apply_updates(md, ups)
        updates.extend(ups)
        parent, parent_manifests = snap, listed.manifests
    first_uuid = table.metadata.table_uuid

    def publish(base: TableMetadata) -> TableChange:
        if base.table_uuid != first_uuid or base.snapshots:
            raise RuntimeError(f"{table_dir} changed while it was being built")
        return TableChange((), tuple(updates))

    commit(table, publish)


def build_spark(spark: SparkSession, layout: Layout, n: int) -> None:
    """N single-file fast appends through Iceberg's Java API in the running session (Spark's own
    writers: Java manifests and manifest lists, a metadata version and Hadoop ``.crc`` files per
    commit). 2000 commits took ~150 s; one ``INSERT`` each (``commit.manifest-merge.enabled=false``)
    costs ~0.13 s a commit already at 100 snapshots, plus a task per insert."""
    table_dir = layout.live(n)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.db")
    spark.sql(f"CREATE TABLE local.db.{layout.name(n)} ({SPARK_SCHEMA_DDL}) USING iceberg")
    jvm = spark._jvm  # type: ignore[attr-defined]
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession,  # type: ignore[attr-defined]
                                                                     f"local.db.{layout.name(n)}")
    (table_dir / "data").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        path = table_dir / "data" / f"{i:05d}-{uuid.uuid4()}.parquet"
        _tiny_parquet(path, i)
        data_file = (jvm.org.apache.iceberg.DataFiles.builder(table.spec()).withPath(str(path))
                     .withFileSizeInBytes(path.stat().st_size).withRecordCount(1).withFormat("PARQUET").build())
        table.newFastAppend().appendFile(data_file).commit()
    prune_metadata_versions(table_dir)


def prune_metadata_versions(table_dir: Path) -> int:
    """Drop ``vN.metadata.json`` files the current one no longer lists (Java would with
    ``write.metadata.delete-after-commit.enabled``): N commits leave O(N^2) bytes of JSON (1.5 GB
    at 2000), which every restore would copy. Expiry reads none of them."""
    current = load_table(str(table_dir)).metadata_location
    raw = json.loads(Path(current.removeprefix("file:")).read_text())
    keep = {Path(current.removeprefix("file:")).name}
    keep.update(Path(e["metadata-file"].removeprefix("file:")).name for e in raw.get("metadata-log", []))
    dropped = 0
    for p in (table_dir / "metadata").glob("v*.metadata.json"):
        if p.name not in keep:
            p.unlink()
            (p.parent / f".{p.name}.crc").unlink(missing_ok=True)
            dropped += 1
    return dropped


def ensure_table(layout: Layout, n: int, reuse: bool, spark: Callable[[], SparkSession]) -> dict[str, Any]:
    """Build the pristine table of ``n`` snapshots (or reuse it); returns its description."""
    info_path = layout.info_path(n)
    if reuse and info_path.is_file() and layout.pristine(n).is_dir():
        info: dict[str, Any] = json.loads(info_path.read_text())
        print(f"  reusing {layout.pristine(n)} (built by {info['builder']} in {info['build_s']:.1f}s)")
        return info
    for p in (layout.live(n), layout.pristine(n)):
        if p.exists():
            shutil.rmtree(p)
    print(f"  building {n} snapshots with {layout.builder} in {layout.live(n)}", flush=True)
    start = time.perf_counter()
    if layout.builder == "icectl":
        build_icectl(layout.live(n), n)
    else:
        build_spark(spark(), layout, n)
    seconds = time.perf_counter() - start
    layout.pristine(n).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(layout.live(n)), str(layout.pristine(n))], check=True)
    files = [p for p in layout.pristine(n).rglob("*") if p.is_file()]
    info = {"builder": layout.builder, "snapshots": n, "build_s": seconds, "files": len(files),
            "bytes": sum(p.stat().st_size for p in files)}
    info_path.write_text(json.dumps(info))
    print(f"  built in {seconds:.1f}s: {len(files)} files, {info['bytes'] / 1e6:.1f} MB")
    return info


# --------------------------------------------------------------------------- contenders


@dataclass
class Outcome:
    """What one expiry reported: files deleted by category, and timings it measured itself."""

    deleted: dict[str, int]
    cpu: float  # seconds of CPU, user + system, of every process involved (JVM included)
    inner: dict[str, float] = field(default_factory=dict)


def _counts(doc: dict[str, Any]) -> dict[str, int]:
    """``deleted_<category>_count`` of Spark's row or icectl's JSON, by Spark's category names."""
    out: dict[str, int] = {}
    for c in CATEGORIES:
        keys = [f"deleted_{c}_count"] + (["deleted_manifests_count"] if c == "manifest_files" else [])
        value = next((doc[k] for k in keys if k in doc), None)
        if value is None:
            raise KeyError(f"no deleted_{c}_count in {sorted(doc)}")
        out[c] = int(value)
    return out


def _children_cpu() -> float:
    """CPU of waited-for child processes (not of a JVM they leave running: see ``_proc_cpu``)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _proc_cpu(pid: int) -> float:
    """utime + stime of a live process, from ``/proc/<pid>/stat`` (fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), str(TESTS), env.get("PYTHONPATH")]))
    return env


def icectl_cli(table_dir: Path) -> Outcome:
    """End to end, as a cron job runs it: a fresh interpreter, JSON on stdout."""
    cmd = [sys.executable, "-m", "icectl", "expire-snapshots", str(table_dir), "--older-than", "0s",
           "--retain-last", "1", "--json"]
    cpu = _children_cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=_cli_env(), timeout=SUBPROCESS_TIMEOUT_S)
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"FAIL: icectl CLI exited {proc.returncode}: {proc.stderr.strip()}")
    return Outcome(_counts(json.loads(proc.stdout)), cpu)


def icectl_cli_startup(table_dir: Path) -> Outcome:
    """Interpreter, imports and the table's metadata, no manifest list: the CLI's fixed cost."""
    cmd = [sys.executable, "-m", "icectl", "inspect", "table", str(table_dir), "--json"]
    cpu = _children_cpu()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO, env=_cli_env(), timeout=SUBPROCESS_TIMEOUT_S)
    return Outcome({}, _children_cpu() - cpu)


def icectl_core(table_dir: Path) -> Outcome:
    """In-process: load the table, expire (the same call the CLI makes)."""
    cpu = time.process_time()  # every thread of this process: the manifest and delete pools too
    now = int(time.time() * 1000)
    result = expire_snapshots(load_table(str(table_dir)), ExpirePolicy(older_than_ms=now, retain_last=1), now_ms=now)
    cpu = time.process_time() - cpu
    if result.exit_code != 0:
        sys.exit(f"FAIL: icectl core: exit code {result.exit_code}: {result.title}")
    return Outcome(_counts(result.data), cpu)


def spark_cli(warehouse: Path, name: str) -> Outcome:
    """A fresh ``python`` that starts a SparkSession and calls the procedure once."""
    cpu = _children_cpu()
    proc = subprocess.run([sys.executable, "-c", SPARK_CHILD, str(warehouse), f"db.{name}"], capture_output=True,
                          text=True, cwd=REPO, env=_cli_env(), timeout=SUBPROCESS_TIMEOUT_S)
    cpu = _children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"FAIL: Spark job exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    return Outcome(_counts(doc["row"]), cpu + doc["jvm_cpu_s"], {k: doc[k] for k in ("startup_s", "call_s", "stop_s")})


def spark_call(spark: SparkSession, name: str) -> Outcome:
    jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[attr-defined]
    cpu = _proc_cpu(jvm_pid) + time.process_time()
    cutoff = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    row = spark.sql(f"CALL local.system.expire_snapshots(table => 'db.{name}', "
                    f"older_than => TIMESTAMP '{cutoff}', retain_last => 1)").collect()[0]
    return Outcome(_counts(row.asDict()), _proc_cpu(jvm_pid) + time.process_time() - cpu)


# --------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class TableState:
    """The table an expiry left behind, as icectl reads it and as the directory holds it."""

    snapshot_ids: tuple[int, ...]
    live_files: frozenset[str]
    files_on_disk: frozenset[str]  # relative; no metadata JSON, version hint or hidden files
    orphan_checksums: int = field(compare=False)  # `.x.crc` whose `x` is gone (Hadoop's side files)


def _plain_path(p: str) -> str:
    return p.removeprefix("file://").removeprefix("file:")


def observe(table_dir: Path) -> TableState:
    table = load_table(str(table_dir))
    md = table.metadata
    snap = md.current_snapshot()
    live: set[str] = set()
    if snap is not None:
        for _m, e in icectl_scan.iter_entries(md, table.io, icectl_scan.manifests_of(md, snap, table.io),
                                              fields={"file_path"}, live_only=True):
            live.add(_plain_path(e.data_file.file_path))
    on_disk: set[str] = set()
    orphans = 0
    for p in table_dir.rglob("*"):
        if not p.is_file():
            continue
        if p.name.startswith("."):
            if p.name.endswith(".crc") and not (p.parent / p.name[1:-4]).exists():
                orphans += 1
            continue
        if p.name.endswith(".metadata.json") or p.name == "version-hint.text":
            continue  # each contender commits its own next version
        on_disk.add(p.relative_to(table_dir).as_posix())
    return TableState(tuple(sorted(s.snapshot_id for s in md.snapshots)), frozenset(live), frozenset(on_disk),
                      orphans)


def spark_view(spark: SparkSession, name: str) -> tuple[tuple[int, ...], frozenset[str]]:
    """Snapshots and live files as Spark's metadata tables see the table."""
    ids = tuple(sorted(int(r[0]) for r in spark.sql(f"SELECT snapshot_id FROM local.db.{name}.snapshots").collect()))
    files = frozenset(_plain_path(r[0]) for r in spark.sql(f"SELECT file_path FROM local.db.{name}.files").collect())
    return ids, files


# --------------------------------------------------------------------------- timing


@dataclass
class Contender:
    name: str
    fn: Callable[[], Outcome]
    expires: bool = True  # False: a reference row (no expiry, no checks)
    in_process: bool = False  # gets one untimed warm-up run
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    states: list[TableState] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def time_rounds(layout: Layout, n: int, contenders: list[Contender], runs: int,
                spark: SparkSession | None) -> None:
    """``runs`` rounds, every contender once per round on a freshly restored table.

    Interleaving spreads load from other processes over all contenders alike. In-process
    contenders get one untimed run first (class loading, JIT, imports), so "warm" means warm.
    """
    for c in contenders:
        if c.in_process:
            restore(layout, n)
            c.fn()
    for r in range(runs):
        for c in contenders:
            restore(layout, n)
            start = time.perf_counter()
            outcome = c.fn()
            c.seconds.append(time.perf_counter() - start)
            c.cpu.append(outcome.cpu)
            if not c.expires:
                continue
            c.outcomes.append(outcome)
            state = observe(layout.live(n))
            c.states.append(state)
            if r == 0 and spark is not None and spark_view(spark, layout.name(n)) != (state.snapshot_ids,
                                                                                      state.live_files):
                sys.exit(f"FAIL: after {c.name}, Spark and icectl see different snapshots or live files")
        print(f"  round {r + 1}/{runs}: " + ", ".join(f"{c.name} {c.seconds[-1]:.2f}s (CPU {c.cpu[-1]:.2f}s)"
                                                   for c in contenders),
              flush=True)


def verify(n: int, contenders: list[Contender]) -> None:
    """Every expiring run deleted the same files by category and left the same table behind."""
    runs = [(c.name, o, s) for c in contenders if c.expires for o, s in zip(c.outcomes, c.states, strict=True)]
    name0, out0, state0 = runs[0]
    expected = {"data_files": 0, "position_delete_files": 0, "equality_delete_files": 0, "manifest_files": 0,
                "manifest_lists": n - 1, "statistics_files": 0}  # appends only: every manifest stays live
    if out0.deleted != expected:
        sys.exit(f"FAIL: {name0} deleted {out0.deleted}, expected {expected}")
    for name, out, state in runs:
        if out.deleted != out0.deleted:
            sys.exit(f"FAIL: {name} deleted {out.deleted}, {name0} deleted {out0.deleted}")
        if state != state0:
            what = [f for f in ("snapshot_ids", "live_files", "files_on_disk")
                    if getattr(state, f) != getattr(state0, f)]
            extra = sorted(state.files_on_disk ^ state0.files_on_disk)[:3]
            sys.exit(f"FAIL: {name} left a different table than {name0}: {', '.join(what)} {extra}")
    if len(state0.snapshot_ids) != 1 or len(state0.live_files) != n:
        sys.exit(f"FAIL: {len(state0.snapshot_ids)} snapshots and {len(state0.live_files)} live files remain, "
                 f"expected 1 and {n}")
    print(f"  checked {len(runs)} runs: each deleted {_fmt_deleted(out0.deleted)}; each left 1 snapshot, "
          f"{n} live files and the same {len(state0.files_on_disk)} files on disk")


# --------------------------------------------------------------------------- profiling


@dataclass
class StageClock:
    """Wall time per stage of one ``expire_snapshots`` call (main thread, nested stages apart)."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def add(self, stage: str, seconds: float, calls: int = 1) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
        self.calls[stage] = self.calls.get(stage, 0) + calls


@contextmanager
def patched(module: Any, name: str, replacement: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    original = getattr(module, name)
    setattr(module, name, replacement(original))
    try:
        yield original
    finally:
        setattr(module, name, original)


def stage_breakdown(layout: Layout, n: int) -> None:
    """Where the wall time of icectl core goes, by wrapping the functions ``expire_snapshots`` calls.

    Uses icectl internals (names looked up in ``icectl.ops.expire`` at call time): a diagnostic, to be
    updated when they move.
    """
    clock = StageClock()
    lists_read = [0]

    def timed(stage: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            def run(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    clock.add(stage, time.perf_counter() - start)
            return run
        return wrap

    def entries(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(md: Any, fio: Any, manifests: Any, **kwargs: Any) -> Iterator[Any]:
            todo = list(manifests)
            start = time.perf_counter()
            yield from fn(md, fio, todo, **kwargs)
            clock.add("  manifests (entries, in the pool)", time.perf_counter() - start, len(todo))
        return run

    def counted(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            lists_read[0] += 1
            return fn(*args, **kwargs)
        return run

    restore(layout, n)
    start = time.perf_counter()
    table = load_table(str(layout.live(n)))
    clock.add("load_table (metadata JSON)", time.perf_counter() - start)
    wraps = [("apply_retention", timed("apply_retention (policy)")),
             ("files_to_delete", timed("files_to_delete (plan + after commit)")),
             ("reachable_files", timed("  reachable_files")),
             ("iter_entries", entries), ("manifests_of", counted),
             ("commit", timed("commit (write metadata JSON)")),
             ("operations_for", timed("operations_for")),
             ("delete_files", timed("delete_files"))]
    now = int(time.time() * 1000)
    with ExitStack() as stack:
        for name, wrapper in wraps:
            if hasattr(icectl_expire, name):
                stack.enter_context(patched(icectl_expire, name, wrapper))
        t0 = time.perf_counter()
        expire_snapshots(table, ExpirePolicy(older_than_ms=now, retain_last=1), now_ms=now)
        total = time.perf_counter() - t0
    reach = clock.seconds.get("  reachable_files", 0.0)
    ent = clock.seconds.get("  manifests (entries, in the pool)", 0.0)
    clock.add("  manifest lists (reachable_files - entries)", reach - ent, lists_read[0])
    accounted = sum(v for k, v in clock.seconds.items() if not k.startswith(" ") and k != "load_table (metadata JSON)")
    clock.add("other (refresh after commit, JSON, result)", total - accounted)
    print(f"\n## Stage breakdown of icectl core, {n} snapshots: expire_snapshots() {total:.3f}s wall "
          f"(+ load_table {clock.seconds['load_table (metadata JSON)']:.3f}s)\n")
    print("| stage | wall s | calls / items |")
    print("| --- | ---: | ---: |")
    order = ["load_table (metadata JSON)", "apply_retention (policy)", "files_to_delete (plan + after commit)",
             "  reachable_files", "  manifest lists (reachable_files - entries)", "  manifests (entries, in the pool)",
             "commit (write metadata JSON)", "operations_for", "delete_files",
             "other (refresh after commit, JSON, result)"]
    for stage in sorted(clock.seconds, key=lambda k: order.index(k) if k in order else len(order)):
        print(f"| {stage} | {clock.seconds[stage]:.3f} | {clock.calls[stage]} |")


def profile_core(layout: Layout, n: int, top: int, dump: Path | None) -> None:
    """cProfile with per-thread CPU clocks over the main thread and the pool tasks (manifest-list
    reads, manifest reads, deletes): wall clocks would charge GIL waits to whatever ran."""
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is threading.main_thread():
                return fn(*args, **kwargs)
            p = cProfile.Profile(time.thread_time)
            p.enable()
            try:
                return fn(*args, **kwargs)
            finally:
                p.disable()
                with lock:
                    profiles.append(p)
        return run

    restore(layout, n)
    main = cProfile.Profile(time.thread_time)
    now = int(time.time() * 1000)
    with (patched(icectl_expire, "manifests_of", in_thread), patched(icectl_scan, "_read_entries", in_thread),
          patched(icectl_expire.FileIO, "delete", in_thread)):
        main.enable()
        expire_snapshots(load_table(str(layout.live(n))), ExpirePolicy(older_than_ms=now, retain_last=1), now_ms=now)
        main.disable()
    stats = pstats.Stats(main)
    for p in profiles:
        stats.add(p)
    if dump:
        stats.dump_stats(str(dump))
        print(f"  stats written to {dump} (python -m pstats {dump})")
    total = stats.total_tt  # type: ignore[attr-defined]
    for title, key, restriction in (("by own time", "tottime", ()), ("icectl functions, cumulative", "cumulative",
                                                                     (r"icectl",))):
        buf = io.StringIO()
        stats.stream = buf  # type: ignore[attr-defined]
        stats.sort_stats(key).print_stats(*restriction, top)
        text = buf.getvalue()
        body = text[text.find("   ncalls"):] if "   ncalls" in text else text
        print(f"\n## cProfile of icectl core, {n} snapshots: {total:.2f}s CPU (main thread + pool tasks), "
              f"{title}\n{body}")


# --------------------------------------------------------------------------- report


def _fmt_deleted(d: dict[str, int]) -> str:
    return " ".join(f"{SHORT[c]}={d[c]}" for c in CATEGORIES if d[c]) or "nothing"


def report(rows: list[tuple[int, dict[str, Any], list[Contender]]], runs: int) -> None:
    print(f"\n## Figures: expire all but the last snapshot, {runs} runs, Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("ratio = best wall time of the row / best wall time of the icectl CLI (>1: slower than icectl)\n")
    print("| snapshots | contender | best s | median s | CPU s | files deleted | orphan .crc | vs icectl CLI |")
    print("| ---: | --- | ---: | ---: | ---: | --- | ---: | ---: |")
    for n, _info, contenders in rows:
        ref = next(c for c in contenders if c.name == "icectl CLI")
        for c in contenders:
            deleted = _fmt_deleted(c.outcomes[0].deleted) if c.outcomes else "-"
            orphans = str(max(s.orphan_checksums for s in c.states)) if c.states else "-"
            print(f"| {n} | {c.name} | {c.best:.3f} | {c.median:.3f} | {min(c.cpu):.3f} | {deleted} | {orphans} "
                  f"| {c.best / ref.best:.2f} |")
    print()
    for n, info, contenders in rows:
        by = {c.name: c for c in contenders}
        ref = by["icectl CLI"]
        line = f"{n} snapshots ({info['files']} files, {info['bytes'] / 1e6:.1f} MB, built by {info['builder']} " \
               f"in {info['build_s']:.1f}s):"
        if "Spark CLI" in by:
            s = by["Spark CLI"]
            inner = {k: statistics.median(o.inner[k] for o in s.outcomes) for k in ("startup_s", "call_s", "stop_s")}
            line += (f" icectl CLI is {s.best / ref.best:.1f}x faster than Spark from the command line "
                     f"(median {s.median / ref.median:.1f}x; the Spark job's median start-up "
                     f"{inner['startup_s']:.1f}s, CALL {inner['call_s']:.1f}s, stop {inner['stop_s']:.1f}s)")
        if "Spark CALL (warm)" in by:
            w = by["Spark CALL (warm)"]
            line += f"; warm Spark CALL / icectl core = {w.best / by['icectl core'].best:.2f}"
        print(line)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--snapshots", type=int, nargs="+", default=[200, 2000], help="table sizes (default 200 2000)")
    ap.add_argument("--runs", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--builder", choices=("icectl", "spark"), default="icectl",
                    help="who writes the tables: icectl's writers, one commit (default, fast) or Spark's Java "
                         "API, one fast append per snapshot (Java's files, .crc side files)")
    ap.add_argument("--dir", type=Path, help="work here and keep it (default: a temp dir, removed)")
    ap.add_argument("--reuse", action="store_true", help="reuse the pristine tables already in --dir")
    ap.add_argument("--no-spark", action="store_true", help="icectl only (no Java needed with --builder icectl)")
    ap.add_argument("--no-spark-cli", action="store_true", help="skip the Spark command-line runs")
    ap.add_argument("--profile", action="store_true", help="then break down and cProfile icectl core on the largest")
    ap.add_argument("--profile-top", type=int, default=25)
    ap.add_argument("--profile-dump", type=Path, help="write the pstats here")
    args = ap.parse_args(argv)
    if args.reuse and not args.dir:
        ap.error("--reuse needs --dir")
    if args.builder == "spark" and args.no_spark:
        ap.error("--builder spark needs Spark")

    root = args.dir or Path(tempfile.mkdtemp(prefix="icectl-bench-expire-"))
    root.mkdir(parents=True, exist_ok=True)
    layout = Layout(root.resolve(), args.builder)
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
        for n in args.snapshots:
            print(f"\n# {n} snapshots", flush=True)
            info = ensure_table(layout, n, args.reuse, spark)
            live, name = layout.live(n), layout.name(n)
            restore(layout, n)
            md = load_table(str(live)).metadata
            if len(md.snapshots) != n:
                sys.exit(f"FAIL: {live} has {len(md.snapshots)} snapshots, expected {n}")
            warm = None if args.no_spark else spark()
            if warm is not None:
                count = warm.sql(f"SELECT count(*) FROM local.db.{name}.snapshots").collect()[0][0]
                if count != n:
                    sys.exit(f"FAIL: Spark sees {count} snapshots in {name}, expected {n}")
            contenders = [Contender("icectl CLI", lambda live=live: icectl_cli(live)),
                          Contender("icectl CLI start-up (inspect table)", lambda live=live: icectl_cli_startup(live),
                                    expires=False),
                          Contender("icectl core", lambda live=live: icectl_core(live), in_process=True)]
            if warm is not None:
                if not args.no_spark_cli:
                    contenders.append(Contender("Spark CLI", lambda name=name: spark_cli(layout.warehouse, name)))
                contenders.append(Contender("Spark CALL (warm)", lambda name=name, s=warm: spark_call(s, name),
                                              in_process=True))
            print(f"  timing ({args.runs} rounds, contenders interleaved, each on a fresh copy)", flush=True)
            time_rounds(layout, n, contenders, args.runs, warm)
            verify(n, contenders)
            rows.append((n, info, contenders))
        report(rows, args.runs)
        if args.profile:
            n = max(args.snapshots)
            stage_breakdown(layout, n)
            profile_core(layout, n, args.profile_top, args.profile_dump)
    finally:
        for s in session:
            s.stop()
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
