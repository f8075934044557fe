"""The one delete loop: files the delete fence already judged go, here on a thread pool or, when the
caller hands it an executor (``--executor-deletes``: the Spark engine's tasks), there; the outcome
is counted per category, already-gone files apart from failures.

Expire-snapshots, remove-orphan-files and drop --purge all delete through :func:`delete_checked`
(each after the commit or catalog drop that unreferenced the files); what may go is decided
before, by reachability (:mod:`icectl.table.reach`), the fence (:mod:`icectl.table.delete_fence`)
and the neighbours (:mod:`icectl.table.neighbours`). Categories go one after the other, in the
order given (Java's: content files, manifests, manifest lists, statistics), never interleaved.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from icectl import progress
from icectl.errors import IcectlError
from icectl.storage import FileIO, scheme_of
from icectl.table.delete_fence import delete_with_checksum
from icectl.table.reach import CATEGORIES, FileSet
from icectl.threads import streaming_pool

# (path as reported, path to delete): local files are deleted by the real path the fence judged
# (never through a link), reported as written.
Target = tuple[str, str]
# fn(shared, target) -> True (deleted), False (already gone) or why not; module-level, so that an
# executor (a Spark task) can run it by reference.
DeleteOne = Callable[[Any, Any], "bool | str"]
# Runs ``fn(shared, item)`` over ``items`` elsewhere and yields the results in order.
Executor = Callable[[DeleteOne, list[Any], Any, str], Iterable["bool | str"]]


@dataclass
class DeleteOutcome:
    deleted: dict[str, int]  # per category
    already_gone: int
    failures: list[str]

    @property
    def total(self) -> int:
        return sum(self.deleted.values())


def delete_target(io: FileIO, target: Target) -> bool | str:
    """Delete one checked file and its Hadoop checksum sidecar: True, False (already gone) or the error."""
    try:
        return delete_with_checksum(io, target[1])
    except IcectlError as e:
        return e.one_line()


def delete_checked(items: Sequence[tuple[str, Any]], *, categories: Sequence[str], shared: Any,
                   delete: DeleteOne = delete_target, workers: int, description: str = "deleting files",
                   executor: Executor | None = None, failure: Callable[[Any, str], str] | None = None,
                   ) -> DeleteOutcome:
    """Delete ``items`` ((category, item) pairs, every item already judged by the fence) by
    ``delete(shared, item)``, category after category in the order of ``categories``.

    ``failure(item, why)`` words a failure (default: ``why`` as the delete returned it).
    """
    counts = dict.fromkeys(categories, 0)
    gone = 0
    failures: list[str] = []
    ordered = [(c, item) for c in categories for cat, item in items if cat == c]
    results: Iterable[bool | str]
    if executor is not None:
        results = executor(delete, [item for _c, item in ordered], shared, description)
    else:
        results = _here(delete, ordered, categories, shared, workers, description)
    for (category, item), result in zip(ordered, results, strict=True):
        if result is True:
            counts[category] += 1
        elif result is False:
            gone += 1  # already gone: not an error
        else:
            failures.append(failure(item, str(result)) if failure is not None else str(result))
    return DeleteOutcome(counts, gone, failures)


def file_set_items(files: FileSet, category: str | None = None) -> list[tuple[str, Target]]:
    """``files`` as (category, target) items, sorted by path within a category (``category``: all
    under that one). Local files are deleted by the identity the fence judged (the real path)."""
    return [(category or c, (p, key if scheme_of(p) == "file" else p))
            for key, (p, c) in sorted(files.files.items(), key=lambda kv: kv[1][0])]


def delete_file_set(io: FileIO, files: FileSet, *, workers: int, executor: Executor | None = None,
                    extra: Sequence[tuple[str, Target]] = (), extra_categories: Sequence[str] = ()) -> DeleteOutcome:
    """Delete a judged :class:`~icectl.table.reach.FileSet` (then ``extra`` items of ``extra_categories``),
    in Java's order of categories; a failure reads ``<path>: <why>``."""
    return delete_checked([*file_set_items(files), *extra], categories=[*CATEGORIES, *extra_categories], shared=io,
                          workers=workers, executor=executor, failure=lambda item, why: f"{item[0]}: {why}")


def _here(delete: DeleteOne, ordered: list[tuple[str, Any]], categories: Sequence[str], shared: Any, workers: int,
          description: str) -> Iterator[bool | str]:
    with progress.task(description, len(ordered)) as advance, streaming_pool(max(1, workers)) as pool:
        for category in categories:  # a single pool.map over everything would interleave the categories
            for result in pool.map(lambda item: delete(shared, item), [i for c, i in ordered if c == category]):
                advance(1)
                yield result


__all__ = ["DeleteOutcome", "Executor", "Target", "delete_checked", "delete_file_set", "delete_target",
           "file_set_items"]
