"""Shell completion of command arguments (dynamic: table names come from the configured catalog)."""

from __future__ import annotations


def complete_table(incomplete: str) -> list[str]:
    """Candidates for a TABLE argument that starts with ``incomplete``."""
    return []
