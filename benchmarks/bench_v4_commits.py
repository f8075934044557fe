"""v3 vs v4 on one table: files and bytes written, and time, to append one file and remove one file.

The table: ``--files`` data files (default 10,000) in ``--manifests`` manifests (default 100),
format v3, built with icectl's writers (the data files do not exist; commits read metadata only).
The v4 twin is the same table after ``icectl upgrade --to 4`` (its time is printed too).

* append one file: ``icectl add-files`` of one small Parquet file (v3: a manifest, a manifest list
  and the table metadata; v4: one root and the table metadata);
* remove one file: v4 ``icectl remove-files`` (one root with a manifest DV); v3 as Iceberg Java's
  ``DeleteFiles`` commits it (icectl has no v3 remove-files): the manifest holding the file is
  rewritten with it DELETED, plus a new manifest list and the table metadata.

``--upgrade-manifests N`` also times ``upgrade --to 4`` on a table of N one-file manifests
(the issue asks for 10,000). ``--s3`` runs on moto's S3 server (127.0.0.1) as well as local disk.

    python benchmarks/bench_v4_commits.py
    python benchmarks/bench_v4_commits.py --files 2000 --manifests 20 --upgrade-manifests 1000 --s3
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "tests"):  # run from a checkout without `pip install -e .`; tests/ for support.s3
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from icectl.add_files import add_files  # noqa: E402
from icectl.commit import add_snapshot, commit, create_table, new_snapshot_id  # noqa: E402
from icectl.config import Config  # noqa: E402
from icectl.create import new_table_metadata  # noqa: E402
from icectl.ddl import parse_partition_spec, parse_schema  # noqa: E402
from icectl.manifest_writer import write_manifest, write_manifest_list  # noqa: E402
from icectl.remove_files import remove_files  # noqa: E402
from icectl.scan import iter_entries, manifests_of  # noqa: E402
from icectl.spec.manifest import (  # noqa: E402
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
)
from icectl.spec.snapshots import Snapshot  # noqa: E402
from icectl.spec.values import to_bytes  # noqa: E402
from icectl.storage import FileIO, S3Settings, join  # noqa: E402
from icectl.table import Table, load_table  # noqa: E402
from icectl.upgrade import upgrade  # noqa: E402

SCHEMA = "id long, ts timestamptz, name string"
DAY_US = 86_400_000_000


def build(location: str, io: FileIO, files: int, manifests: int) -> Table:
    """A v3 table with one append snapshot of ``files`` synthetic data files in ``manifests`` manifests."""
    schema = parse_schema(SCHEMA, format_version=3)
    spec = parse_partition_spec("days(ts)", schema)
    md = new_table_metadata(schema=schema, location=location, partition_spec=spec, sort_order=None, properties={},
                            format_version=3)
    create_table(location, None, md, io=io)
    table = load_table(location, Config(catalogs={}), io)
    md = table.metadata
    ptype = md.spec().partition_type(md.schema(), md.schemas)
    sid = new_snapshot_id(md)
    per = max(1, files // manifests)
    rows = []
    for m in range(manifests):
        entries = []
        for i in range(m * per, min(files, (m + 1) * per)):
            day = 19700 + i % 30
            df = DataFile(DataFileContent.DATA, f"{location}/data/ts_day={day}/f-{i:06d}.parquet", "PARQUET", (day,),
                          1000, 40_000, column_sizes={1: 8000, 2: 8000, 3: 20000},
                          value_counts={1: 1000, 2: 1000, 3: 1000}, null_value_counts={1: 0, 2: 0, 3: 0},
                          lower_bounds={1: to_bytes(schema.find_type(1), i * 1000), 3: b"name-a"},
                          upper_bounds={1: to_bytes(schema.find_type(1), i * 1000 + 999), 3: b"name-z"},
                          split_offsets=(4,), sort_order_id=0)
            entries.append(ManifestEntry(ManifestEntryStatus.ADDED, sid, None, None, df))
        w = write_manifest(entries, schema=md.schema(), spec=md.spec(), partition_type=ptype, format_version=3,
                           content=ManifestContent.DATA, snapshot_id=sid)
        path = join(location, "metadata", f"bench-m{m}.avro")
        io.write(path, w.data)
        rows.append(w.to_manifest_file(path, len(w.data), 0, sid, -1))
    lst = write_manifest_list(rows, format_version=3, snapshot_id=sid, parent_snapshot_id=None, sequence_number=1,
                              first_row_id=0)
    list_path = join(location, "metadata", f"snap-{sid}-1-bench.avro")
    io.write(list_path, lst.data)
    snap = Snapshot(sid, int(time.time() * 1000), None, 1, manifest_list=list_path,
                    summary={"operation": "append", "total-data-files": str(files),
                             "total-records": str(files * 1000)}, schema_id=0, first_row_id=0,
                    added_rows=lst.added_rows)
    commit(table, lambda base: add_snapshot(base, snap))
    return table


def v3_remove_one(table: Table, path: str) -> None:
    """Iceberg Java's DeleteFiles on v3: rewrite the manifest holding ``path``, write a new list."""
    md = table.metadata
    head = md.current_snapshot()
    assert head is not None
    ms = manifests_of(md, head, table.io)
    sid = new_snapshot_id(md)
    seq = md.last_sequence_number + 1
    target = None
    kept = []
    for m in ms:
        entries = [e for _, e in iter_entries(md, table.io, [m], live_only=True)]
        if target is None and any(e.data_file.file_path == path for e in entries):
            target = m
            out = [ManifestEntry(ManifestEntryStatus.DELETED if e.data_file.file_path == path
                                 else ManifestEntryStatus.EXISTING,
                                 sid if e.data_file.file_path == path else e.snapshot_id,
                                 e.sequence_number, e.file_sequence_number, e.data_file) for e in entries]
            ptype = md.spec().partition_type(md.schema(), md.schemas)
            w = write_manifest(out, schema=md.schema(), spec=md.spec(), partition_type=ptype, format_version=3,
                               content=ManifestContent.DATA, snapshot_id=sid)
            new_path = join(md.location or "", "metadata", f"bench-rm-{sid}.avro")
            table.io.write(new_path, w.data)
            kept.append(w.to_manifest_file(new_path, len(w.data), 0, sid, -1))
        else:
            kept.append(m)
    assert target is not None
    kept = [replace(m, first_row_id=None) if m.added_snapshot_id == sid else m for m in kept]
    lst = write_manifest_list(kept, format_version=3, snapshot_id=sid, parent_snapshot_id=head.snapshot_id,
                              sequence_number=seq, first_row_id=md.next_row_id)
    list_path = join(md.location or "", "metadata", f"snap-{sid}-1-bench.avro")
    table.io.write(list_path, lst.data)
    snap = Snapshot(sid, int(time.time() * 1000), head.snapshot_id, seq, manifest_list=list_path,
                    summary={"operation": "delete"}, schema_id=0, first_row_id=md.next_row_id,
                    added_rows=lst.added_rows)
    commit(table, lambda base: add_snapshot(base, snap))


def listing(io: FileIO, location: str) -> dict[str, int]:
    fs, native = io.filesystem(location)
    return {str(p): int(info["size"]) for p, info in fs.find(native + "/metadata", detail=True).items()}


def measure(io: FileIO, location: str, fn: Any) -> tuple[int, str, float]:
    before = listing(io, location)
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    after = listing(io, location)
    new = {p: s for p, s in after.items() if p not in before and not p.endswith("version-hint.text")}
    avro = sum(s for p, s in new.items() if p.endswith(".avro"))
    return len(new), f"{sum(new.values())} ({avro} Avro)", seconds


def run(where: str, base: str, io: FileIO, args: argparse.Namespace, small: str) -> list[tuple[str, ...]]:
    out = []
    for version in (3, 4):
        loc = f"{base}/v{version}"
        t0 = time.perf_counter()
        table = build(loc, io, args.files, args.manifests)
        built = time.perf_counter() - t0
        if version == 4:
            n, b, s = measure(io, loc, lambda t=table: upgrade(t, 4))
            out.append((where, "v4", f"upgrade ({args.manifests} manifests)", str(n), str(b), f"{s:.2f}"))
        table = load_table(loc, Config(catalogs={}), io)
        n, b, s = measure(io, loc, lambda t=table: add_files(t, [small]))
        out.append((where, f"v{version}", "append 1 file", str(n), str(b), f"{s:.2f}"))
        i = args.files // 2
        victim = f"{loc}/data/ts_day={19700 + i % 30}/f-{i:06d}.parquet"
        table = load_table(loc, Config(catalogs={}), io)
        if version == 4:
            n, b, s = measure(io, loc, lambda t=table, v=victim: remove_files(t, [v]))
        else:
            n, b, s = measure(io, loc, lambda t=table, v=victim: v3_remove_one(t, v))
        out.append((where, f"v{version}", "remove 1 file", str(n), str(b), f"{s:.2f}"))
        print(f"  [{where} v{version}: table built in {built:.1f}s]", file=sys.stderr)
    if args.upgrade_manifests:
        loc = f"{base}/up"
        build(loc, io, args.upgrade_manifests, args.upgrade_manifests)
        n, b, s = measure(io, loc, lambda: upgrade(load_table(loc, Config(catalogs={}), io), 4))
        out.append((where, "v3->v4", f"upgrade ({args.upgrade_manifests} manifests)", str(n), str(b), f"{s:.2f}"))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--manifests", type=int, default=100)
    p.add_argument("--upgrade-manifests", type=int, default=10_000)
    p.add_argument("--s3", action="store_true", help="also run on moto's S3 server")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-v4-"))
    small = tmp / "one.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()),
                             "ts": pa.array([1_717_200_000_000_000] * 2, pa.timestamp("us", tz="UTC")),
                             "name": ["a", "b"]}), small)
    rows = run("local", str(tmp / "wh"), FileIO(), args, str(small))
    if args.s3:
        from support.s3 import ACCESS_KEY, SECRET_KEY, create_bucket, start_moto_server

        server, endpoint = start_moto_server()
        try:
            create_bucket(endpoint, "bench")
            io = FileIO(s3=S3Settings(endpoint=endpoint, access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY,
                                      region="us-east-1"))
            rows += run("s3", "s3://bench/wh", io, args, str(small))
        finally:
            server.stop()
    print("| storage | format | operation | files written | bytes written (of which manifests) | seconds |")
    print("|---|---|---|---:|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
