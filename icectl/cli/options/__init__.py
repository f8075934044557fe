"""Options shared by every command, declared once so they read and behave the same everywhere."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.complete import complete_table

TableArg = Annotated[str, typer.Argument(
    metavar="TABLE",
    help="A *.metadata.json path or URL, a table directory, or [catalog.]namespace.table.",
    show_default=False, autocompletion=complete_table)]



def long_value(value: int | None) -> int | None:
    """An option's callback: a snapshot id or count is a Java long, so a number beyond it is a usage
    error (exit 2, one line), not an id to look for nor a value to write into metadata."""
    if value is not None and not -(2**63) <= value <= 2**63 - 1:
        raise typer.BadParameter(f"{value} is beyond the signed 64-bit range")
    return value

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout instead of a table.")]

SnapshotOpt = Annotated[int | None, typer.Option(
    "--snapshot", "-s", help="Snapshot id to read (default: the current snapshot).", show_default=False,
    callback=long_value)]

RefOpt = Annotated[str | None, typer.Option(
    "--ref", "-r", help="Branch or tag to read (default: main).", show_default=False)]

DryRunOpt = Annotated[bool, typer.Option(
    "--dry-run", help="Print exactly what would be written and deleted; change nothing.")]

TableOrNamespaceArg = Annotated[str | None, typer.Argument(
    metavar="[TABLE]", help="The table (path, directory or [catalog.]namespace.table); with --all, "
                            "a namespace to limit the run to.", show_default=False,
    autocompletion=complete_table)]

AllTablesOpt = Annotated[bool, typer.Option(
    "--all", help="Every table of the catalog (or of the namespace given); one result per table.")]

CatalogOpt = Annotated[str | None, typer.Option(
    "--catalog", "-c", help="Catalog name from the config (default: the default catalog).", show_default=False)]
