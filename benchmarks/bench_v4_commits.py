"""v3 vs v4 on one table: files and bytes written, and time, to append one file and remove one file.

The table: ``--files`` data files (default 10,000) in ``--manifests`` manifests (default 100),
format v3, built with icectl's writers (the data files do not exist; commits read metadata only).
The v4 twin is the same table after ``icectl upgrade --to 4`` (its time is printed too).

* append one file: ``icectl add-files`` of one small Parquet file (v3: a manifest, a manifest list
  and the table metadata; v4: one root and the table metadata);
* remove one file: v4 ``icectl remove-files`` (one root with a manifest DV); v3 as Iceberg Java's
  ``DeleteFiles`` commits it (icectl has no v3 remove-files), in two variants:

  - Java's defaults (``commit.manifest-merge.enabled=true``, ``min-count-to-merge`` 100): the
    manifest holding the file is rewritten with it DELETED (ManifestFilterManager), then
    ManifestMergeManager bin-packs the 100 manifests (8 MiB target): one bin of 100 manifests,
    not below the minimum count, so all are merged into ONE manifest of every entry; the
    filtered manifest is deleted after the commit (counted in the bytes written, not the files).
    Real Spark 3.5 / Iceberg 1.10.2 does this: a whole-file DELETE on a table of 100 one-file
    manifests leaves one manifest (99 EXISTING, 1 DELETED);
  - ``commit.manifest-merge.enabled=false``: the rewritten manifest and a new manifest list.

File names are Spark's (``00000-0-<uuid>-0-00001.parquet``, ``<uuid>-m0.avro``) unless
``--short-names`` (``f-000123.parquet``, which compresses far better than real tables' names).

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
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
for _p in (REPO, REPO / "tests"):  # run from a checkout without `pip install -e .`; tests/ for support.s3
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from icectl.codec.manifest_writer import write_manifest, write_manifest_list  # noqa: E402
from icectl.config import Config  # noqa: E402
from icectl.ops.create.ddl import parse_partition_spec, parse_schema  # noqa: E402
from icectl.ops.create.metadata import new_table_metadata  # noqa: E402
from icectl.ops.files.add_files import add_files  # noqa: E402
from icectl.ops.files.remove_files import remove_files  # noqa: E402
from icectl.ops.lifecycle.upgrade import upgrade  # noqa: E402
from icectl.spec.manifest import (  # noqa: E402
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from icectl.spec.snapshots import Snapshot  # noqa: E402
from icectl.spec.updates import snapshot_change  # noqa: E402
from icectl.spec.values import to_bytes  # noqa: E402
from icectl.storage import FileIO, S3Settings, join  # noqa: E402
from icectl.table import Table, load_table  # noqa: E402
from icectl.table.commit import commit, create_table, new_snapshot_id  # noqa: E402
from icectl.table.scan import iter_entries, manifests_of  # noqa: E402

SCHEMA = "id long, ts timestamptz, name string"
TARGET_MANIFEST_BYTES = 8 * 1024 * 1024  # commit.manifest.target-size-bytes
MIN_COUNT_TO_MERGE = 100  # commit.manifest.min-count-to-merge
DAY_US = 86_400_000_000


def build(location: str, io: FileIO, files: int, manifests: int, short_names: bool = False) -> Table:
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
            df = DataFile(DataFileContent.DATA, data_path(location, i, short_names), "PARQUET", (day,),
                          1000, 40_000, column_sizes={1: 8000, 2: 8000, 3: 20000},
                          value_counts={1: 1000, 2: 1000, 3: 1000}, null_value_counts={1: 0, 2: 0, 3: 0},
                          lower_bounds={1: to_bytes(schema.find_type(1), i * 1000), 3: b"name-a"},
                          upper_bounds={1: to_bytes(schema.find_type(1), i * 1000 + 999), 3: b"name-z"},
                          split_offsets=(4,), sort_order_id=0)
            entries.append(ManifestEntry(ManifestEntryStatus.ADDED, sid, None, None, df))
        w = write_manifest(entries, schema=md.schema(), spec=md.spec(), partition_type=ptype, format_version=3,
                           content=ManifestContent.DATA, snapshot_id=sid)
        path = join(location, "metadata", f"bench-m{m}.avro" if short_names else f"{uuid.uuid4()}-m0.avro")
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
    commit(table, lambda base: snapshot_change(base, snap))
    return table


def data_path(location: str, i: int, short_names: bool) -> str:
    day = 19700 + i % 30
    name = f"f-{i:06d}.parquet" if short_names else f"{i % 200:05d}-{i // 200}-{uuid.UUID(int=i)}-0-00001.parquet"
    return f"{location}/data/ts_day={day}/{name}"


def _pack_end(manifests: list[ManifestFile], target: int) -> list[list[ManifestFile]]:
    """Iceberg's ListPacker(target, lookback 1).packEnd by manifest length."""
    bins: list[list[ManifestFile]] = []
    size = 0
    for m in reversed(manifests):
        if bins and size + m.manifest_length <= target:
            bins[-1].insert(0, m)
            size += m.manifest_length
        else:
            bins.append([m])
            size = m.manifest_length
    return bins[::-1]


def v3_remove_one(table: Table, path: str, *, merge: bool) -> int:
    """Iceberg Java's DeleteFiles on v3 (see the module docstring); returns the bytes of files it
    wrote and deleted again before returning (the filtered manifest a merge replaced)."""
    md = table.metadata
    head = md.current_snapshot()
    assert head is not None
    ms = manifests_of(md, head, table.io)
    sid = new_snapshot_id(md)
    seq = md.last_sequence_number + 1
    ptype = md.spec().partition_type(md.schema(), md.schemas)
    metadata_dir = join(md.location or "", "metadata")

    def write(entries: list[ManifestEntry]) -> ManifestFile:
        w = write_manifest(entries, schema=md.schema(), spec=md.spec(), partition_type=ptype, format_version=3,
                           content=ManifestContent.DATA, snapshot_id=sid)
        new_path = join(metadata_dir, f"{uuid.uuid4()}-m{len(written)}.avro")
        table.io.write(new_path, w.data)
        written.append(new_path)
        return w.to_manifest_file(new_path, len(w.data), 0, sid, -1)

    written: list[str] = []
    target = None
    kept = []
    for m in ms:
        entries = [e for _, e in iter_entries(md, table.io, [m], live_only=True)]
        if target is None and any(e.data_file.file_path == path for e in entries):
            target = m
            kept.append(write([ManifestEntry(ManifestEntryStatus.DELETED if e.data_file.file_path == path
                                             else ManifestEntryStatus.EXISTING,
                                             sid if e.data_file.file_path == path else e.snapshot_id,
                                             e.sequence_number, e.file_sequence_number, e.data_file)
                               for e in entries]))
        else:
            kept.append(m)
    assert target is not None
    transient = 0
    if merge:  # ManifestMergeManager.mergeGroup (one spec here)
        first, merged = kept[0], []
        for b in _pack_end(kept, TARGET_MANIFEST_BYTES):
            if len(b) == 1 or (first in b and len(b) < MIN_COUNT_TO_MERGE):
                merged += b
                continue
            entries = []
            for m in b:
                for _, e in iter_entries(md, table.io, [m]):
                    if e.status == ManifestEntryStatus.DELETED and e.snapshot_id != sid:
                        continue  # deletes of earlier snapshots are dropped
                    status = e.status if e.snapshot_id == sid else ManifestEntryStatus.EXISTING
                    entries.append(ManifestEntry(status, e.snapshot_id, e.sequence_number, e.file_sequence_number,
                                                 e.data_file))
            merged.append(write(entries))
        kept = merged
    kept = [replace(m, first_row_id=None) if m.added_snapshot_id == sid else m for m in kept]
    lst = write_manifest_list(kept, format_version=3, snapshot_id=sid, parent_snapshot_id=head.snapshot_id,
                              sequence_number=seq, first_row_id=md.next_row_id)
    list_path = join(md.location or "", "metadata", f"snap-{sid}-1-bench.avro")
    table.io.write(list_path, lst.data)
    snap = Snapshot(sid, int(time.time() * 1000), head.snapshot_id, seq, manifest_list=list_path,
                    summary={"operation": "delete"}, schema_id=0, first_row_id=md.next_row_id,
                    added_rows=lst.added_rows)
    commit(table, lambda base: snapshot_change(base, snap))
    for p in written:  # Java's cleanUncommitted: manifests the committed list does not use
        if p not in {m.manifest_path for m in kept}:
            transient += table.io.size(p)
            table.io.delete(p)
    return transient


def listing(io: FileIO, location: str) -> dict[str, int]:
    fs, native = io.filesystem(location)
    return {str(p): int(info["size"]) for p, info in fs.find(native + "/metadata", detail=True).items()}


def measure(io: FileIO, location: str, fn: Any) -> tuple[int, str, float]:
    """Files the operation leaves behind, and the bytes it wrote (with any it deleted again)."""
    before = listing(io, location)
    t0 = time.perf_counter()
    result = fn()
    transient = result if isinstance(result, int) else 0  # v3_remove_one's deleted-again bytes
    seconds = time.perf_counter() - t0
    after = listing(io, location)
    new = {p: s for p, s in after.items() if p not in before and not p.endswith("version-hint.text")}
    avro = sum(s for p, s in new.items() if p.endswith(".avro")) + transient
    return len(new), f"{sum(new.values()) + transient} ({avro} Avro)", seconds


def run(where: str, base: str, io: FileIO, args: argparse.Namespace, small: str) -> list[tuple[str, ...]]:
    out = []
    short = args.short_names
    victim_index = args.files // 2
    for version, label in ((3, "v3"), (3, "v3, no merge"), (4, "v4")):
        loc = f"{base}/{label.replace(', ', '-').replace(' ', '-')}"
        t0 = time.perf_counter()
        table = build(loc, io, args.files, args.manifests, short)
        built = time.perf_counter() - t0
        if version == 4:
            n, b, s = measure(io, loc, lambda t=table: upgrade(t, 4))
            out.append((where, "v4", f"upgrade ({args.manifests} manifests)", str(n), str(b), f"{s:.2f}"))
        table = load_table(loc, Config(catalogs={}), io)
        if label != "v3, no merge":  # add-files is a fast append either way
            n, b, s = measure(io, loc, lambda t=table: add_files(t, [small]))
            out.append((where, label, "append 1 file", str(n), str(b), f"{s:.2f}"))
        victim = data_path(loc, victim_index, short)
        table = load_table(loc, Config(catalogs={}), io)
        if version == 4:
            n, b, s = measure(io, loc, lambda t=table, v=victim: remove_files(t, [v]))
        else:
            n, b, s = measure(io, loc, lambda t=table, v=victim, m=label == "v3": v3_remove_one(t, v, merge=m))
        out.append((where, label, "remove 1 file", str(n), str(b), f"{s:.2f}"))
        print(f"  [{where} {label}: table built in {built:.1f}s]", file=sys.stderr)
    if args.upgrade_manifests:
        loc = f"{base}/up"
        build(loc, io, args.upgrade_manifests, args.upgrade_manifests, short)
        n, b, s = measure(io, loc, lambda: upgrade(load_table(loc, Config(catalogs={}), io), 4))
        out.append((where, "v3->v4", f"upgrade ({args.upgrade_manifests} manifests)", str(n), str(b), f"{s:.2f}"))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=10_000)
    p.add_argument("--manifests", type=int, default=100)
    p.add_argument("--upgrade-manifests", type=int, default=10_000)
    p.add_argument("--s3", action="store_true", help="also run on moto's S3 server")
    p.add_argument("--short-names", action="store_true", help="f-000123.parquet instead of Spark's uuid names")
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
