"""Terminal renderers for results that need more than a rows table or a document tree.

The renderer (:mod:`icectl.cli.output.render`) looks a result's ``view`` up here: :data:`REPORTS` names a
function that turns the result into one rich renderable (validate's findings grouped by rule, the
health report with its charts); :data:`ONE_LINE` names a function that gives the one line an
``--all`` run prints per table on a terminal. Entries are "module:function" strings, imported only
when such a result is printed, so this module costs nothing at start-up.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# view -> "icectl.cli.module:function(result) -> rich renderable"
REPORTS: dict[str, str] = {
    "validate": "icectl.cli.output.summaries:validate_report",
    "expire_snapshots": "icectl.cli.output.summaries:expire_report",
    "health": "icectl.cli.output.health.terminal:health_report",
}

# view -> "icectl.cli.module:function(result) -> str": one line per table of an --all run
ONE_LINE: dict[str, str] = {
    "expire_snapshots": "icectl.cli.output.summaries:expire_line",
    "compact": "icectl.cli.output.summaries:compact_line",
    "remove_orphan_files": "icectl.cli.output.summaries:orphan_line",
    "health": "icectl.cli.commands.health:one_line",
}


def _load(spec: str) -> Callable[[Any], Any]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def report_renderer(view: str) -> Callable[[Any], Any] | None:
    """The function that draws a result of ``view`` on a terminal, if it has its own."""
    spec = REPORTS.get(view)
    return _load(spec) if spec else None


def one_line_renderer(view: str) -> Callable[[Any], str] | None:
    """The function that sums a result of ``view`` up in one line (``--all`` on a terminal), if any."""
    spec = ONE_LINE.get(view)
    return _load(spec) if spec else None
