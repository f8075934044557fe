"""Commands: rollback, set-current, cherrypick, publish, fast-forward (snapshot management)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from icectl.cli.framework import command
from icectl.cli.options import DryRunOpt, JsonOpt, long_value
from icectl.errors import UsageError
from icectl.ops.snapshots import cherrypick, fast_forward, publish, rollback, set_current
from icectl.results import Result
from icectl.spec.durations import parse_point_in_time_ms
from icectl.table import Table

BranchOpt = Annotated[str, typer.Option(
    "--branch", "-b", help="The branch to move (a tag never moves).")]


def rollback_cmd(
    table: Table,
    to_snapshot: Annotated[int | None, typer.Option(
        "--to-snapshot", help="Roll back to this snapshot id; it must be an ancestor of the branch head.",
        metavar="ID", show_default=False, callback=long_value)] = None,
    to_timestamp: Annotated[str | None, typer.Option(
        "--to-timestamp", help="Roll back to the latest ancestor of the branch head committed before this "
                               "point in time: a timestamp (2024-05-01T12:00:00Z, UTC when no zone is "
                               "given), epoch milliseconds, or a duration back from now (2h, 1d).",
        metavar="TS", show_default=False)] = None,
    branch: BranchOpt = "main",
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Roll a branch back to an earlier snapshot of its own history.

    As Spark's rollback_to_snapshot and rollback_to_timestamp (Iceberg's ManageSnapshots
    rollbackTo and rollbackToTime): the target must be an ancestor of the branch head, else
    the command is refused (exit 6; set-current moves a branch anywhere). One commit moves the
    branch; for main it is also a new snapshot-log entry. No snapshot or file is removed: the
    snapshots rolled back stay in the table until expire-snapshots removes them.
    """
    if (to_snapshot is None) == (to_timestamp is None):
        raise UsageError("give one of --to-snapshot ID and --to-timestamp TS")
    ts = (parse_point_in_time_ms(to_timestamp, int(time.time() * 1000), "--to-timestamp")
          if to_timestamp is not None else None)
    return rollback(table, to_snapshot=to_snapshot, to_timestamp_ms=ts, branch=branch,
                    dry_run=dry_run)


def set_current_cmd(
    table: Table,
    snapshot: Annotated[int | None, typer.Option(
        "--snapshot", "-s", help="The snapshot id the branch goes to (any snapshot of the table).",
        metavar="ID", show_default=False, callback=long_value)] = None,
    ref: Annotated[str | None, typer.Option(
        "--ref", "-r", help="Go to the snapshot this branch or tag points at.", metavar="REF",
        show_default=False)] = None,
    branch: BranchOpt = "main",
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Set a branch (default main, the table's current snapshot) to any snapshot of the table.

    As Spark's set_current_snapshot (snapshot_id or ref): unlike rollback, the snapshot need
    not be an ancestor of the branch head. One commit; for main a new snapshot-log entry.
    """
    if (snapshot is None) == (ref is None):
        raise UsageError("give one of --snapshot ID and --ref REF")
    return set_current(table, snapshot, ref=ref, branch=branch, dry_run=dry_run)


def cherrypick_cmd(
    table: Table,
    snapshot_id: Annotated[int, typer.Argument(
        metavar="SNAPSHOT_ID", help="The snapshot whose change main gets.", show_default=False,
        callback=long_value)],
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Apply one snapshot's change to main, as Spark's cherrypick_snapshot.

    When the snapshot's parent is main's head, main fast-forwards to it (no new snapshot).
    Otherwise its change is re-applied on main's head as a new snapshot: an append adds the
    same data files; a dynamic overwrite (INSERT OVERWRITE with replace-partitions) adds and
    deletes the same data files, if no commit since its parent touched the partitions it
    replaces. The summary records source-snapshot-id (and published-wap-id for a staged
    write-audit-publish snapshot). Refused (exit 6) as Iceberg refuses: a snapshot main already
    has or already picked, a wap id already published, an overwrite not based on main's
    history or whose partitions changed, any other operation that is not a fast-forward. On a
    v4 table an append is re-applied in a new root (root-level entries, or new leaves past
    write.v4.root-max-added-files); not yet done there (refused, exit 6): a dynamic overwrite,
    and a new snapshot while main is at a snapshot of before the upgrade to v4.
    """
    return cherrypick(table, snapshot_id, dry_run=dry_run)


def publish_cmd(
    table: Table,
    wap_id: Annotated[str, typer.Argument(
        metavar="WAP_ID", help="The write-audit-publish id of the staged write.", show_default=False)],
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Publish a staged write-audit-publish write: cherry-pick the snapshot whose summary has wap.id.

    As Spark's publish_changes: staged snapshots come from writes with write.wap.enabled=true
    and spark.wap.id set; the first snapshot with that wap.id is cherry-picked into main (see
    cherrypick). An unknown id is exit 3, an id already published exit 6.
    """
    return publish(table, wap_id, dry_run=dry_run)


def fast_forward_cmd(
    table: Table,
    branch: Annotated[str, typer.Argument(
        metavar="BRANCH", help="The branch to move forward.", show_default=False)],
    to: Annotated[str, typer.Option(
        "--to", help="The branch or tag to move it to.", metavar="REF", show_default=False)],
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Fast-forward a branch to another branch or tag, as Spark's fast_forward.

    The branch head must be an ancestor of the target's snapshot (else exit 6). A branch the
    table does not have yet is created at the target's snapshot, as Iceberg does. One commit;
    moving main is also a new snapshot-log entry.
    """
    return fast_forward(table, branch, to, dry_run=dry_run)


def register(app: typer.Typer) -> None:
    command(app, "rollback", table=True)(rollback_cmd)
    command(app, "set-current", table=True)(set_current_cmd)
    command(app, "cherrypick", table=True)(cherrypick_cmd)
    command(app, "publish", table=True)(publish_cmd)
    command(app, "fast-forward", table=True)(fast_forward_cmd)




