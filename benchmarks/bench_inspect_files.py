"""Benchmark `icectl inspect files` against PyIceberg's `inspect.files()` on one synthetic table.

One run: build a v2 file-system table with many wide manifests (or reuse one), check that icectl
and PyIceberg see the same files, time both several times, print a table of figures.

    python benchmarks/bench_inspect_files.py                       # 200 manifests x 1000 entries
    python benchmarks/bench_inspect_files.py --manifests 20 --entries-per-manifest 500 --runs 3
    python benchmarks/bench_inspect_files.py --dir /tmp/bt --keep   # build once, keep the table
    python benchmarks/bench_inspect_files.py --dir /tmp/bt --reuse --profile

Needs PyIceberg (the `bench` extra: ``pip install -e ".[bench]"``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import fastavro

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

from icectl.ops.inspect import views as icectl_inspect  # noqa: E402
from icectl.table import load_table  # noqa: E402
from icectl.table import scan as icectl_scan  # noqa: E402

try:
    from pyiceberg.conversions import to_bytes
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import (
        UNASSIGNED_SEQ,
        ManifestContent,
        ManifestFile,
        PartitionFieldSummary,
        data_file_with_partition,
        manifest_entry_schema_with_data_file,
        write_manifest_list,
    )
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import StaticTable
    from pyiceberg.table.metadata import TableMetadataV2
    from pyiceberg.table.refs import SnapshotRef, SnapshotRefType
    from pyiceberg.table.snapshots import Operation, Snapshot, Summary
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
    from pyiceberg.transforms import DayTransform, IdentityTransform
    from pyiceberg.types import (
        DateType,
        DoubleType,
        IntegerType,
        LongType,
        NestedField,
        StringType,
        TimestamptzType,
    )
    from pyiceberg.utils.schema_conversion import AvroSchemaConversion
except ImportError as exc:  # pragma: no cover - a setup problem, not a benchmark result
    sys.exit(f"this benchmark needs PyIceberg: pip install -e '.[bench]' ({exc})")

# --------------------------------------------------------------------------- the synthetic table

SNAPSHOT_ID = 3_051_729_675_574_597_004
SEQUENCE_NUMBER = 1
BASE_DAY = date(2024, 1, 1)
CATEGORIES = [f"cat-{n:02d}" for n in range(16)]  # identity partition values
MICROS_PER_DAY = 86_400_000_000
TRUNCATE = 16  # Iceberg's default metrics mode truncate(16) for string bounds

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "ts", TimestamptzType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
    NestedField(5, "customer", StringType(), required=False),
    NestedField(6, "quantity", IntegerType(), required=False),
    schema_id=0,
)
SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category"),
    PartitionField(source_id=3, field_id=1001, transform=DayTransform(), name="ts_day"),
    spec_id=0,
)
COLUMN_IDS = (1, 2, 3, 4, 5, 6)


@dataclass
class BuiltManifest:
    """What the manifest list needs to know about one written manifest."""

    path: str
    length: int
    entries: int
    rows: int
    bytes: int
    categories: tuple[str, str]  # min, max
    days: tuple[int, int]


@dataclass
class TableInfo:
    dir: Path
    metadata_path: Path
    manifests: int
    entries: int
    manifest_bytes: int


def manifest_avro_schema() -> dict[str, Any]:
    """PyIceberg's own v2 manifest_entry Avro schema for SPEC (field ids, names r102/k117_v118...)."""
    partition_type = SPEC.partition_type(SCHEMA)
    data_file = data_file_with_partition(partition_type, format_version=2)
    entry = manifest_entry_schema_with_data_file(format_version=2, data_file=data_file)
    return AvroSchemaConversion().iceberg_to_avro(entry, schema_name="manifest_entry")  # type: ignore[return-value]


def manifest_key_metadata() -> dict[str, str]:
    # The keys Java and PyIceberg put in every manifest's Avro header.
    return {
        "schema": SCHEMA.model_dump_json(),
        "partition-spec": json.dumps(json.loads(SPEC.model_dump_json())["fields"]),
        "partition-spec-id": str(SPEC.spec_id),
        "format-version": "2",
        "content": "data",
    }


def _bound_string(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(6, TRUNCATE)))


def _kv(pairs: dict[int, Any]) -> list[dict[str, Any]]:
    # Int-keyed maps are Avro arrays of key/value records.
    return [{"key": k, "value": v} for k, v in pairs.items()]


def _entries(index: int, count: int, location: str, seed: int) -> Iterator[dict[str, Any]]:
    """Entries of manifest ``index``: one day's append over every category, Spark-like stats."""
    rng = random.Random(seed * 1_000_003 + index)
    day = (BASE_DAY - date(1970, 1, 1)).days + index
    day_text = (BASE_DAY + timedelta(days=index)).isoformat()
    job = uuid.UUID(int=rng.getrandbits(128), version=4)
    for j in range(count):
        cat = CATEGORIES[j % len(CATEGORIES)]
        rows = rng.randint(50_000, 2_000_000)
        size = rows * rng.randint(28, 44)
        first_id = (index * count + j) * 2_000_000
        ts_lo = day * MICROS_PER_DAY + rng.randrange(MICROS_PER_DAY // 2)
        ts_hi = ts_lo + rng.randrange(MICROS_PER_DAY // 2)
        amount_lo = rng.uniform(0, 100)
        customers = sorted((_bound_string(rng), _bound_string(rng)))
        nulls = {1: 0, 2: 0, 3: rng.randint(0, 50), 4: rng.randint(0, 500), 5: rng.randint(0, 500), 6: 0}
        yield {
            "status": 1,  # ADDED
            "snapshot_id": SNAPSHOT_ID,
            "sequence_number": None,  # inherited from the manifest list, as Spark writes new entries
            "file_sequence_number": None,
            "data_file": {
                "content": 0,
                "file_path": f"{location}/data/category={cat}/ts_day={day_text}/"
                             f"{j:05d}-{index}-{job}-0-{j:05d}.parquet",
                "file_format": "PARQUET",
                "partition": {"category": cat, "ts_day": day},
                "record_count": rows,
                "file_size_in_bytes": size,
                "column_sizes": _kv({1: rows * 3, 2: rows // 200, 3: rows * 4, 4: rows * 8,
                                     5: rows * 6, 6: rows * 2}),
                "value_counts": _kv(dict.fromkeys(COLUMN_IDS, rows)),
                "null_value_counts": _kv(nulls),
                "nan_value_counts": _kv({4: 0}),
                "lower_bounds": _kv({1: struct.pack("<q", first_id), 2: cat.encode(),
                                     3: struct.pack("<q", ts_lo), 4: struct.pack("<d", amount_lo),
                                     5: customers[0].encode(), 6: struct.pack("<i", 1)}),
                "upper_bounds": _kv({1: struct.pack("<q", first_id + rows - 1), 2: cat.encode(),
                                     3: struct.pack("<q", ts_hi),
                                     4: struct.pack("<d", amount_lo + rng.uniform(100, 10_000)),
                                     5: customers[1].encode(), 6: struct.pack("<i", rng.randint(2, 999))}),
                "key_metadata": None,
                "split_offsets": list(range(4, size, 128 * 1024 * 1024))[:8],
                "equality_ids": None,
                "sort_order_id": 0,
            },
        }


def write_one_manifest(index: int, count: int, location: str, path: str, avro_schema: dict[str, Any],
                       meta: dict[str, str], seed: int) -> BuiltManifest:
    """Write one manifest with fastavro (C encoder), deflate, 64 KB blocks like Java's Avro writer.

    PyIceberg's ManifestWriter would also do, but it writes one Avro block per entry, which is
    neither what Spark writes nor fast to read; its schema is used as is.
    """
    parsed = fastavro.parse_schema(avro_schema)
    stats = {"rows": 0, "bytes": 0}

    def counted() -> Iterator[dict[str, Any]]:
        for e in _entries(index, count, location, seed):
            stats["rows"] += e["data_file"]["record_count"]
            stats["bytes"] += e["data_file"]["file_size_in_bytes"]
            yield e

    with open(path, "wb") as out:
        fastavro.writer(out, parsed, counted(), codec="deflate", metadata=meta, sync_interval=64_000)
    cats = sorted(CATEGORIES[: min(count, len(CATEGORIES))])
    day = (BASE_DAY - date(1970, 1, 1)).days + index
    return BuiltManifest(path, os.path.getsize(path), count, stats["rows"], stats["bytes"],
                         (cats[0], cats[-1]), (day, day))


def build_table(table_dir: Path, manifests: int, per_manifest: int, seed: int) -> TableInfo:
    """A Hadoop-layout v2 table: metadata/v1.metadata.json, version-hint.text, one snapshot."""
    meta_dir, data_dir = table_dir / "metadata", table_dir / "data"
    meta_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(exist_ok=True)  # no Parquet files: inspect reads metadata only
    location = table_dir.resolve().as_uri()  # file:///..., as Spark's Hadoop catalog records it
    avro_schema, meta = manifest_avro_schema(), manifest_key_metadata()
    paths = [meta_dir / f"{uuid.UUID(int=random.Random(seed + i).getrandbits(128), version=4)}-m{i}.avro"
             for i in range(manifests)]
    # Manifests are independent: spread them over processes (encoding is CPU-bound).
    workers = max(1, min(os.cpu_count() or 1, 8, manifests))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(write_one_manifest, i, per_manifest, location, str(p), avro_schema, meta, seed)
                   for i, p in enumerate(paths)]
        built = [f.result() for f in futures]

    files = []
    for m in built:
        files.append(ManifestFile.from_args(
            manifest_path=Path(m.path).resolve().as_uri(), manifest_length=m.length,
            partition_spec_id=SPEC.spec_id, content=ManifestContent.DATA,
            sequence_number=UNASSIGNED_SEQ, min_sequence_number=UNASSIGNED_SEQ,  # the list assigns them
            added_snapshot_id=SNAPSHOT_ID, added_files_count=m.entries, existing_files_count=0,
            deleted_files_count=0, added_rows_count=m.rows, existing_rows_count=0, deleted_rows_count=0,
            partitions=[
                PartitionFieldSummary.from_args(
                    contains_null=False, contains_nan=None,
                    lower_bound=to_bytes(StringType(), m.categories[0]),
                    upper_bound=to_bytes(StringType(), m.categories[1])),
                PartitionFieldSummary.from_args(
                    contains_null=False, contains_nan=None,
                    lower_bound=to_bytes(DateType(), m.days[0]), upper_bound=to_bytes(DateType(), m.days[1])),
            ],
            key_metadata=None,
        ))
    list_path = meta_dir / f"snap-{SNAPSHOT_ID}-1-{uuid.UUID(int=seed, version=4)}.avro"
    with write_manifest_list(format_version=2, output_file=PyArrowFileIO().new_output(str(list_path)),
                             snapshot_id=SNAPSHOT_ID, parent_snapshot_id=None,
                             sequence_number=SEQUENCE_NUMBER, avro_compression="deflate") as writer:
        writer.add_manifests(files)

    entries = sum(m.entries for m in built)
    rows = sum(m.rows for m in built)
    size = sum(m.bytes for m in built)
    now_ms = int(time.time() * 1000)
    summary = Summary(Operation.APPEND, **{
        "added-data-files": str(entries), "added-records": str(rows), "added-files-size": str(size),
        "changed-partition-count": str(min(per_manifest, len(CATEGORIES)) * manifests),
        "total-data-files": str(entries), "total-records": str(rows), "total-files-size": str(size),
        "total-delete-files": "0", "total-position-deletes": "0", "total-equality-deletes": "0",
    })
    snapshot = Snapshot(snapshot_id=SNAPSHOT_ID, parent_snapshot_id=None, sequence_number=SEQUENCE_NUMBER,
                        timestamp_ms=now_ms, manifest_list=list_path.resolve().as_uri(), summary=summary,
                        schema_id=SCHEMA.schema_id)
    metadata = TableMetadataV2(
        location=location, table_uuid=uuid.UUID(int=seed + 1, version=4), last_updated_ms=now_ms,
        last_column_id=max(COLUMN_IDS), schemas=[SCHEMA], current_schema_id=SCHEMA.schema_id,
        partition_specs=[SPEC], default_spec_id=SPEC.spec_id, last_partition_id=1001,
        properties={"write.format.default": "parquet"}, current_snapshot_id=SNAPSHOT_ID,
        snapshots=[snapshot], snapshot_log=[{"snapshot-id": SNAPSHOT_ID, "timestamp-ms": now_ms}],
        metadata_log=[], sort_orders=[UNSORTED_SORT_ORDER], default_sort_order_id=0,
        refs={"main": SnapshotRef(snapshot_id=SNAPSHOT_ID, snapshot_ref_type=SnapshotRefType.BRANCH)},
        last_sequence_number=SEQUENCE_NUMBER,
    )
    metadata_path = meta_dir / "v1.metadata.json"
    metadata_path.write_text(metadata.model_dump_json())
    (meta_dir / "version-hint.text").write_text("1")
    return TableInfo(table_dir, metadata_path, manifests, entries, sum(m.length for m in built))


def existing_table(table_dir: Path) -> TableInfo:
    """Reuse a table built by an earlier run (--reuse): count what it has."""
    t = load_table(str(table_dir))
    snap = t.metadata.current_snapshot()
    if snap is None:
        sys.exit(f"{table_dir}: the table has no current snapshot")
    manifests = icectl_scan.manifests_of(t.metadata, snap, t.io)
    entries = sum((m.added_files_count or 0) + (m.existing_files_count or 0) for m in manifests)
    return TableInfo(table_dir, Path(t.metadata_location.removeprefix("file://")), len(manifests), entries,
                     sum(m.manifest_length for m in manifests))


# --------------------------------------------------------------------------- the contenders


def icectl_core(table_dir: Path, metrics: bool = False) -> int:
    """Library path: load, then consume file_rows().rows (no rendering)."""
    table = load_table(str(table_dir))
    n = 0
    for _row in icectl_inspect.file_rows(table, metrics=metrics).rows:
        n += 1
    return n


def icectl_cli(table_dir: Path, *extra: str) -> int:
    """End to end, as a user runs it: a fresh interpreter, JSON to /dev/null."""
    cmd = [sys.executable, "-m", "icectl", "inspect", "files", str(table_dir), "--json", *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO, env=_cli_env())
    return -1  # not counted here: verify() checks the CLI's row count once


def icectl_cli_startup(table_dir: Path) -> int:
    """Interpreter + imports + table load, no manifests: the fixed cost inside every CLI run."""
    cmd = [sys.executable, "-m", "icectl", "inspect", "table", str(table_dir), "--json"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=REPO, env=_cli_env())
    return -1


def _cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def pyiceberg_files(metadata_path: Path) -> int:
    return StaticTable.from_metadata(str(metadata_path)).inspect.files().num_rows


def pyiceberg_data_files(metadata_path: Path) -> int:
    return StaticTable.from_metadata(str(metadata_path)).inspect.data_files().num_rows


def fastavro_floor(table_dir: Path) -> int:
    """The floor for a fastavro-based reader: decode every manifest record, nothing else, 1 thread."""
    table = load_table(str(table_dir))
    snap = table.metadata.current_snapshot()
    assert snap is not None
    n = 0
    for m in icectl_scan.manifests_of(table.metadata, snap, table.io):
        for _rec in fastavro.reader(io.BytesIO(table.io.read(m.manifest_path))):
            n += 1
    return n


# --------------------------------------------------------------------------- timing


@dataclass
class Timing:
    name: str
    fn: Callable[[], int]
    fixed_cost: bool = False  # reads no manifests: no rate or ratio
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # user+system, this process and its children

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def _cpu_now() -> float:
    t = os.times()  # children: the CLI subprocesses, once waited for
    return t.user + t.system + t.children_user + t.children_system


def time_round_robin(timings: list[Timing], runs: int, warmup: bool) -> None:
    """Run every contender once per round, ``runs`` rounds.

    Interleaving spreads load from other processes over all contenders alike; CPU time is
    reported too because, unlike wall time, it barely moves when the machine is busy.
    """
    if warmup:
        for t in timings:
            t.fn()
    for r in range(runs):
        for t in timings:
            cpu, start = _cpu_now(), time.perf_counter()
            t.fn()
            t.seconds.append(time.perf_counter() - start)
            t.cpu.append(_cpu_now() - cpu)
        print(f"  round {r + 1}/{runs} done", flush=True)
    for t in timings:
        print(f"  {t.name:<46} best {t.best:7.3f}s  median {t.median:7.3f}s  CPU {min(t.cpu):7.3f}s")


# --------------------------------------------------------------------------- checks


def verify(info: TableInfo) -> None:
    """Both readers see the same files (count, rows, paths, partitions), and so does the CLI."""
    table = load_table(str(info.dir))
    ours = {r["file_path"]: (r["record_count"], r["partition"]["category"], str(r["partition"]["ts_day"]))
            for r in icectl_inspect.file_rows(table).rows}
    arrow = StaticTable.from_metadata(str(info.metadata_path)).inspect.files()
    theirs = {p: (rc, part["category"], str(part["ts_day"])) for p, rc, part in zip(
        arrow.column("file_path").to_pylist(), arrow.column("record_count").to_pylist(),
        arrow.column("partition").to_pylist(), strict=True)}
    proc = subprocess.run([sys.executable, "-m", "icectl", "inspect", "files", str(info.dir), "--json"],
                          check=True, capture_output=True, cwd=REPO, env=_cli_env())
    cli_rows = len(json.loads(proc.stdout)["rows"])
    counts = {"expected": info.entries, "icectl": len(ours), "pyiceberg": arrow.num_rows,
              "icectl CLI": cli_rows}
    print("  entries: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    if len(set(counts.values())) != 1:
        sys.exit("FAIL: entry counts differ")
    if ours != theirs:
        diff = next(k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k))
        sys.exit(f"FAIL: icectl and PyIceberg disagree on {diff}: {ours.get(diff)} vs {theirs.get(diff)}")
    print("  icectl and PyIceberg agree on every file path, record_count and partition")


# --------------------------------------------------------------------------- profiling


@contextmanager
def profiled_threads(out: list[cProfile.Profile]) -> Iterator[None]:
    """cProfile sees one thread; icectl decodes manifests in a pool. Profile each pool task too.

    Timers are per-thread CPU clocks: with wall clocks, time a thread spends waiting for the
    GIL would be charged to whatever function it was in.
    """
    original = icectl_scan._read_entries

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        p = cProfile.Profile(time.thread_time)
        p.enable()
        try:
            return original(*args, **kwargs)
        finally:
            p.disable()
            with lock:
                out.append(p)

    lock = threading.Lock()
    icectl_scan._read_entries = wrapped  # iter_entries looks it up per call
    try:
        yield
    finally:
        icectl_scan._read_entries = original


def profile_icectl(table_dir: Path, metrics: bool, top: int, dump: Path | None) -> None:
    main = cProfile.Profile(time.thread_time)
    workers: list[cProfile.Profile] = []
    with profiled_threads(workers):
        main.enable()
        icectl_core(table_dir, metrics=metrics)
        main.disable()
    stats = pstats.Stats(main)
    for p in workers:
        stats.add(p)
    if dump:
        stats.dump_stats(str(dump))
        print(f"  stats written to {dump} (python -m pstats {dump})")
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats("tottime").print_stats(top)
    total = stats.total_tt  # type: ignore[attr-defined]
    print(f"\n## cProfile of icectl core (metrics={metrics}): {total:.2f}s CPU over the main thread and "
          "pool tasks, by own time")
    print(buf.getvalue().split("\n", 3)[-1] if buf.getvalue().count("\n") > 3 else buf.getvalue())
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(r"icectl", top)
    print(f"## ... icectl functions by cumulative CPU time\n{buf.getvalue()}")


# --------------------------------------------------------------------------- stage breakdown


def breakdown(table_dir: Path, sample: int) -> None:
    """Per-entry CPU cost of each stage of `files`, one thread, no profiler, bytes already in memory.

    Uses icectl internals (``_file_row``, ``_PartitionMapper``, ``_wanted_fields``): this is a
    diagnostic, to be updated when they move.
    """
    from icectl.codec import manifest_reader as avro_manifests

    table = load_table(str(table_dir))
    md = table.metadata
    snap = md.current_snapshot()
    assert snap is not None
    manifests = icectl_scan.manifests_of(md, snap, table.io)[:sample]
    blobs = [table.io.read(m.manifest_path) for m in manifests]
    ptypes = {m.partition_spec_id: md.partition_type(m.partition_spec_id) for m in manifests}
    n = sum(1 for b in blobs for _ in fastavro.reader(io.BytesIO(b)))

    def wanted(metrics: bool) -> set[str]:
        return set(icectl_inspect._wanted_fields(metrics)) | set(avro_manifests.ALWAYS_READ_DATA_FILE_FIELDS)

    def fastavro_only() -> Callable[[], None]:
        def run() -> None:
            for b in blobs:
                for _rec in fastavro.reader(io.BytesIO(b)):
                    pass
        return run

    def icectl_read(metrics: bool, rows: bool) -> Callable[[], None]:
        def run() -> None:
            mapper = icectl_inspect._PartitionMapper(md)
            for m, b in zip(manifests, blobs, strict=True):
                for e in avro_manifests.read_manifest(b, manifest=m, partition_type=ptypes[m.partition_spec_id],
                                                      format_version=md.format_version, fields=wanted(metrics)):
                    if rows:
                        icectl_inspect._file_row(md, mapper, m, e.data_file, metrics)
        return run

    stages = [
        ("fastavro decode, no reader schema (all fields)", fastavro_only()),
        ("icectl read_manifest(), default fields", icectl_read(False, False)),
        ("icectl read_manifest() + _file_row(), default", icectl_read(False, True)),
        ("icectl read_manifest(), --metrics fields", icectl_read(True, False)),
        ("icectl read_manifest() + _file_row(), --metrics", icectl_read(True, True)),
    ]
    print(f"\n## Stage breakdown: {n:,} entries of {len(manifests)} manifests, 1 thread, "
          "best of 3, CPU microseconds per entry\n")
    print("| stage | us/entry |")
    print("| --- | ---: |")
    for name, run in stages:
        best = float("inf")
        for _ in range(3):
            start = time.thread_time()
            run()
            best = min(best, time.thread_time() - start)
        print(f"| {name} | {best / n * 1e6:.1f} |", flush=True)


# --------------------------------------------------------------------------- report


def report(info: TableInfo, timings: list[Timing], reference: str) -> None:
    ref = next(t for t in timings if t.name == reference)
    print(f"\n## Figures: {info.entries:,} entries in {info.manifests} manifests "
          f"({info.manifest_bytes / 1e6:.1f} MB of Avro), {len(ref.seconds)} runs, Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"speed-up = best wall time of {reference} / best wall time of the row (>1: faster)\n")
    print("| contender | entries | manifests | best s | median s | CPU s | entries/s | speed-up |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t in timings:
        rate = "-" if t.fixed_cost else f"{info.entries / t.best:,.0f}"
        speed = "-" if t.fixed_cost else f"{ref.best / t.best:.2f}x"
        print(f"| {t.name} | {info.entries:,} | {info.manifests} | {t.best:.3f} | {t.median:.3f} "
              f"| {min(t.cpu):.3f} | {rate} | {speed} |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--manifests", type=int, default=200)
    ap.add_argument("--entries-per-manifest", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3, help="timed rounds (default 3)")
    ap.add_argument("--dir", type=Path, help="build the table here (default: a temp dir, removed)")
    ap.add_argument("--reuse", action="store_true", help="use the table already in --dir as is")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-cli", action="store_true", help="skip the subprocess runs")
    ap.add_argument("--warmup", action="store_true",
                    help="one untimed round first (the check already reads every file once)")
    ap.add_argument("--profile", action="store_true", help="then cProfile icectl core, both ways")
    ap.add_argument("--profile-top", type=int, default=25)
    ap.add_argument("--breakdown", action="store_true",
                    help="then time each stage of `files` per entry (1 thread, icectl internals)")
    ap.add_argument("--breakdown-manifests", type=int, default=20, help="manifests sampled (default 20)")
    ap.add_argument("--profile-dump", type=Path, help="write the default-view pstats here")
    args = ap.parse_args(argv)
    if args.reuse and not args.dir:
        ap.error("--reuse needs --dir")

    if args.dir and not args.reuse and args.dir.exists() and any(args.dir.iterdir()):
        ap.error(f"{args.dir} is not empty: pass --reuse to benchmark the table in it, or an empty dir")
    table_dir = args.dir or Path(tempfile.mkdtemp(prefix="icectl-bench-"))
    try:
        if args.reuse:
            info = existing_table(table_dir)
            print(f"reusing {table_dir}: {info.manifests} manifests, {info.entries:,} entries")
        else:
            print(f"building {args.manifests} manifests x {args.entries_per_manifest} entries in {table_dir}",
                  flush=True)
            start = time.perf_counter()
            info = build_table(table_dir, args.manifests, args.entries_per_manifest, args.seed)
            print(f"  built in {time.perf_counter() - start:.1f}s: {info.entries:,} entries, "
                  f"{info.manifest_bytes / 1e6:.1f} MB of manifests")
            if args.dir:
                print(f"  reuse it with: --dir {table_dir} --reuse")

        print("verifying", flush=True)
        verify(info)

        print(f"timing ({args.runs} rounds, contenders interleaved)", flush=True)
        d, md = info.dir, info.metadata_path
        timings = [
            Timing("icectl core file_rows()", lambda: icectl_core(d)),
            Timing("icectl core file_rows(metrics=True)", lambda: icectl_core(d, True)),
        ]
        if not args.no_cli:
            timings += [
                Timing("icectl CLI inspect files --json", lambda: icectl_cli(d)),
                Timing("icectl CLI inspect files --json --metrics", lambda: icectl_cli(d, "--metrics")),
                Timing("icectl CLI start-up (inspect table)", lambda: icectl_cli_startup(d), fixed_cost=True),
            ]
        timings.append(Timing("PyIceberg inspect.files()", lambda: pyiceberg_files(md)))
        if hasattr(StaticTable.from_metadata(str(md)).inspect, "data_files"):
            timings.append(Timing("PyIceberg inspect.data_files()", lambda: pyiceberg_data_files(md)))
        timings += [
            Timing("reference: fastavro decode, all fields", lambda: fastavro_floor(d)),
        ]
        time_round_robin(timings, args.runs, args.warmup)

        core, core_m = timings[0], timings[1]
        print(f"\nprojection: file_rows() is {core_m.best / core.best:.2f}x faster than "
              f"file_rows(metrics=True) ({core.best:.3f}s vs {core_m.best:.3f}s)")
        report(info, timings, "PyIceberg inspect.files()")

        if args.breakdown:
            breakdown(d, args.breakdown_manifests)
        if args.profile:
            profile_icectl(d, False, args.profile_top, args.profile_dump)
            profile_icectl(d, True, args.profile_top, None)
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(table_dir, ignore_errors=True)
        elif not args.dir:
            print(f"kept {table_dir}")


if __name__ == "__main__":
    main()
