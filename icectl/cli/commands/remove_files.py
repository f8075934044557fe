"""`icectl remove-files TABLE PATH... [--where field=value]`: remove data files from a v4 table."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.framework import command
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.ops.files.remove_files import remove_files
from icectl.results import Result
from icectl.table import Table


def remove_files_cmd(
    table: Table,
    paths: Annotated[list[str] | None, typer.Argument(
        metavar="[PATH...]", help="Locations of the data files to remove.", show_default=False)] = None,
    where: Annotated[list[str] | None, typer.Option(
        "--where", help="Remove the files whose partition field has this value: field=value "
                        "(repeatable; every clause must hold).", show_default=False)] = None,
    branch: Annotated[str, typer.Option("--branch", "-b", help="Branch to remove from.")] = "main",
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Remove data files from a v4 table as one delete commit that writes one root manifest.

    A file at the root level becomes a DELETED entry, a file inside a leaf manifest is removed
    by a manifest delete vector; deletion vectors of removed files go too. No manifest is
    rewritten.
    """
    return remove_files(table, paths or [], where=where or [], branch=branch,
                        dry_run=dry_run)


def register(app: typer.Typer) -> None:
    command(app, "remove-files", table=True)(remove_files_cmd)
