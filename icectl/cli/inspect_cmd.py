"""`icectl inspect VIEW TABLE`: read-only views named like Spark's Iceberg metadata tables."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.framework import command, load_config_and_io
from icectl.cli.options import JsonOpt, RefOpt, SnapshotOpt, TableArg
from icectl.ops import inspect as core
from icectl.ops import inspect_v4
from icectl.ops.results import TableOverview
from icectl.results import RowsResult
from icectl.table import Table, load_table

inspect_app = typer.Typer(
    help="Show a table's metadata: overview, schema, snapshots, manifests, files, deletion vectors.",
    no_args_is_help=True, rich_markup_mode=None)

MetricsOpt = Annotated[bool, typer.Option(
    "--metrics", help="Also read column metrics (sizes, counts, bounds); slower on large tables.")]


def _load(address: str) -> Table:
    config, io = load_config_and_io()
    return load_table(address, config, io)


@command(inspect_app, "table")
def table_view(table: TableArg, json_output: JsonOpt = False) -> TableOverview:
    """Overview: format, location, uuid, current snapshot, schema, spec, sort order, properties, totals."""
    return core.table_overview(_load(table))


@command(inspect_app, "schema")
def schema_view(
    table: TableArg,
    schema_id: Annotated[int | None, typer.Option("--schema-id", help="Show this schema instead of the current one.",
                                                  show_default=False)] = None,
    json_output: JsonOpt = False,
) -> RowsResult:
    """Columns of the current (or a given) schema with field ids, types and v3 defaults."""
    return core.schema_rows(_load(table), schema_id)


@command(inspect_app, "snapshots")
def snapshots_view(table: TableArg, json_output: JsonOpt = False) -> RowsResult:
    """Every snapshot (Spark's `snapshots` metadata table)."""
    return core.snapshot_rows(_load(table))


@command(inspect_app, "history")
def history_view(table: TableArg, json_output: JsonOpt = False) -> RowsResult:
    """The snapshot log: when each snapshot became current (Spark's `history`)."""
    return core.history_rows(_load(table))


@command(inspect_app, "refs")
def refs_view(table: TableArg, json_output: JsonOpt = False) -> RowsResult:
    """Branches and tags with their retention settings (Spark's `refs`)."""
    return core.ref_rows(_load(table))


@command(inspect_app, "metadata-log")
def metadata_log_view(table: TableArg, json_output: JsonOpt = False) -> RowsResult:
    """Previous metadata files (Spark's `metadata_log_entries`)."""
    return core.metadata_log_rows(_load(table))


@command(inspect_app, "manifests")
def manifests_view(
    table: TableArg,
    all_snapshots: Annotated[bool, typer.Option("--all", help="Manifests of every snapshot (Spark's `all_manifests`).")]
    = False,
    snapshot: SnapshotOpt = None,
    ref: RefOpt = None,
    json_output: JsonOpt = False,
) -> RowsResult:
    """Manifests of a snapshot's manifest list (Spark's `manifests`)."""
    return core.manifest_rows(_load(table), snapshot_id=snapshot, ref=ref, all_snapshots=all_snapshots)


@command(inspect_app, "files")
def files_view(
    table: TableArg,
    snapshot: SnapshotOpt = None,
    ref: RefOpt = None,
    content: Annotated[core.ContentFilter, typer.Option(
        "--content", help="Which files: all, data or deletes (position deletes, DVs, equality deletes).")]
    = core.ContentFilter.ALL,
    metrics: MetricsOpt = False,
    json_output: JsonOpt = False,
) -> RowsResult:
    """Live data, delete and DV files of a snapshot (Spark's `files`)."""
    return core.file_rows(_load(table), snapshot_id=snapshot, ref=ref, content=content, metrics=metrics)


@command(inspect_app, "entries")
def entries_view(
    table: TableArg,
    snapshot: SnapshotOpt = None,
    ref: RefOpt = None,
    metrics: MetricsOpt = False,
    json_output: JsonOpt = False,
) -> RowsResult:
    """Manifest entries with status and sequence numbers, deleted ones included (Spark's `entries`)."""
    return core.entry_rows(_load(table), snapshot_id=snapshot, ref=ref, metrics=metrics)


@command(inspect_app, "partitions")
def partitions_view(
    table: TableArg, snapshot: SnapshotOpt = None, ref: RefOpt = None, json_output: JsonOpt = False
) -> RowsResult:
    """Record and file counts per partition (Spark's `partitions`)."""
    return core.partition_rows(_load(table), snapshot_id=snapshot, ref=ref)


@command(inspect_app, "dvs")
def dvs_view(
    table: TableArg, snapshot: SnapshotOpt = None, ref: RefOpt = None, json_output: JsonOpt = False
) -> RowsResult:
    """Deletion vectors of a v3 snapshot, each read from its Puffin file and checked."""
    return core.dv_rows(_load(table), snapshot_id=snapshot, ref=ref)


@command(inspect_app, "tree")
def tree_view(
    table: TableArg, snapshot: SnapshotOpt = None, ref: RefOpt = None, json_output: JsonOpt = False
) -> RowsResult:
    """The metadata tree of a snapshot: v4 root entries by type and status, leaves with their
    counts, manifest DVs with cardinality (a manifest list's rows for older snapshots)."""
    return inspect_v4.tree_rows(_load(table), snapshot_id=snapshot, ref=ref)


def register(app: typer.Typer) -> None:
    app.add_typer(inspect_app, name="inspect")
