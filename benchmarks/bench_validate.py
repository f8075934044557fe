"""Benchmark `icectl validate` on a synthetic table of many snapshots and files.

One run: build (or reuse) a format-v2 file-system table written with icectl's own writers:
N append snapshots, each adding one manifest of F data files (N x F files in all), partitioned by
``bucket(16, id)`` and ``identity(category)``, with Spark-like column bounds; each snapshot's
manifest list names its own manifest and every earlier one (a fast append without merging). Then
time `validate` on the current snapshot (reads every manifest) and with `--all-snapshots` (also
every manifest list; each manifest still read once), in-process and through the CLI, and print
wall/CPU time, entries per second and the time per manifest entry. Data files do not exist, so
`--deep` is not timed (it would only measure the file system).

    python benchmarks/bench_validate.py                               # 2000 snapshots x 100 files
    python benchmarks/bench_validate.py --snapshots 200 --files 100 --runs 3
    python benchmarks/bench_validate.py --dir /tmp/bv --keep            # build once, keep the table
    python benchmarks/bench_validate.py --dir /tmp/bv --reuse

No Spark contender: Spark has no procedure that checks a table against the spec.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO))

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
from icectl.spec.updates import TableChange, TableUpdate, apply_updates, snapshot_updates  # noqa: E402
from icectl.storage import FileIO  # noqa: E402
from icectl.table import load_table  # noqa: E402
from icectl.table.commit import commit, new_snapshot_id  # noqa: E402
from icectl.table.summary import SummaryBuilder  # noqa: E402
from icectl.validate import validate_table  # noqa: E402

SCHEMA_DDL = "id long, category string, price double, payload string"
CATEGORIES = ("red", "green", "blue", "amber")


def build(table_dir: Path, snapshots: int, files: int) -> None:
    config, fio = parse_config({}), FileIO()
    create(str(table_dir), SchemaSource(ddl=SCHEMA_DDL), config=config, io=fio,
           partition_by="bucket(16, id), category", properties={"format-version": "2"})
    table = load_table(str(table_dir), config, fio)
    md = table.metadata
    schema, spec = md.schema(), md.spec()
    ptype = spec.partition_type(schema, md.schemas)
    bucket = BucketTransform(16)
    metadata_dir = table_dir / "metadata"
    parent: Snapshot | None = None
    parent_manifests: list[ManifestFile] = []
    timestamp_ms = md.last_updated_ms
    next_id = 0
    t0 = time.perf_counter()
    updates: list[TableUpdate] = []
    for n in range(snapshots):
        snapshot_id = new_snapshot_id(md)
        seq = md.last_sequence_number + 1
        entries = []
        summary = SummaryBuilder()
        for j in range(files):
            lo, hi = next_id, next_id + (0 if j % 4 == 0 else 99)  # every 4th file: one id, exact bounds
            next_id += 100
            category = CATEGORIES[j % len(CATEGORIES)]
            cat_bytes = category.encode()
            df = DataFile(
                content=DataFileContent.DATA,
                file_path=str(table_dir / "data" / f"{n:05d}-{j:04d}-{uuid.uuid4()}.parquet"),
                file_format="PARQUET", partition=(bucket.apply(lo, LONG), category), record_count=hi - lo + 1,
                file_size_in_bytes=4096 + j, column_sizes={1: 800, 2: 300, 3: 800, 4: 2000},
                value_counts={1: hi - lo + 1, 2: hi - lo + 1, 3: hi - lo + 1, 4: hi - lo + 1},
                null_value_counts={1: 0, 2: 0, 3: 0, 4: 0}, nan_value_counts={3: 0},
                lower_bounds={1: struct.pack("<q", lo), 2: cat_bytes, 3: struct.pack("<d", lo * 1.5),
                              4: f"row {lo}".encode()},
                upper_bounds={1: struct.pack("<q", hi), 2: cat_bytes, 3: struct.pack("<d", hi * 1.5),
                              4: f"row {hi}".encode()},
                split_offsets=(4,), sort_order_id=0)
            entries.append(ManifestEntry(ManifestEntryStatus.ADDED, snapshot_id, None, None, df))
            summary.added_file(df, df.partition)
        written = write_manifest(entries, schema=schema, spec=spec, partition_type=ptype,
                                 format_version=md.format_version, content=ManifestContent.DATA,
                                 snapshot_id=snapshot_id)
        commit_id = uuid.uuid4()
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
        snap = Snapshot(snapshot_id=snapshot_id, timestamp_ms=timestamp_ms,
                        parent_snapshot_id=parent.snapshot_id if parent else None, sequence_number=seq,
                        manifest_list=list_path, summary=summary.build("append", parent.summary if parent else None),
                        schema_id=md.current_schema_id)
        ups = snapshot_updates(md, snap)
        md = apply_updates(md, ups)
        updates.extend(ups)
        parent, parent_manifests = snap, listed.manifests
        if (n + 1) % 200 == 0:
            print(f"  built {n + 1} snapshots ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)

    def publish(base: TableMetadata) -> TableChange:
        if base.snapshots:
            raise RuntimeError(f"{table_dir} changed while it was being built")
        return TableChange((), tuple(updates))

    commit(table, publish)


def timed(fn: object, runs: int) -> tuple[list[float], list[float], object]:
    walls, cpus, out = [], [], None
    for _ in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        out = fn()  # type: ignore[operator]
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return walls, cpus, out


def cli_run(table_dir: Path, *extra: str) -> tuple[float, int]:
    w0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "icectl", "validate", str(table_dir), "--json", *extra],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO)
    return time.perf_counter() - w0, proc.returncode


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--snapshots", type=int, default=2000)
    ap.add_argument("--files", type=int, default=100, help="data files per snapshot (one manifest each)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", type=Path, help="build here (and keep it with --keep)")
    ap.add_argument("--reuse", action="store_true", help="time the table already in --dir")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-validate-"))
    table_dir = root / "t"
    try:
        if not args.reuse:
            if table_dir.exists():
                shutil.rmtree(table_dir)
            t0 = time.perf_counter()
            build(table_dir, args.snapshots, args.files)
            print(f"built {args.snapshots} snapshots x {args.files} files in {time.perf_counter() - t0:.1f}s",
                  file=sys.stderr)
        rows = []
        for label, kw, extra in (("current snapshot", {}, ()),
                                 ("--all-snapshots", {"all_snapshots": True}, ("--all-snapshots",))):
            walls, cpus, result = timed(lambda kw=kw: validate_table(load_table(str(table_dir)), **kw), args.runs)
            assert result.errors == 0, result.findings[:3]  # type: ignore[attr-defined]
            entries = result.entries  # type: ignore[attr-defined]
            cli_wall, code = cli_run(table_dir, *extra)
            assert code == 0, code
            best = min(walls)
            rows.append((label, result.snapshots, result.manifests, entries, best, statistics.median(walls),  # type: ignore[attr-defined]
                         min(cpus), cli_wall, entries / best, best / entries * 1e6))
        print(f"\n`icectl validate`, {args.snapshots} snapshots x {args.files} files, best of {args.runs}\n")
        print("| run | snapshots | manifests | entries | core best s | core median s | core CPU s | CLI s "
              "| entries/s | µs per entry |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.2f} | {r[7]:.2f} "
                  f"| {r[8]:,.0f} | {r[9]:.1f} |")
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
