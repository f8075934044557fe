"""Progress reporting without printing: core code announces work, the CLI decides how to show it.

Core functions wrap long loops in ``with progress.task("reading manifests", total) as advance:``.
Nothing is shown unless a reporter is installed (the CLI installs a rich progress bar on stderr,
only when stderr is a terminal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol


class Reporter(Protocol):
    def start(self, description: str, total: int | None) -> object: ...
    def advance(self, handle: object, n: int) -> None: ...
    def finish(self, handle: object) -> None: ...


_reporter: ContextVar[Reporter | None] = ContextVar("icectl_progress", default=None)


def _noop(n: int = 1) -> None:
    return None


@contextmanager
def task(description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """A unit of work; call the yielded function with the number of steps done."""
    reporter = _reporter.get()
    if reporter is None:
        yield _noop
        return
    handle = reporter.start(description, total)

    def advance(n: int = 1) -> None:
        reporter.advance(handle, n)

    try:
        yield advance
    finally:
        reporter.finish(handle)


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    token = _reporter.set(reporter)
    try:
        yield
    finally:
        _reporter.reset(token)
