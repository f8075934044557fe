"""Results that core functions return and the CLI renders: the JSON contract of icectl.

Core code never prints. A command returns one of these; ``icectl.cli.render`` prints it as a
rich table on a terminal or as exactly one JSON document with ``--json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RowsResult:
    """A table of rows. ``rows`` may be a generator, so large views stream."""

    view: str  # machine name, e.g. "files"
    title: str  # human caption
    columns: list[str]
    rows: Iterable[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)  # table, snapshot id, ...: goes into the JSON too
    exit_code: int = 0


@dataclass
class RecordResult:
    """A nested key/value document (an overview)."""

    view: str
    title: str
    data: dict[str, Any]
    exit_code: int = 0
    warnings: list[str] = field(default_factory=list)  # one line each, on stderr only (never stdout)


@dataclass
class MessageResult:
    """A short confirmation (what a command did)."""

    message: str
    data: dict[str, Any] = field(default_factory=dict)
    exit_code: int = 0


Result = RowsResult | RecordResult | MessageResult  # MultiResult holds several RecordResults


@dataclass
class MultiResult:
    """One result per table (``--all``): a JSON line each with --json; the exit code is the worst."""

    view: str
    results: Iterable[RecordResult]
    exit_code: int = 0  # set while the results are rendered

    def __iter__(self) -> Iterator[RecordResult]:
        for r in self.results:
            if r.exit_code and (self.exit_code == 0 or r.exit_code > self.exit_code):
                self.exit_code = r.exit_code
            yield r
