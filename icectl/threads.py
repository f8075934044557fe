"""Thread pools of this process: one bounded, ordered parallel map, the pool for streaming generators,
and the number of threads for each kind of work.

Every local path that runs a function over many items in threads goes through :func:`ordered_map`
(the local engine, the manifest read-ahead of :mod:`icectl.table.scan`, validate's walk, the
per-file checks of the operations): results in the items' order, a bounded number of items taken
ahead, and what is not started cancelled when the consumer stops or an item fails.

A stream consumed to its end leaves no work behind. A stream abandoned half-way (the consumer raised,
or stopped reading) is closed later, possibly by the garbage collector, at any point of any thread,
even while :mod:`threading` holds its internal shutdown lock (as when a new thread starts). Joining
threads there deadlocks: the whole process hangs in ``Thread.start``, as it once did in CI. So a
streaming generator's pool never joins on exit: it cancels what has not started, and what is
running finishes on its own (reads and listings, whose results nobody takes).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Threads per kind of work, named once here (not a literal at each pool).
# Reads of manifests, manifest lists, leaves and file footers: I/O-bound, above all on object storage.
READ_WORKERS = min(16, 4 * (os.cpu_count() or 2))
# Bins encoded at once (compact's new manifests and leaves): encoding holds the GIL, and each bin's
# entries are Python objects while it is written (about 1 GB for a full 8 MiB manifest), so more
# threads than cores add memory, not speed (2 million entries: 8.9 GB with 8 threads).
ENCODE_WORKERS = max(2, os.cpu_count() or 2)
# Size and existence calls (one HEAD request each on object storage; cheap for the caller's memory).
STAT_WORKERS = 16
# Folders listed at once (remove-orphan-files' listing).
LIST_WORKERS = 8


@contextmanager
def streaming_pool(workers: int, **kwargs: Any) -> Iterator[ThreadPoolExecutor]:
    """A :class:`ThreadPoolExecutor` for use inside a generator: shut down without waiting."""
    pool = ThreadPoolExecutor(max_workers=max(1, workers), **kwargs)
    try:
        yield pool
    except KeyboardInterrupt:
        # Ctrl-C: the tasks under way finish (the queued ones are cancelled), so what an interrupted
        # delete run reports is exact (icectl.table.delete_tally); a second Ctrl-C stops the wait.
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


_END: Any = object()


def ordered_map(fn: Callable[[T], R], items: Iterable[T], *, workers: int = READ_WORKERS, ahead: int | None = None,
                pool: Executor | None = None, wait: bool = False) -> Generator[R, None, None]:
    """``fn`` of each item, run in threads, yielded in the items' order.

    At most ``ahead`` items (default: twice ``workers``, at least 2) are taken from ``items`` and not
    yet yielded, so memory stays flat however many items there are; ``items`` is iterated lazily, on
    the consumer's thread (a generator feeding it may do per-item work there). An exception ``fn``
    raises reaches the consumer at that item, as itself.

    When the map ends early (an item failed, the consumer stopped reading or raised, Ctrl-C), the
    items not started are cancelled and none is taken any more. The ones under way finish on their
    own (see the module docstring: a stream is never joined when abandoned), except on Ctrl-C while
    waiting here, and with ``wait=True``, where the map waits for them before it ends: a writer
    cleaning up after a failure must not have a task still writing. ``pool``: run on this executor
    (shared by nested maps, left open) instead of a pool of ``workers`` threads of its own.
    """
    ahead = max(2, 2 * workers) if ahead is None else max(1, ahead)
    try:
        size = len(items)  # type: ignore[arg-type]
    except TypeError:
        size = workers
    it = iter(items)
    own = pool is None
    executor = ThreadPoolExecutor(max_workers=max(1, min(workers, size))) if pool is None else pool
    pending: deque[Future[R]] = deque()
    interrupted = False
    try:
        for item in it:
            pending.append(executor.submit(fn, item))
            if len(pending) >= ahead:
                break
        while pending:
            got = pending[0].result()
            pending.popleft()
            nxt = next(it, _END)
            if nxt is not _END:
                pending.append(executor.submit(fn, nxt))
            yield got
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        for fut in pending:
            fut.cancel()
        if wait or interrupted:  # the tasks under way finish; a second Ctrl-C stops the wait
            wait_for(pending)
        if own:
            executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["ENCODE_WORKERS", "LIST_WORKERS", "READ_WORKERS", "STAT_WORKERS", "ordered_map", "streaming_pool"]
