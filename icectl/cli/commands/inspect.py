"""`icectl inspect VIEW TABLE`: read-only views named like Spark's Iceberg metadata tables.

The group lists its views through :mod:`icectl.cli.registry`; this module holds the views of the
metadata file alone (light: ``inspect table`` starts fast), :mod:`icectl.cli.commands.inspect_manifests`
those that read manifests.
"""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.framework import command
from icectl.cli.options import JsonOpt
from icectl.cli.registry import InspectGroup
from icectl.ops.inspect.metadata import (
    history_rows,
    metadata_log_rows,
    ref_rows,
    schema_rows,
    snapshot_rows,
    table_overview,
)
from icectl.ops.inspect.result import TableOverview
from icectl.results import RowsResult
from icectl.table import Table

inspect_app = typer.Typer(
    cls=InspectGroup,
    help="Show a table's metadata: overview, schema, snapshots, manifests, files, deletion vectors.",
    no_args_is_help=True, rich_markup_mode=None)


def table_view(table: Table, json_output: JsonOpt = False) -> TableOverview:
    """Overview: format, location, uuid, current snapshot, schema, spec, sort order, properties, totals."""
    return table_overview(table)


def schema_view(
    table: Table,
    schema_id: Annotated[int | None, typer.Option("--schema-id", help="Show this schema instead of the current one.",
                                                  show_default=False)] = None,
    json_output: JsonOpt = False,
) -> RowsResult:
    """Columns of the current (or a given) schema with field ids, types and v3 defaults."""
    return schema_rows(table, schema_id)


def snapshots_view(table: Table, json_output: JsonOpt = False) -> RowsResult:
    """Every snapshot (Spark's `snapshots` metadata table)."""
    return snapshot_rows(table)


def history_view(table: Table, json_output: JsonOpt = False) -> RowsResult:
    """The snapshot log: when each snapshot became current (Spark's `history`)."""
    return history_rows(table)


def refs_view(table: Table, json_output: JsonOpt = False) -> RowsResult:
    """Branches and tags with their retention settings (Spark's `refs`)."""
    return ref_rows(table)


def metadata_log_view(table: Table, json_output: JsonOpt = False) -> RowsResult:
    """Previous metadata files (Spark's `metadata_log_entries`)."""
    return metadata_log_rows(table)


def register_views(app: typer.Typer) -> None:
    """Add the views of the metadata file alone to ``app`` (the inspect group)."""
    command(app, "table", view="document", table=True)(table_view)
    command(app, "schema", view=True, table=True)(schema_view)
    command(app, "snapshots", view=True, table=True)(snapshots_view)
    command(app, "history", view=True, table=True)(history_view)
    command(app, "refs", view=True, table=True)(refs_view)
    command(app, "metadata-log", view=True, table=True)(metadata_log_view)


def register(app: typer.Typer) -> None:
    app.add_typer(inspect_app, name="inspect")
