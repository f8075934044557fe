"""`icectl compute-partition-stats TABLE [--snapshot ID]`: write and register the partition statistics file."""

from __future__ import annotations

import typer

from icectl.cli.framework import command
from icectl.cli.options import DryRunOpt, JsonOpt, SnapshotOpt
from icectl.ops.partition_stats import PartitionStatsResult, compute_partition_stats
from icectl.table import Table


def compute_partition_stats_cmd(
    table: Table,
    snapshot: SnapshotOpt = None,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> PartitionStatsResult:
    """Compute the partition statistics file of a snapshot and register it (Spark's compute_partition_stats).

    One row per partition and spec: data records, files and bytes, position and equality delete
    records and files, deletion vectors (v3), and the last snapshot that changed the partition.
    The Parquet file goes to <location>/metadata/partition-stats-<snapshot-id>-<uuid>.parquet and
    is registered in the table metadata's partition-statistics by one commit. A snapshot that has a
    file already keeps it (nothing written); a table without snapshots has nothing to compute
    (exit 0); an unpartitioned table is refused (exit 2); an unknown --snapshot exits 3.
    --dry-run prints the path it would write and the row count.
    """
    return compute_partition_stats(table, snapshot, dry_run=dry_run)


def register(app: typer.Typer) -> None:
    command(app, "compute-partition-stats", table=True)(compute_partition_stats_cmd)
