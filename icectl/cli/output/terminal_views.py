"""Terminal renderers that results name themselves: a result class (or a rows result) gives the
"module:function" of the drawing it needs beyond a rows table or a document tree
(``terminal_report``: validate's findings grouped by rule, expire's summary, the health report) and of
its one line in an ``--all`` run (``one_line``). Imported only when such a result is printed, so
naming them costs nothing at start-up.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from icectl.results import MultiResult


def _load(spec: str) -> Callable[[Any], Any]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def report_renderer(result: Any) -> Callable[[Any], Any] | None:
    """The function that draws ``result`` on a terminal, if it names one."""
    spec = getattr(result, "terminal_report", "")
    return _load(spec) if spec else None


def one_line_renderer(multi: MultiResult) -> Callable[[Any], str] | None:
    """The function that sums one table of an ``--all`` run up in one line, if its result class names one."""
    spec = getattr(multi.item, "one_line", "") if multi.item is not None else ""
    return _load(spec) if spec else None
