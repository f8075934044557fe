"""Thread pools inside generators that stream their results (manifest reads, listings, engine maps).

A stream consumed to its end leaves no work behind. A stream abandoned half-way (the consumer raised,
or stopped reading) is closed later, possibly by the garbage collector, at any point of any thread,
even while :mod:`threading` holds its internal shutdown lock (as when a new thread starts). Joining
threads there deadlocks: the whole process hangs in ``Thread.start``, as it once did in CI. So a
streaming generator's pool never joins on exit: it cancels what has not started, and what is
running finishes on its own (reads and listings, whose results nobody takes).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any


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


__all__ = ["streaming_pool"]
