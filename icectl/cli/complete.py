"""Shell completion of command arguments (dynamic: table names come from the configured catalog).

The shell scripts in completions/ call back into icectl for a TABLE argument (click's completion
protocol, ``_ICECTL_COMPLETE=complete_bash``); click parses the words typed so far, so ``--config
FILE`` given before the command is seen here, and calls :func:`complete_table`. It never raises
and never prints (stdout is the shell's list of candidates): a broken config or a catalog that
does not answer within :data:`BUDGET_SECONDS` gives no candidates, and the scripts then offer
files. A prefix that looks like a path gives none either, so the shell completes it as a file.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from icectl.catalog import open_catalog, walk_tables
from icectl.config import Config, load_config
from icectl.storage import FileIO

# A TAB must answer quickly: a catalog server that is down must not hang the shell.
BUDGET_SECONDS = 2.0


def _config_from(ctx: Any) -> Config:
    """The config of the command line being completed: its ``--config`` (or ICECTL_CONFIG, which
    click resolved into the same parameter), else the default file."""
    path = None
    root = ctx.find_root() if ctx is not None else None
    if root is not None:
        given = root.params.get("config")
        path = Path(given) if given and str(given) not in ("", ".") else None
    return load_config(path)


def _looks_like_path(text: str) -> bool:
    return "/" in text or text.startswith((".", "~"))


def table_names(config: Config, prefix: str) -> list[str]:
    """``namespace.table`` of the default catalog and ``catalog.namespace.table`` of a catalog the
    prefix names, that start with ``prefix``; other catalogs' names (``prod.``) as a start."""
    io = FileIO(s3=config.s3)
    head = prefix.split(".", 1)[0]
    out: list[str] = []
    catalogs: list[tuple[str | None, str]]  # (catalog name, None: the default; how its names start)
    if "." in prefix and head in config.catalogs and head != config.default_catalog:
        catalogs = [(head, f"{head}.")]
    else:
        catalogs = [(None, "")]
        out += [f"{name}." for name in sorted(config.catalogs)
                if name != config.default_catalog and f"{name}.".startswith(prefix)]
    for name, shown in catalogs:
        catalog = open_catalog(config, io, name)
        # Only the namespace the prefix names, when it names one: a big catalog is not walked.
        ns = tuple(prefix[len(shown):].split(".")[:-1])
        try:
            idents = walk_tables(catalog, ns) if ns else walk_tables(catalog)
        except Exception:  # a prefix naming no namespace: try the whole catalog
            idents = walk_tables(catalog)
        out += [shown + ".".join(i) for i in idents if (shown + ".".join(i)).startswith(prefix)]
    return sorted(set(out))


def complete_table(ctx: Any, incomplete: str) -> list[str]:
    """Candidates for a TABLE argument that starts with ``incomplete`` (none for a path: the shell's)."""
    if _looks_like_path(incomplete):
        return []
    found: list[str] = []

    def work() -> None:
        try:
            found.extend(table_names(_config_from(ctx), incomplete))
        except Exception:  # completion must never fail a TAB; no candidates instead
            found.clear()

    # A daemon thread: when the catalog does not answer in time, the process exits without it.
    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(BUDGET_SECONDS)
    return list(found) if not t.is_alive() else []
