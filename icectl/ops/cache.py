"""The results of this family's commands:
their ``--json`` documents, one dataclass each (the rules are :mod:`icectl.results`'s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from icectl.results import CommandResult


@dataclass(kw_only=True)
class CacheInfoResult(CommandResult):
    """Where the cache is, how full, and whether this process would use and write it."""

    view: ClassVar[str] = "cache_info"

    dir: str
    enabled: bool
    writable: bool
    entries: int
    bytes: int
    max_bytes: int


@dataclass(kw_only=True)
class CacheClearResult(CommandResult):
    """What ``cache clear`` removed (or, with --dry-run, would remove)."""

    view: ClassVar[str] = "cache_clear"

    dir: str
    dry_run: bool
    entries: int
    bytes: int
