"""`icectl validate TABLE`: check a table against every spec invariant, like a linter with named rules."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.complete import complete_table
from icectl.cli.framework import command, load_config_and_io
from icectl.cli.options import JsonOpt
from icectl.engine import Engine
from icectl.errors import UsageError
from icectl.results import RowsResult
from icectl.validate import list_rules, validate_address


def validate_cmd(
    table: Annotated[str | None, typer.Argument(
        metavar="[TABLE]", help="A *.metadata.json path or URL, a table directory, or "
                                "[catalog.]namespace.table.", show_default=False,
        autocompletion=complete_table)] = None,
    all_snapshots: Annotated[bool, typer.Option(
        "--all-snapshots", help="Check every snapshot, not only the current one (each manifest is read "
                                "once).")] = False,
    deep: Annotated[bool, typer.Option(
        "--deep", help="Also open the files: existence, sizes, Parquet row counts, statistics files.")] = False,
    rule: Annotated[list[str] | None, typer.Option(
        "--rule", metavar="RULE", help="Run only this rule or area (repeatable).", show_default=False)] = None,
    skip: Annotated[list[str] | None, typer.Option(
        "--skip", metavar="RULE", help="Do not run this rule or area (repeatable).", show_default=False)] = None,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="On a terminal, print every finding as a row instead of one row per rule "
                                "(--json always has every finding).")] = False,
    list_rules_: Annotated[bool, typer.Option(
        "--list-rules", help="Print the rule catalogue and exit.")] = False,
    json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> RowsResult:
    """Check a table against the spec: metadata, manifest lists, manifests, deletes (and files with --deep).

    Each finding names its rule, file, entry (manifest path#ordinal) and the values that disagree.
    Exit code 7 when a finding has error severity; warnings mark what Iceberg Java itself writes.
    """
    if list_rules_:
        return list_rules()
    if table is None:
        raise UsageError("give a TABLE, or --list-rules")
    config, io = load_config_and_io()
    return validate_address(table, config, io, all_snapshots=all_snapshots, deep=deep, rules=rule,
                            skip=skip, engine=engine).to_result(verbose=verbose)


def register(app: typer.Typer) -> None:
    command(app, "validate", view="document", engine=True)(validate_cmd)
