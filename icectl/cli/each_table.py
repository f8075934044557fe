"""``--all``: run one command on every table of a catalog (or of one namespace), one result per table."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator

from icectl.catalog import Catalog, open_catalog, walk_tables
from icectl.cli.state import state
from icectl.config import Config
from icectl.errors import ExitCode, IcectlError
from icectl.results import Result, TableFailure
from icectl.storage import FileIO
from icectl.table import Table, load_catalog_table


def each_table(config: Config, io: FileIO, catalog: str | None, namespace: str | None, view: str,
               run: Callable[[Table], Result]) -> Iterator[Result]:
    """``run`` on every table of the catalog (or of one namespace), one result per table (``--all``).

    The tables are listed now, before any result: a catalog or namespace that does not exist is
    the command's error (exit 3, one line), never an empty run that looks green in cron."""
    cat = open_catalog(config, io, catalog)
    ns = tuple(namespace.split(".")) if namespace else ()
    return _each(cat, walk_tables(cat, ns), view, run)


def _each(cat: Catalog, idents: list[tuple[str, ...]], view: str, run: Callable[[Table], Result]) -> Iterator[Result]:
    for ident in idents:
        name = ".".join(ident)
        try:
            table = load_catalog_table(cat, ident)
            yield run(table)
        except IcectlError as e:  # one broken table must not stop the nightly run
            yield TableFailure(view=view, title=f"{name}: failed", table=name, error=e.one_line(),
                               exit_code=e.exit_code)
        except Exception as e:  # nor may an icectl bug met on one table: report it (exit 1), go on
            if state.debug:
                traceback.print_exc()
            error = f"internal error: {type(e).__name__}: {' '.join(str(e).split())}"
            yield TableFailure(view=view, title=f"{name}: failed", table=name, error=error,
                               exit_code=ExitCode.INTERNAL)
