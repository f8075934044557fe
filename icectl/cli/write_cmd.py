"""Commands that change tables: `icectl add-files` (and `create`, `namespace`)."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.add_files import add_files
from icectl.cli.framework import command, load_config_and_io
from icectl.cli.options import DryRunOpt, JsonOpt, TableArg
from icectl.results import RecordResult
from icectl.table import load_table


def register(app: typer.Typer) -> None:
    @command(app, "add-files")
    def add_files_cmd(
        table: TableArg,
        paths: Annotated[list[str], typer.Argument(
            metavar="PATH...", help="Parquet files, or directories whose *.parquet files to add.",
            show_default=False)],
        branch: Annotated[str, typer.Option("--branch", "-b", help="Branch to append to.")] = "main",
        dry_run: DryRunOpt = False,
        json_output: JsonOpt = False,
    ) -> RecordResult:
        """Register existing Parquet files in a table as one append snapshot.

        Record counts and column metrics come from each file's footer; partition values from its
        rows through the table's transforms. A file spanning partitions, or already in the table,
        is refused.
        """
        config, io = load_config_and_io()
        return add_files(load_table(table, config, io), paths, branch=branch, dry_run=dry_run)
