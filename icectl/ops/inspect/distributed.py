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
from typing import Any, TypeVar

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
from icectl.spec.manifest import DataFileContent, ManifestEntry, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIO
from icectl.table.scan import iter_entries

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
    return [c for c in render(task.md, task.io, [m], task.mapper, task.encode, task.metrics) if c]


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
            g = groups[key] = {
                "partition": mapper.to_dict(m.partition_spec_id, f.partition), "spec_id": 0,
                "record_count": 0, "file_count": 0, "total_data_file_size_in_bytes": 0,
                "position_delete_record_count": 0, "position_delete_file_count": 0,
                "equality_delete_record_count": 0, "equality_delete_file_count": 0,
                "last_updated_at": None, "last_updated_snapshot_id": None, "_ms": None}
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
