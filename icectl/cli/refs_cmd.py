"""Commands: branch and tag (create, replace, drop, list)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the commands to ``app``."""
