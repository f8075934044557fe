"""Commands: properties (list, set, unset)."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.framework import command, load_config_and_io
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.ops.properties import (
    catalog_entries,
    list_properties,
    parse_assignments,
    set_properties,
    unset_properties,
)
from icectl.results import Result, RowsResult
from icectl.table import Table


def properties_list(
    table: Table,
    all_properties: Annotated[bool, typer.Option(
        "--all", help="Also list every property icectl interprets that the table does not set, with its "
                      "default (source 'default').")] = False,
    json_output: JsonOpt = False,
) -> RowsResult:
    """List the table's properties: key, value, and source ('table', or 'default' with --all)."""
    return list_properties(table, with_defaults=all_properties)


def properties_set(
    table: Table,
    assignments: Annotated[list[str], typer.Argument(
        metavar="KEY=VALUE...", help="Properties to set (the value may be empty or contain '=').",
        show_default=False)],
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Set table properties in one commit.

    Checked first (exit 2, nothing written): reserved keys (format-version: use 'icectl upgrade';
    uuid, snapshot-count, current-snapshot-*, ...: derived from metadata) and the values of the
    properties icectl interprets: commit.retry.* (integers >= 0), history.expire.* (integers:
    min-snapshots-to-keep >= 1, max-ref-age-ms >= 1, max-snapshot-age-ms >= 0), gc.enabled and
    write.metadata.delete-after-commit.enabled (true or false), write.metadata.previous-versions-max
    (>= 1), commit.manifest.target-size-bytes (>= 1), write.v4.root-max-added-files (>= 0),
    write.metadata.compression-codec (none, gzip), write.format.default (parquet, avro, orc),
    schema.name-mapping.default (a name mapping). --dry-run shows each key's old and new value.
    """
    config, io = load_config_and_io()
    updates = parse_assignments(assignments)
    return set_properties(table, updates, dry_run=dry_run,
                          entries=lambda: catalog_entries(config, io))


def properties_unset(
    table: Table,
    keys: Annotated[list[str], typer.Argument(metavar="KEY...", help="Properties to remove.", show_default=False)],
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Remove table properties in one commit; what icectl interprets falls back to its default.

    A key the table does not have is ignored with a warning (as Java's UpdateProperties);
    reserved keys are refused (exit 2).
    """
    return unset_properties(table, keys, dry_run=dry_run)


def register(app: typer.Typer) -> None:
    """Add the commands to ``app``."""
    properties_app = typer.Typer(
        help="List, set and unset table properties (Spark's ALTER TABLE ... SET / UNSET TBLPROPERTIES).",
        no_args_is_help=True, rich_markup_mode=None)
    command(properties_app, "list", view=True, table=True)(properties_list)
    command(properties_app, "set", table=True)(properties_set)
    command(properties_app, "unset", table=True)(properties_unset)
    app.add_typer(properties_app, name="properties")
