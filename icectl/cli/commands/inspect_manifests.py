"""`icectl inspect VIEW TABLE` for the views that read manifests (manifests, files, entries,
partitions, dvs, tree); the group itself is in :mod:`icectl.cli.commands.inspect`."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.framework import command
from icectl.cli.options import JsonOpt, RefOpt, SnapshotOpt
from icectl.engine import Engine
from icectl.ops.inspect import tree as inspect_v4
from icectl.ops.inspect import views as core
from icectl.results import RowsResult
from icectl.table import Table

MetricsOpt = Annotated[bool, typer.Option(
    "--metrics", help="Also read column metrics (sizes, counts, bounds); slower on large tables.")]


def manifests_view(
    table: Table,
    all_snapshots: Annotated[bool, typer.Option("--all", help="Manifests of every snapshot (Spark's `all_manifests`).")]
    = False,
    snapshot: SnapshotOpt = None,
    ref: RefOpt = None,
    json_output: JsonOpt = False,
) -> RowsResult:
    """Manifests of a snapshot's manifest list (Spark's `manifests`)."""
    return core.manifest_rows(table, snapshot_id=snapshot, ref=ref, all_snapshots=all_snapshots)


def files_view(
    table: Table,
    snapshot: SnapshotOpt = None,
    ref: RefOpt = None,
    content: Annotated[core.ContentFilter, typer.Option(
        "--content", help="Which files: all, data or deletes (position deletes, DVs, equality deletes).")]
    = core.ContentFilter.ALL,
    metrics: MetricsOpt = False,
    json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> RowsResult:
    """Live data, delete and DV files of a snapshot (Spark's `files`)."""
    return core.file_rows(table, snapshot_id=snapshot, ref=ref, content=content, metrics=metrics,
                          engine=engine)


def entries_view(
    table: Table,
    snapshot: SnapshotOpt = None,
    ref: RefOpt = None,
    metrics: MetricsOpt = False,
    json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> RowsResult:
    """Manifest entries with status and sequence numbers, deleted ones included (Spark's `entries`)."""
    return core.entry_rows(table, snapshot_id=snapshot, ref=ref, metrics=metrics, engine=engine)


def partitions_view(
    table: Table, snapshot: SnapshotOpt = None, ref: RefOpt = None, json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> RowsResult:
    """Record and file counts per partition (Spark's `partitions`)."""
    return core.partition_rows(table, snapshot_id=snapshot, ref=ref, engine=engine)


def dvs_view(
    table: Table, snapshot: SnapshotOpt = None, ref: RefOpt = None, json_output: JsonOpt = False
) -> RowsResult:
    """Deletion vectors of a v3 snapshot, each read from its Puffin file and checked."""
    return core.dv_rows(table, snapshot_id=snapshot, ref=ref)


def tree_view(
    table: Table, snapshot: SnapshotOpt = None, ref: RefOpt = None, json_output: JsonOpt = False
) -> RowsResult:
    """The metadata tree of a snapshot: v4 root entries by type and status, leaves with their
    counts, manifest DVs with cardinality (a manifest list's rows for older snapshots)."""
    return inspect_v4.tree_rows(table, snapshot_id=snapshot, ref=ref)


def register(app: typer.Typer) -> None:
    """Add the views that read manifests to ``app`` (the inspect group)."""
    command(app, "manifests", view=True, table=True)(manifests_view)
    command(app, "files", view=True, engine=True, table=True)(files_view)
    command(app, "entries", view=True, engine=True, table=True)(entries_view)
    command(app, "partitions", view=True, engine=True, table=True)(partitions_view)
    command(app, "dvs", view=True, table=True)(dvs_view)
    command(app, "tree", view=True, table=True)(tree_view)
