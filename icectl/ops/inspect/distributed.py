"""The ``files``, ``entries`` and ``partitions`` views on an engine other than the local one (issue 17).

Each distinct manifest of the view is one item of :meth:`icectl.engine.Engine.map`: its rows (or the
JSON text of its rows, or its partitions' partial sums) are built where it is decoded, by the very
functions the local path uses (:func:`~icectl.ops.inspect.files.file_row`, ``entry_row``,
``file_rows_json``, :func:`fold_partitions`), and come back in manifest order, one manifest at a
time, so the driver never holds the table. Chunk boundaries do not show in the JSON (the renderer
joins chunks as it joins rows), so the text is byte for byte the local engine's.

A manifest listed twice (a hostile list) is decoded on the engine once, the first time; its later
listings are read here, with the same function, so each occurrence keeps its own list row.
The local engine never comes here: :mod:`icectl.ops.inspect.views` keeps its own streaming path.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from icectl.codec.arrow_types import distinct_rows
from icectl.codec.manifest_arrow import partition_values
from icectl.engine import Engine
from icectl.ops.inspect.files import (
    FILE_FIELDS,
    METRIC_FIELDS,
    PartitionMapper,
    entry_row,
    entry_rows_json,
    file_row,
    file_rows_json,
)
from icectl.ops.inspect.metadata import iso_timestamp
from icectl.spec.manifest import DataFile, DataFileContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO
from icectl.table.scan import iter_entries

if TYPE_CHECKING:
    import pyarrow as pa

R = TypeVar("R")
PARTITION_FIELDS = frozenset({"content", "partition", "record_count", "file_size_in_bytes"})


@dataclass
class ViewTask:
    """What every task of one view needs: pickled once per Spark task. The partition mapper (its
    caches of formatted partitions and bounds) is built on first use, where the task runs."""

    md: TableMetadata
    io: FileIO
    metrics: bool = False
    entries: bool = False  # the entries view (DELETED entries too), else files (live ones)
    encode: Callable[[Any], str] | None = None  # the renderer's encoder, for JSON text
    _mapper: PartitionMapper | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def mapper(self) -> PartitionMapper:
        if self._mapper is None:
            self._mapper = PartitionMapper(self.md)
        return self._mapper

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_mapper": None}  # caches are rebuilt where the task runs

    @property
    def fields(self) -> set[str]:
        return set(FILE_FIELDS) | (set(METRIC_FIELDS) if self.metrics else set())


# --------------------------------------------------------------------------- task functions (module level:
# Spark pickles them by reference)


def manifest_rows(task: ViewTask, m: ManifestFile) -> list[dict[str, Any]]:
    """One manifest's rows of the files (live entries) or entries view."""
    md, mapper, metrics = task.md, task.mapper, task.metrics
    pairs = iter_entries(md, task.io, [m], fields=task.fields, live_only=not task.entries, workers=1)
    if task.entries:
        return [entry_row(md, mapper, m, e, metrics) for _m, e in pairs]
    return [file_row(md, mapper, m, e.data_file, metrics) for _m, e in pairs]


def manifest_json(task: ViewTask, m: ManifestFile) -> list[str]:
    """One manifest's rows as JSON text chunks (the local bulk path's, on one manifest)."""
    assert task.encode is not None
    render = entry_rows_json if task.entries else file_rows_json
    return [c.decode() if isinstance(c, bytes) else c  # text: the driver joins the executors' chunks
            for c in render(task.md, task.io, [m], task.mapper, task.encode, task.metrics) if c]


def manifest_partitions(task: ViewTask, m: ManifestFile) -> dict[tuple[Any, ...], dict[str, Any]]:
    """One manifest's partial ``partitions`` groups (merged on the driver by :func:`merge_partitions`)."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    by_id = {s.snapshot_id: s for s in task.md.snapshots}
    fold_partitions(groups, task.mapper, by_id,
                    iter_entries(task.md, task.io, [m], fields=PARTITION_FIELDS, live_only=True, workers=1))
    return groups


# --------------------------------------------------------------------------- partitions: one fold for both engines


def fold_partitions(groups: dict[tuple[Any, ...], dict[str, Any]], mapper: PartitionMapper,
                    by_id: dict[int, Snapshot], pairs: Iterable[tuple[ManifestFile, ManifestEntry]]) -> None:
    """Add live entries to the ``partitions`` view's groups (in first-seen order): counts and sizes
    per unified partition, and the latest snapshot that touched it (the first at that time)."""
    partitioned = bool(mapper.unified.fields)
    for m, e in pairs:
        f = e.data_file
        # Iceberg 1.10 keys partitions by spec too: a v1 value and an unpartitioned spec's null differ.
        key = (m.partition_spec_id, *mapper.key(m.partition_spec_id, f.partition)) if partitioned else ()
        g = groups.get(key)
        if g is None:
            g = groups[key] = _new_group(mapper.to_dict(m.partition_spec_id, f.partition))
        s = by_id.get(e.snapshot_id) if e.snapshot_id is not None else None
        if s is not None and (g["_ms"] is None or s.timestamp_ms > g["_ms"]):
            g["_ms"], g["last_updated_at"], g["last_updated_snapshot_id"] = (
                s.timestamp_ms, iso_timestamp(s.timestamp_ms), s.snapshot_id)
        g["spec_id"] = m.partition_spec_id
        if f.content == DataFileContent.DATA:
            g["record_count"] += f.record_count
            g["file_count"] += 1
            g["total_data_file_size_in_bytes"] += f.file_size_in_bytes
        elif f.content == DataFileContent.POSITION_DELETES:
            g["position_delete_record_count"] += f.record_count
            g["position_delete_file_count"] += 1
        else:
            g["equality_delete_record_count"] += f.record_count
            g["equality_delete_file_count"] += 1


def fold_partition_tables(groups: dict[tuple[Any, ...], dict[str, Any]], mapper: PartitionMapper,
                          by_id: dict[int, Snapshot],
                          tables: Iterable[tuple[ManifestFile, pa.Table | list[ManifestEntry]]]) -> None:
    """:func:`fold_partitions` over manifests' Arrow tables (:func:`icectl.table.scan.iter_manifest_tables`),
    consecutive manifests of one spec folded together with kernels: the same groups, in the same
    order, with the same sums and latest snapshots. Manifests given as entries are folded as they are."""
    pending: list[tuple[ManifestFile, pa.Table]] = []
    rows = 0

    def flush() -> None:
        nonlocal pending, rows
        if pending:
            _fold_chunk(groups, mapper, by_id, pending)
        pending, rows = [], 0

    for m, got in tables:
        if isinstance(got, list):
            flush()
            fold_partitions(groups, mapper, by_id, ((m, e) for e in got if e.is_live))
            continue
        if pending and (m.partition_spec_id != pending[0][0].partition_spec_id or rows >= _FOLD_ROWS):
            flush()
        pending.append((m, got.select(["status", "snapshot_id", *sorted(PARTITION_FIELDS)])))
        rows += got.num_rows
    flush()


_FOLD_ROWS = 65_536


def _fold_chunk(groups: dict[tuple[Any, ...], dict[str, Any]], mapper: PartitionMapper, by_id: dict[int, Snapshot],
                chunk: list[tuple[ManifestFile, pa.Table]]) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    m0 = chunk[0][0]
    spec_id = m0.partition_spec_id
    t = pa.concat_tables([t for _, t in chunk]).combine_chunks()
    t = t.filter(pc.not_equal(t.column("status"), 2))
    n = t.num_rows
    if n == 0:
        return
    extremes = [pc.min_max(t.column(c)).as_py() for c in ("record_count", "file_size_in_bytes")]
    if any(e["min"] is None or e["min"] < -2**40 or e["max"] > 2**40 for e in extremes):
        # int64 sums could wrap (or a count is missing): the entry-by-entry fold decides
        decode_all = partition_values(mapper.md.partition_type(spec_id))
        entries = ((m0, _live_entry(r, decode_all)) for r in t.to_pylist())
        fold_partitions(groups, mapper, by_id, entries)
        return
    ptype = mapper.md.partition_type(spec_id)
    column = t.column("partition")
    part, firsts = distinct_rows([pc.list_element(column, i) for i in range(len(ptype.fields))], n)
    decode = partition_values(ptype)
    partitioned = bool(mapper.unified.fields)
    keys: list[tuple[Any, ...]] = []
    for values in column.take(firsts).to_pylist():  # in order of first appearance: groups made in order
        tup = decode(values)
        key = (spec_id, *mapper.key(spec_id, tup)) if partitioned else ()
        if key not in groups:
            groups[key] = _new_group(mapper.to_dict(spec_id, tup))
        groups[key]["spec_id"] = spec_id
        keys.append(key)
    table = pa.table({"g": part, "s": t.column("snapshot_id"), "c": t.column("content"),
                      "row": pa.array(np.arange(n, dtype=np.int64)), "rc": t.column("record_count"),
                      "size": t.column("file_size_in_bytes")})
    sums = table.group_by(["g", "c"], use_threads=False).aggregate(
        [("rc", "sum"), ("size", "sum"), ("row", "count")]).to_pylist()
    for r in sums:
        g = groups[keys[r["g"]]]
        kind = ("record_count", "file_count", "total_data_file_size_in_bytes") if r["c"] == 0 else \
            ("position_delete_record_count", "position_delete_file_count", None) if r["c"] == 1 else \
            ("equality_delete_record_count", "equality_delete_file_count", None)
        g[kind[0]] += r["rc_sum"]
        g[kind[1]] += r["row_count"]
        if kind[2] is not None:
            g[kind[2]] += r["size_sum"]
    # The latest snapshot per group, the first seen among equal times: pairs in order of first row.
    pairs = table.group_by(["g", "s"], use_threads=False).aggregate([("row", "min")]).sort_by("row_min").to_pylist()
    for r in pairs:
        s = by_id.get(r["s"]) if r["s"] is not None else None
        g = groups[keys[r["g"]]]
        if s is not None and (g["_ms"] is None or s.timestamp_ms > g["_ms"]):
            g["_ms"], g["last_updated_at"], g["last_updated_snapshot_id"] = (
                s.timestamp_ms, iso_timestamp(s.timestamp_ms), s.snapshot_id)


def _new_group(partition: dict[str, Any]) -> dict[str, Any]:
    return {"partition": partition, "spec_id": 0, "record_count": 0, "file_count": 0,
            "total_data_file_size_in_bytes": 0, "position_delete_record_count": 0, "position_delete_file_count": 0,
            "equality_delete_record_count": 0, "equality_delete_file_count": 0, "last_updated_at": None,
            "last_updated_snapshot_id": None, "_ms": None}


def _live_entry(row: dict[str, Any], decode: Callable[[list[bytes | None]], tuple[Any, ...]]) -> ManifestEntry:
    f = DataFile(content=DataFileContent(row["content"]), file_path="", file_format="", partition=decode(
        row["partition"]), record_count=row["record_count"], file_size_in_bytes=row["file_size_in_bytes"])
    return ManifestEntry(ManifestEntryStatus(row["status"]), row["snapshot_id"], None, None, f)


_SUMS = ("record_count", "file_count", "total_data_file_size_in_bytes", "position_delete_record_count",
         "position_delete_file_count", "equality_delete_record_count", "equality_delete_file_count")


def merge_partitions(groups: dict[tuple[Any, ...], dict[str, Any]],
                     partial: dict[tuple[Any, ...], dict[str, Any]]) -> None:
    """Fold one manifest's partial groups into ``groups``, as if its entries had been folded there:
    partials merged in manifest order give the local fold's groups, order and ties alike (a later
    manifest's latest snapshot replaces the earlier only when strictly later)."""
    for key, p in partial.items():
        g = groups.get(key)
        if g is None:
            groups[key] = p
            continue
        for name in _SUMS:
            g[name] += p[name]
        if p["_ms"] is not None and (g["_ms"] is None or p["_ms"] > g["_ms"]):
            g["_ms"], g["last_updated_at"], g["last_updated_snapshot_id"] = (
                p["_ms"], p["last_updated_at"], p["last_updated_snapshot_id"])
        g["spec_id"] = p["spec_id"]


# --------------------------------------------------------------------------- the driver's side


def per_manifest(engine: Engine, fn: Callable[[ViewTask, ManifestFile], R], task: ViewTask,
                 manifests: Sequence[ManifestFile], description: str = "reading manifests") -> Iterator[R]:
    """``fn`` of each manifest, in list order: distinct manifests on ``engine``, repeats here."""
    firsts: list[ManifestFile] = []
    seen: set[str] = set()
    for m in manifests:
        if m.manifest_path not in seen:
            seen.add(m.manifest_path)
            firsts.append(m)
    if len(firsts) == len(manifests):
        yield from engine.map(fn, firsts, shared=task, description=description)
        return
    results = engine.map(fn, firsts, shared=task, description=description)
    done: set[str] = set()
    try:
        for m in manifests:
            if m.manifest_path in done:
                yield fn(task, m)
            else:
                done.add(m.manifest_path)
                yield next(results)
    finally:
        results.close()


def engine_rows(engine: Engine, task: ViewTask, manifests: Sequence[ManifestFile]) -> Iterator[dict[str, Any]]:
    for rows in per_manifest(engine, manifest_rows, task, manifests):
        yield from rows


def engine_json(engine: Engine, task: ViewTask, manifests: Sequence[ManifestFile],
                encode: Callable[[Any], str]) -> Iterator[str]:
    """The view's JSON text chunks, rendered on the engine with ``encode`` when it can travel there
    (a module-level function: the CLI's), else the engine's rows encoded here."""
    try:
        pickle.dumps(encode)
    except (pickle.PicklingError, AttributeError, TypeError):
        for row in engine_rows(engine, task, manifests):
            yield encode(row)
        return
    with_encoder = ViewTask(task.md, task.io, task.metrics, task.entries, encode)
    for chunks in per_manifest(engine, manifest_json, with_encoder, manifests):
        yield from chunks


def engine_partitions(engine: Engine, task: ViewTask,
                      manifests: Sequence[ManifestFile]) -> dict[tuple[Any, ...], dict[str, Any]]:
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for partial in per_manifest(engine, manifest_partitions, task, manifests):
        merge_partitions(groups, partial)
    return groups
