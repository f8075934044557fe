"""Global options of this invocation, set by the root callback (kept apart from the framework so
that ``icectl --help`` imports nothing but this)."""

from __future__ import annotations

from pathlib import Path


class State:
    """Global options of this invocation (set by the root callback)."""

    debug: bool = False
    config_path: Path | None = None
    no_cache: bool = False  # --no-cache: applied when a command runs (icectl.cli.framework.command)


state = State()
