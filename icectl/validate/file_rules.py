"""``--deep`` rules: the files themselves (existence, sizes, Parquet footers, statistics files)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow.parquet as pq

from icectl import progress
from icectl.errors import IcectlError, NotFoundError
from icectl.threads import ordered_map
from icectl.validate.context import Context, LiveFile
from icectl.validate.rules import Rule, Severity, rule

E, W = Severity.ERROR, Severity.WARNING

FILE_EXISTS = rule("files.exist", E, "--deep: every live data and delete file exists", "Manifests")
FILE_SIZE = rule("files.size", E, "--deep: every live file has the recorded file_size_in_bytes", "Manifests")
PARQUET_ROWS = rule("files.parquet-record-count", E,
                    "--deep: a Parquet file's footer row count equals its record_count", "Manifests; Appendix A")
STATISTICS_EXIST = rule("files.statistics-exist", E,
                        "--deep: statistics and partition-statistics files exist with their recorded size",
                        "Table Statistics; Partition Statistics")


def _check_one(ctx: Context, f: LiveFile) -> list[tuple[Rule, str, dict[str, Any]]]:
    """(rule, message, values) problems of one file; run in worker threads, reported by the caller."""
    out: list[tuple[Rule, str, dict[str, Any]]] = []
    try:
        size = ctx.io.size(f.path)
    except NotFoundError:
        return [(FILE_EXISTS, f"{f.path} does not exist", {"file_path": f.path})]
    if size != f.size:
        out.append((FILE_SIZE, f"{f.path} is {size} bytes, the manifest says {f.size}",
                    {"file_path": f.path, "file_size_in_bytes": f.size, "actual": size}))
    if f.file_format.upper() == "PARQUET" and ctx.reporter.any_on(PARQUET_ROWS):
        try:
            with ctx.io.open(f.path) as stream:
                rows = pq.ParquetFile(stream).metadata.num_rows
        except (IcectlError, OSError, ValueError) as e:
            out.append((PARQUET_ROWS, f"{f.path}: cannot read the Parquet footer ({e})", {"file_path": f.path}))
            return out
        if rows != f.record_count:
            out.append((PARQUET_ROWS, f"{f.path} holds {rows} rows, record_count is {f.record_count}",
                        {"file_path": f.path, "record_count": f.record_count, "parquet_rows": rows}))
    return out


def check_files(ctx: Context, files: Iterable[LiveFile]) -> None:
    rep = ctx.reporter
    if not rep.any_on(FILE_EXISTS, FILE_SIZE, PARQUET_ROWS):
        return
    unique: dict[str, LiveFile] = {}
    for f in files:
        unique.setdefault(f.path, f)
    todo = list(unique.values())
    if not todo:
        return
    with progress.task("checking files", len(todo)) as advance:
        for f, problems in zip(todo, ordered_map(lambda f: _check_one(ctx, f), todo), strict=True):
            advance(1)
            manifest_path = f.entry.rsplit("#", 1)[0]
            for r, message, values in problems:
                rep.report(r, manifest_path, message, entry=f.entry, **values)


def check_statistics(ctx: Context) -> None:
    md, rep = ctx.metadata, ctx.reporter
    if not rep.on(STATISTICS_EXIST):
        return
    for kind, stats in (("statistics", md.statistics), ("partition-statistics", md.partition_statistics)):
        for s in stats:
            try:
                size = ctx.io.size(s.statistics_path)
            except NotFoundError:
                rep.report(STATISTICS_EXIST, ctx.metadata_location, f"{kind} file {s.statistics_path} of snapshot "
                           f"{s.snapshot_id} does not exist", entry=f"{kind} {s.snapshot_id}",
                           statistics_path=s.statistics_path)
                continue
            if size != s.file_size_in_bytes:
                rep.report(STATISTICS_EXIST, ctx.metadata_location, f"{kind} file {s.statistics_path} is {size} "
                           f"bytes, the metadata says {s.file_size_in_bytes}", entry=f"{kind} {s.snapshot_id}",
                           statistics_path=s.statistics_path, file_size_in_bytes=s.file_size_in_bytes, actual=size)
