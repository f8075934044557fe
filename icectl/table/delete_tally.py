"""How far a delete run got, for what an interrupted one (Ctrl-C, exit 130) says.

A command wraps its delete phase in :func:`deleting`; every file
:func:`icectl.table.delete_fence.delete_with_checksum` deletes meanwhile is counted, from whichever
thread deletes it. Ctrl-C in the middle becomes :class:`DeletesInterrupted`, still a
``KeyboardInterrupt`` (exit 130), whose message says how many of the planned files were deleted
and how to finish. The pools of the delete runs let the deletes under way finish before it is
raised (:func:`icectl.threads.streaming_pool`), so the count is exact.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class DeletesInterrupted(KeyboardInterrupt):
    """Ctrl-C during a delete run: ``str()`` is the one line to print."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Tally:
    """The files deleted so far in the current run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deleted = 0

    def add(self, n: int = 1) -> None:
        with self._lock:
            self.deleted += n


# Module-wide, not a context variable: the deletes run in pool threads, which do not inherit one.
_active: Tally | None = None


def count_deleted(n: int = 1) -> None:
    """Count ``n`` deleted files into the run under way (nothing outside a run)."""
    tally = _active
    if tally is not None:
        tally.add(n)


@contextmanager
def deleting(total: int, what: str, finish: str) -> Iterator[Tally]:
    """A delete run of ``total`` planned ``what`` ("files of expired snapshots"); on Ctrl-C raise
    :class:`DeletesInterrupted`: "deleted N of TOTAL <what> before the interrupt; <finish>"."""
    global _active
    outer, tally = _active, Tally()
    _active = tally
    try:
        yield tally
    except DeletesInterrupted:
        raise
    except KeyboardInterrupt:
        raise DeletesInterrupted(f"deleted {tally.deleted} of {total} {what} before the interrupt; {finish}") from None
    finally:
        _active = outer
        if outer is not None:
            outer.add(tally.deleted)


__all__ = ["DeletesInterrupted", "Tally", "count_deleted", "deleting"]
