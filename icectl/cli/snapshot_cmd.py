"""Commands: rollback, set-current, cherrypick, publish, fast-forward (snapshot management)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the commands to ``app``."""
