"""Reachability as Spark DataFrames (issue 17): what snapshots reach, decoded on the executors.

The Spark engine's side of :func:`icectl.ops.expire.files_to_delete` and of remove-orphan-files'
valid files, as Iceberg Java's ``BaseSparkAction`` does it: the manifest lists are decoded on the
executors (``mapInArrow`` over the list paths: one row per manifest, the list row pickled with
it), the DISTINCT manifests then decoded there too (their live entries: path and category), and
the set difference is a LEFT ANTI JOIN on the key the driver's ``FileSet`` uses
(:func:`icectl.table.delete_fence.file_identity`, computed on the executors by the same
function). Only the result travels back (``toLocalIterator``).

Every row of these frames has the columns of :data:`ROWS`: ``path``, ``category`` (the expire
result's names), ``key`` (the file identity), ``rank`` (which spelling of one file wins: the order
in which the local code adds categories), ``meta`` (a manifest's list row, pickled) and ``error``
(an :class:`~icectl.errors.IcectlError` an executor met, packed; such a row passes every later
stage and is raised on the driver as itself, before anything is judged).

Not here, and left to the local computation on the driver (the caller decides,
:func:`supports`): v4 snapshots (root manifests, manifest DVs judged per snapshot) and the
leftover snapshots of earlier killed expiries (read leniently, file by file).
"""

from __future__ import annotations

import contextvars
import os
import pickle
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from icectl.codec.manifest_reader import read_manifest_list
from icectl.engine import pack_error, unpack_error
from icectl.engine import spark as spark_module
from icectl.errors import IcectlError
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO
from icectl.table.delete_fence import check_absolute, check_snapshot_lists, file_identity, identity_cache
from icectl.table.reach import CATEGORY_RANK, content_category
from icectl.table.scan import iter_entries, manifests_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from icectl.engine.spark import SparkEngine

ROWS = "path string, category string, key string, rank int, meta binary, error binary"
COLUMNS = ("path", "category", "key", "rank", "meta", "error")
Row = tuple[Any, ...]
TASK_THREADS = 8  # rows of one task read at a time
# The local FileSet keeps the first spelling it is given of a file: lists, then manifests, then
# the manifests' files, then statistics files. One file under two categories or two spellings
# (an in-table link) keeps the lowest rank here, then the smallest path.
RANK = CATEGORY_RANK


def supports(*metadata: TableMetadata) -> bool:
    """Whether these tables' snapshots can be judged on Spark: none of them is a v4 snapshot."""
    return not any(s.root_manifest for md in metadata for s in md.snapshots)


# --------------------------------------------------------------------------- executor functions


def list_rows(state: tuple[int, FileIO], row: dict[str, Any]) -> list[Row]:
    """A manifest list (``row['path']``): its own row and one per manifest it lists."""
    version, io = state
    path = row["path"]
    try:
        manifests = read_manifest_list(io.read(path), format_version=version)
    except IcectlError as e:
        raise e.in_file(path) from None
    for m in manifests:  # as the local walk (icectl.ops.expire.reachable_files): v1-v3 paths are absolute
        check_absolute(m.manifest_path, version, "a manifest", f"manifest list {path}", path)
    out: list[Row] = [(path, "manifest_lists", file_identity(path), 0, None, None)]
    out += [(m.manifest_path, "manifest_files", file_identity(m.manifest_path), 1, pickle.dumps(m), None)
            for m in manifests]
    return out


def content_rows(state: tuple[TableMetadata, FileIO], row: dict[str, Any]) -> list[Row]:
    """The live data and delete files of one manifest (``row['meta']``: its list row)."""
    md, io = state
    manifest = pickle.loads(row["meta"])
    out: list[Row] = []
    for _m, e in iter_entries(md, io, [manifest], fields={"content", "file_path", "file_format"}, live_only=True):
        path = e.data_file.file_path
        check_absolute(path, md.format_version, "a live file", f"manifest {manifest.manifest_path}",
                       manifest.manifest_path)
        out.append((path, content_category(e.data_file.content), file_identity(path), 2, None, None))
    return out


def keyed_rows(_state: None, row: dict[str, Any]) -> list[Row]:
    """A row the driver made, with its file identity."""
    return [(row["path"], row["category"], file_identity(row["path"]), row["rank"], row["meta"], None)]


def _stage(fn: Callable[[Any, dict[str, Any]], list[Row]], shared: bytes) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function applying ``fn`` to every row; error rows pass through."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        os.environ.setdefault("ICECTL_DECODE_PROCESSES", "0")  # the executor's cores are Spark's
        state = pickle.loads(shared)
        types = (pa.string(), pa.string(), pa.string(), pa.int32(), pa.binary(), pa.binary())

        def one(row: dict[str, Any]) -> list[Row]:
            if row["error"] is not None:
                return [tuple(row[c] for c in COLUMNS)]
            try:
                return fn(state, row)
            except IcectlError as e:  # raised on the driver as itself
                return [(row["path"], None, None, None, None, pack_error(e))]

        # Threads: each row is mostly a read (object storage), as the local engine's readers.
        with identity_cache(), ThreadPoolExecutor(TASK_THREADS) as pool:
            for batch in batches:
                # each row in a copy of this context: the identity cache is a context variable
                futures = [pool.submit(contextvars.copy_context().run, one, row) for row in batch.to_pylist()]
                out: list[Row] = [r for f in futures for r in f.result()]
                if out:
                    yield pa.RecordBatch.from_arrays(
                        [pa.array([r[i] for r in out], t) for i, t in enumerate(types)], names=list(COLUMNS))

    return run


def _map(df: DataFrame, fn: Callable[[Any, dict[str, Any]], list[Row]], shared: Any) -> DataFrame:
    return df.mapInArrow(_stage(fn, pickle.dumps(shared)), ROWS)


# --------------------------------------------------------------------------- frames


def driver_frame(engine: SparkEngine, rows: Iterable[tuple[str, str]]) -> DataFrame:
    """(path, category) rows of the driver (statistics and metadata files), keyed on the executors."""
    return _map(engine.frame([(p, c, None, RANK.get(c, 3), None, None) for p, c in rows], ROWS), keyed_rows, None)


def manifest_frame(engine: SparkEngine, md: TableMetadata, io: FileIO, snapshots: Iterable[Snapshot]) -> DataFrame:
    """The snapshots' manifest lists and manifests (v1-v3; a manifest row carries its list row)."""
    snaps = list(snapshots)
    check_snapshot_lists(md.format_version, snaps)  # never read a relative one (v1-v3), as locally
    heads = list(dict.fromkeys(s.manifest_list for s in snaps if s.manifest_list))
    lists = engine.frame([(p, None, None, None, None, None) for p in heads], ROWS, per_task=spark_module.ITEMS_PER_TASK)
    df = _map(lists, list_rows, (md.format_version, io))
    # v1 snapshots may name their manifests inline: few, read on the driver as the local code does
    inline = [m for s in snaps if not s.manifest_list for m in manifests_of(md, s, io)]
    if inline:
        rows = [(m.manifest_path, "manifest_files", None, 1, pickle.dumps(m), None) for m in inline]
        df = df.unionByName(_map(engine.frame(rows, ROWS), keyed_rows, None))
    return df


def content_frame(md: TableMetadata, io: FileIO, manifests: DataFrame) -> DataFrame:
    """The live files of the DISTINCT manifests among ``manifests`` (their error rows pass through)."""
    distinct = manifests.filter("category = 'manifest_files' OR error IS NOT NULL").dropDuplicates(["path"])
    return _map(distinct, content_rows, (md, io))


def reach_frame(engine: SparkEngine, md: TableMetadata, io: FileIO, snapshots: Iterable[Snapshot]) -> DataFrame:
    """Every file the snapshots reach: lists, manifests and the manifests' live files."""
    manifests = manifest_frame(engine, md, io, snapshots)
    return manifests.unionByName(content_frame(md, io, manifests))


def chosen(df: DataFrame) -> DataFrame:
    """One row per key (file): the spelling and category of the lowest rank, then the smallest path."""
    from pyspark.sql import functions as F

    best = F.min(F.struct("rank", "path", "category")).alias("m")
    return df.filter("error IS NULL").groupBy("key").agg(best).select("key", "m.path", "m.category")


def stream(engine: SparkEngine, df: DataFrame, description: str) -> Iterator[Any]:
    """The rows of ``df``, a partition at a time (the driver never holds the whole frame)."""
    engine.describe(description)
    yield from df.toLocalIterator(prefetchPartitions=True)


# --------------------------------------------------------------------------- expire


def doomed_files(engine: SparkEngine, before: TableMetadata, expired: list[int], after: TableMetadata, io: FileIO,
                 stats_before: set[str], stats_after: set[str],
                 memo: dict[Any, list[tuple[str, tuple[str, str]]]] | None = None) -> list[tuple[str, tuple[str, str]]]:
    """:func:`icectl.ops.expire.files_to_delete` on Spark (v1-v3, no leftovers): (key, (path, category))
    of every file the ``expired`` snapshots of ``before`` reach and no snapshot of ``after`` reaches.

    As locally: the expired side opens only the manifests no retained snapshot lists; the retained
    manifests are opened only when more than manifest lists is to go; an error is raised in the
    order the local code meets them (retained lists, expired lists and manifests, retained
    manifests). ``stats_before`` are the statistics files of ``before`` (empty when nothing expires).
    ``memo``: results by their inputs (lists, manifests and statistics files are immutable), so the
    check after the commit costs nothing when the table did not change meanwhile.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    gone_snaps = [s for s in (before.snapshot_by_id(i) for i in expired) if s is not None]
    key = (tuple((s.manifest_list, tuple(s.manifests or ())) for s in gone_snaps),
           frozenset((s.manifest_list, tuple(s.manifests or ())) for s in after.snapshots),
           frozenset(stats_before), frozenset(stats_after), before.format_version, after.format_version)
    if memo is not None and key in memo:
        return memo[key]
    level = StorageLevel.MEMORY_AND_DISK
    kept_m = manifest_frame(engine, after, io, after.snapshots).persist(level)
    gone_m = manifest_frame(engine, before, io, gone_snaps).persist(level)
    # The expired side's manifests no retained snapshot lists, each once: one shuffle on the path.
    both = gone_m.select("path", "meta", F.lit(False).alias("k")).unionByName(
        kept_m.select("path", "meta", F.lit(True).alias("k"))).filter("meta IS NOT NULL")
    only_gone = both.groupBy("path").agg(F.max("k").alias("k"), F.first("meta").alias("meta")).filter("NOT k")
    only_gone = only_gone.select("path", F.lit("manifest_files").alias("category"), F.lit(None).cast("string")
                                 .alias("key"), F.lit(1).alias("rank"), "meta", _no_error())
    gone = gone_m.unionByName(_map(only_gone, content_rows, (before, io)))
    stats = driver_frame(engine, ((p, "statistics_files") for p in sorted(stats_before)))
    gone = gone.unionByName(stats).persist(level)
    kept = kept_m.unionByName(driver_frame(engine, ((p, "statistics_files") for p in sorted(stats_after))))
    try:
        found = _doomed(engine, gone, [kept])
        if any(category != "manifest_lists" for _k, (_p, category) in found):
            # More than lists goes: now the retained manifests' files count too (as locally).
            found = _doomed(engine, gone, [kept, content_frame(after, io, kept_m)])
    finally:
        for df in (kept_m, gone_m, gone):
            df.unpersist()
    if memo is not None:
        memo[key] = found
    return found


def _doomed(engine: SparkEngine, gone: DataFrame, kept: list[DataFrame]) -> list[tuple[str, tuple[str, str]]]:
    """The files of ``gone`` no ``kept`` row has. One shuffle on the key does the left anti join,
    the choice of a spelling and carries the error rows (keyed apart: an identity never starts
    with NUL); the first error (of ``kept[0]``, then ``gone``, then ``kept[1]``) is raised."""
    from pyspark.sql import functions as F

    rows = None
    for df, k, o in [(gone, False, 1), (kept[0], True, 0), *((part, True, 2) for part in kept[1:])]:
        part = df.select(F.when(F.col("error").isNull(), F.col("key")).otherwise(F.concat(F.lit("\0"), "path"))
                         .alias("key"), "rank", "path", "category", "error", F.lit(k).alias("k"), F.lit(o).alias("o"))
        rows = part if rows is None else rows.unionByName(part)
    assert rows is not None
    clean = F.col("error").isNull()
    grouped = rows.groupBy("key").agg(
        F.max(clean & F.col("k")).alias("k"),
        F.min(F.when(clean & ~F.col("k"), F.struct("rank", "path", "category"))).alias("m"),
        F.min(F.when(~clean, F.struct("o", "path", "error"))).alias("e"))
    result = grouped.filter("e IS NOT NULL OR (NOT k AND m IS NOT NULL)")
    out: list[tuple[str, tuple[str, str]]] = []
    failed: list[tuple[int, str, bytes]] = []
    for row in stream(engine, result, "joining expired files with retained files"):
        if row["e"] is not None:
            failed.append((row["e"]["o"], row["e"]["path"] or "", row["e"]["error"]))
        elif not failed:
            out.append((row["key"], (row["m"]["path"], row["m"]["category"])))
    if failed:
        raise unpack_error(min(failed)[2])
    return out


def _no_error() -> Any:
    from pyspark.sql import functions as F

    return F.lit(None).cast("binary").alias("error")


# --------------------------------------------------------------------------- orphans

LISTED = "path string, mtime long, link boolean"
Lookup = Callable[[Any, str], tuple[str, list[str]]]


def _lookup_stage(fn: Lookup, shared: bytes) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function adding ``fn``'s (exact, keys) to listed rows."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        import pyarrow as pa

        state = pickle.loads(shared)
        with identity_cache():
            for batch in batches:
                d = batch.to_pydict()
                looked = [fn(state, p) for p in d["path"]]
                yield pa.RecordBatch.from_arrays(
                    [pa.array(d["path"], pa.string()), pa.array(d["mtime"], pa.int64()),
                     pa.array(d["link"], pa.bool_()),
                     pa.array([x[0] for x in looked], pa.string()),
                     pa.array([x[1] for x in looked], pa.list_(pa.string()))],
                    names=["path", "mtime", "link", "exact", "keys"])

    return run


def _looked_up(df: DataFrame, fn: Lookup, shared: Any) -> DataFrame:
    return df.mapInArrow(_lookup_stage(fn, pickle.dumps(shared)), f"{LISTED}, exact string, keys array<string>")


def valid_frame(engine: SparkEngine, md: TableMetadata, io: FileIO,
                extras: Iterable[tuple[str, str]]) -> tuple[DataFrame, int]:
    """The valid files' paths (remove-orphan-files), persisted, and how many: one spelling per file
    every snapshot reaches, as the local FileSet keeps it, and the ``extras`` (statistics and metadata
    files) by path. Raises a read error first (one job): an unreadable manifest is never taken for empty.
    The caller unpersists the frame."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    # persisted: read by the spelling choice and by the error rows (decoded once)
    reached = reach_frame(engine, md, io, md.snapshots).persist(StorageLevel.MEMORY_AND_DISK)
    paths = chosen(reached).select("path").unionByName(engine.frame([(p,) for p, _kind in extras], "path string"))
    errors = reached.filter("error IS NOT NULL").select(F.lit(None).cast("string").alias("path"),
                                                        F.struct("path", "error").alias("e"))
    no_error = F.lit(None).cast("struct<path:string,error:binary>").alias("e")
    valid = paths.distinct().select("path", no_error).unionByName(errors).persist(StorageLevel.MEMORY_AND_DISK)
    engine.describe("reading every snapshot's manifests")
    try:
        got = valid.agg(F.count("path").alias("n"), F.min("e").alias("e")).collect()[0]  # fills valid's cache
    finally:
        reached.unpersist()
    if got["e"] is not None:
        valid.unpersist()
        raise unpack_error(got["e"]["error"])
    return valid, int(got["n"])


def orphan_candidates(engine: SparkEngine, valid: DataFrame, listed: list[tuple[str, int, bool]], *,
                      valid_lookup: Lookup, listed_lookup: Lookup, shared: Any,
                      ) -> tuple[list[tuple[str, int, bool]], list[str]]:
    """Which ``listed`` (path, mtime, is link) files the driver must judge, and the valid paths it
    needs to judge them. ``*_lookup(shared, path)`` give (exact, keys): a listed file whose exact
    spelling equals a valid one's is valid, and the driver never sees it; for the others, every
    valid file sharing one of their keys (their URI path, a sidecar's file, a local identity)
    comes back, so the driver's matcher judges them as it would with every valid file."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    known = valid.filter("path IS NOT NULL").select("path", F.lit(0).cast("long").alias("mtime"),
                                                    F.lit(False).alias("link"))
    looked = _looked_up(known, valid_lookup, shared).withColumn("v", F.lit(True)).persist(StorageLevel.MEMORY_AND_DISK)
    lst = _looked_up(engine.frame(listed, LISTED), listed_lookup, shared).withColumn("v", F.lit(False))
    # A shuffle on the exact spelling: a listed file whose group has a valid file is plainly valid.
    both = looked.unionByName(lst).groupBy("exact").agg(
        F.max("v").alias("valid"), F.collect_list(F.when(~F.col("v"), F.struct("path", "mtime", "link", "keys")))
        .alias("listed"))
    todo = both.filter("NOT valid").select(F.explode("listed").alias("f")).select("f.*")
    # A shuffle on the lookup keys: every valid file that shares one with a file left to judge.
    wanted = todo.select(F.explode("keys").alias("k"), F.lit(False).alias("v"), F.lit(None).cast("string")
                         .alias("path"))
    having = looked.select(F.explode("keys").alias("k"), "v", "path").unionByName(wanted)
    related = having.groupBy("k").agg(F.min("v").alias("asked"), F.collect_set("path").alias("paths")) \
        .filter("NOT asked").select(F.explode("paths").alias("path"))
    rows = todo.select(F.lit(0).alias("t"), "path", "mtime", "link").unionByName(
        related.select(F.lit(1).alias("t"), "path", F.lit(None).cast("long").alias("mtime"),
                       F.lit(None).cast("boolean").alias("link")))
    candidates: list[tuple[str, int, bool]] = []
    needed: set[str] = set()
    try:
        for row in stream(engine, rows, "joining listed files with valid files"):
            if row["t"] == 0:
                candidates.append((row["path"], row["mtime"], row["link"]))
            else:
                needed.add(row["path"])
    finally:
        looked.unpersist()
    return candidates, sorted(needed)


# --------------------------------------------------------------------------- deletes on executors


def run_deletes(engine: SparkEngine, fn: Callable[[Any, Any], Any], items: list[Any], *, shared: Any,
                description: str) -> list[Any]:
    """``fn`` over the already-checked ``items`` as Spark tasks (``--executor-deletes``), results in order."""
    return list(engine.map(fn, items, shared=shared, description=description))


__all__ = [
    "COLUMNS",
    "LISTED",
    "RANK",
    "ROWS",
    "chosen",
    "content_frame",
    "doomed_files",
    "driver_frame",
    "manifest_frame",
    "orphan_candidates",
    "reach_frame",
    "run_deletes",
    "stream",
    "supports",
    "valid_frame",
]
