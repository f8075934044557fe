"""expire-snapshots' delete phase: the files the fence kept for deletion, in Java's order of
categories (content files, manifests, manifest lists, statistics), here on a thread pool or, with
``--executor-deletes``, as Spark tasks. Split from :mod:`icectl.ops.expire` to keep that module
within the size the architecture test allows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from icectl import progress
from icectl.engine.spark_reach import run_deletes, spark_engine
from icectl.errors import IcectlError
from icectl.ops.expire.result import EXPIRE_CATEGORIES as CATEGORIES
from icectl.storage import FileIO, scheme_of
from icectl.table.delete_fence import delete_with_checksum
from icectl.threads import streaming_pool

if TYPE_CHECKING:  # expire.py imports this module; FileSet is only a type here
    from icectl.ops.expire import FileSet

@dataclass
class DeleteOutcome:
    deleted: dict[str, int]
    already_gone: int
    failures: list[str]


def delete_one(io: FileIO, item: tuple[str, str]) -> bool | str:
    """Delete one checked file (``item``: as written, and the path to delete): True, False (already
    gone) or the error. Module-level: ``--executor-deletes`` runs it as Spark tasks."""
    try:
        return delete_with_checksum(io, item[1])
    except IcectlError as e:
        return e.one_line()


def delete_files(io: FileIO, files: FileSet, workers: int) -> DeleteOutcome:
    counts = dict.fromkeys(CATEGORIES, 0)
    gone = 0
    failures: list[str] = []
    keys = {p: k for k, (p, _c) in files.files.items()}
    by_category = files.by_category()
    # One category after the other, in Java's order (content files, manifests, manifest lists,
    # statistics). Local: the real path the fence judged (its key; never through a link).
    items = [(c, (p, keys[p] if scheme_of(p) == "file" else p)) for c in CATEGORIES for p in by_category[c]]
    engine = spark_engine()
    results: Iterable[bool | str]
    if engine is not None and engine.executor_deletes:
        results = run_deletes(engine, delete_one, [i for _c, i in items], shared=io, description="deleting files")
    else:
        results = _delete_here(io, items, workers)
    for (cat, (path, _target)), result in zip(items, results, strict=True):
        if result is True:
            counts[cat] += 1
        elif result is False:
            gone += 1  # already gone: not an error
        else:
            failures.append(f"{path}: {result}")
    return DeleteOutcome(counts, gone, failures)


def _delete_here(io: FileIO, items: list[tuple[str, tuple[str, str]]], workers: int) -> Iterator[bool | str]:
    with progress.task("deleting files", len(items)) as advance, streaming_pool(workers) as pool:
        for cat in CATEGORIES:  # a single pool.map over everything would interleave the categories
            for result in pool.map(lambda i: delete_one(io, i), [i for c, i in items if c == cat]):
                advance(1)
                yield result
