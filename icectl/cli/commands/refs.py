"""Commands: branch and tag (create, replace, drop, list)."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.framework import command
from icectl.cli.options import DryRunOpt, JsonOpt, long_value
from icectl.ops.snapshots.refs import RefKind, RefRetention, create_ref, drop_ref, list_refs
from icectl.results import Result, RowsResult
from icectl.spec.durations import parse_duration_ms
from icectl.table import Table

BranchName = Annotated[str, typer.Argument(metavar="NAME", help="The branch.", show_default=False)]
TagName = Annotated[str, typer.Argument(metavar="NAME", help="The tag.", show_default=False)]
FromSnapshot = Annotated[int | None, typer.Option(
    "--snapshot", "-s", help="Point at this snapshot id (Spark's AS OF VERSION). Default: the current snapshot.",
    show_default=False, callback=long_value)]
FromRef = Annotated[str | None, typer.Option(
    "--ref", "-r", help="Point at the head of this branch or tag (instead of --snapshot).", show_default=False)]
RetainLast = Annotated[int | None, typer.Option(
    "--retain-last", metavar="N", help="Keep at least the N latest snapshots of the branch when expiring "
    "(min-snapshots-to-keep; Spark's WITH SNAPSHOT RETENTION N SNAPSHOTS). Default: the table's "
    "history.expire.min-snapshots-to-keep.", show_default=False)]
MaxSnapshotAge = Annotated[str | None, typer.Option(
    "--max-snapshot-age", metavar="DURATION", help="Keep the branch's snapshots younger than this (7d, 12h; "
    "max-snapshot-age-ms; Spark's WITH SNAPSHOT RETENTION ... DAYS). Default: the table's "
    "history.expire.max-snapshot-age-ms.", show_default=False)]
MaxRefAge = Annotated[str | None, typer.Option(
    "--max-ref-age", metavar="DURATION", help="Expire-snapshots drops the ref once its snapshot is older than "
    "this (30d; max-ref-age-ms; Spark's RETAIN 30 DAYS). Default: the table's history.expire.max-ref-age-ms "
    "(forever). Never applies to main.", show_default=False)]
IfNotExists = Annotated[bool, typer.Option(
    "--if-not-exists", help="Succeed without changing anything when a branch or tag of that name exists.")]
IfExists = Annotated[bool, typer.Option("--if-exists", help="Succeed when there is nothing of that name to drop.")]


def _retention(retain_last: int | None, max_snapshot_age: str | None, max_ref_age: str | None) -> RefRetention:
    return RefRetention(
        min_snapshots_to_keep=retain_last,
        max_snapshot_age_ms=parse_duration_ms(max_snapshot_age, "--max-snapshot-age")
        if max_snapshot_age is not None else None,
        max_ref_age_ms=parse_duration_ms(max_ref_age, "--max-ref-age") if max_ref_age is not None else None)


def _create(kind: RefKind, table: Table, name: str, snapshot: int | None, ref: str | None, retention: RefRetention,
            *, create: bool, replace: bool, if_not_exists: bool, dry_run: bool) -> Result:
    return create_ref(table, name, kind, snapshot_id=snapshot, ref=ref, retention=retention,
                      create=create, replace=replace, if_not_exists=if_not_exists, dry_run=dry_run)


def _drop(kind: RefKind, table: Table, name: str, if_exists: bool, dry_run: bool) -> Result:
    return drop_ref(table, name, kind, if_exists=if_exists, dry_run=dry_run)


def _list(kind: RefKind, table: Table) -> RowsResult:
    return list_refs(table, kind)


# --------------------------------------------------------------------------- branch


def branch_create(
    table: Table, name: BranchName, snapshot: FromSnapshot = None, ref: FromRef = None,
    retain_last: RetainLast = None, max_snapshot_age: MaxSnapshotAge = None, max_ref_age: MaxRefAge = None,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace the branch when it exists (Spark's CREATE OR REPLACE BRANCH).")] = False,
    if_not_exists: IfNotExists = False, dry_run: DryRunOpt = False, json_output: JsonOpt = False,
) -> Result:
    """Create a branch at a snapshot (default: the current one), with its own retention.

    A branch or tag of that name already there is refused (exit 6), unless --if-not-exists (then
    nothing changes, the retention given neither) or --replace (then it is moved as 'branch
    replace' does). Retention not given is left to the table's history.expire.* properties.
    One commit; a branch another writer creates meanwhile is never overwritten.
    """
    return _create("branch", table, name, snapshot, ref, _retention(retain_last, max_snapshot_age, max_ref_age),
                   create=True, replace=replace, if_not_exists=if_not_exists, dry_run=dry_run)


def branch_replace(
    table: Table, name: BranchName, snapshot: FromSnapshot = None, ref: FromRef = None,
    retain_last: RetainLast = None, max_snapshot_age: MaxSnapshotAge = None, max_ref_age: MaxRefAge = None,
    dry_run: DryRunOpt = False, json_output: JsonOpt = False,
) -> Result:
    """Move an existing branch to a snapshot (default: the current one) (Spark's REPLACE BRANCH).

    The branch keeps its retention except what is given. Replacing main sets the table's current
    snapshot (and adds a snapshot-log entry). A missing branch is exit 3, a tag of that name exit 6.
    If the branch moves meanwhile (another writer commits to it), nothing changes: exit 5.
    """
    return _create("branch", table, name, snapshot, ref, _retention(retain_last, max_snapshot_age, max_ref_age),
                   create=False, replace=True, if_not_exists=False, dry_run=dry_run)


def branch_drop(table: Table, name: BranchName, if_exists: IfExists = False, dry_run: DryRunOpt = False,
                json_output: JsonOpt = False) -> Result:
    """Drop a branch (Spark's DROP BRANCH). Its snapshots stay until expire-snapshots removes them.

    main cannot be dropped (exit 6); a tag is not dropped by 'branch drop' (exit 6); a missing
    branch is exit 3 unless --if-exists.
    """
    return _drop("branch", table, name, if_exists, dry_run)


def branch_list(table: Table, json_output: JsonOpt = False) -> RowsResult:
    """List the branches with the retention that applies to each; values marked (default) come
    from the table's history.expire.* properties (or their defaults)."""
    return _list("branch", table)


# --------------------------------------------------------------------------- tag


def tag_create(
    table: Table, name: TagName, snapshot: FromSnapshot = None, ref: FromRef = None, max_ref_age: MaxRefAge = None,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Replace the tag when it exists (Spark's CREATE OR REPLACE TAG).")] = False,
    if_not_exists: IfNotExists = False, dry_run: DryRunOpt = False, json_output: JsonOpt = False,
) -> Result:
    """Create a tag at a snapshot (default: the current one), kept for --max-ref-age.

    A branch or tag of that name already there is refused (exit 6), unless --if-not-exists (then
    nothing changes) or --replace (then it is moved as 'tag replace' does).
    """
    return _create("tag", table, name, snapshot, ref, _retention(None, None, max_ref_age), create=True,
                   replace=replace, if_not_exists=if_not_exists, dry_run=dry_run)


def tag_replace(
    table: Table, name: TagName, snapshot: FromSnapshot = None, ref: FromRef = None, max_ref_age: MaxRefAge = None,
    dry_run: DryRunOpt = False, json_output: JsonOpt = False,
) -> Result:
    """Move an existing tag to a snapshot (default: the current one) (Spark's REPLACE TAG).

    The tag keeps its --max-ref-age unless one is given. A missing tag is exit 3, a branch of that
    name exit 6.
    """
    return _create("tag", table, name, snapshot, ref, _retention(None, None, max_ref_age), create=False,
                   replace=True, if_not_exists=False, dry_run=dry_run)


def tag_drop(table: Table, name: TagName, if_exists: IfExists = False, dry_run: DryRunOpt = False,
             json_output: JsonOpt = False) -> Result:
    """Drop a tag (Spark's DROP TAG). Its snapshot stays until expire-snapshots removes it.

    A branch is not dropped by 'tag drop' (exit 6); a missing tag is exit 3 unless --if-exists.
    """
    return _drop("tag", table, name, if_exists, dry_run)


def tag_list(table: Table, json_output: JsonOpt = False) -> RowsResult:
    """List the tags with the max-ref-age that applies to each; (default) marks the table's
    history.expire.max-ref-age-ms (or its default, forever)."""
    return _list("tag", table)


def register(app: typer.Typer) -> None:
    """Add the commands to ``app``."""
    branch_app = typer.Typer(
        help="Create, replace, drop and list branches (Spark's ALTER TABLE ... CREATE / REPLACE / DROP BRANCH).",
        no_args_is_help=True, rich_markup_mode=None)
    tag_app = typer.Typer(
        help="Create, replace, drop and list tags (Spark's ALTER TABLE ... CREATE / REPLACE / DROP TAG).",
        no_args_is_help=True, rich_markup_mode=None)
    command(branch_app, "create", table=True)(branch_create)
    command(branch_app, "replace", table=True)(branch_replace)
    command(branch_app, "drop", table=True)(branch_drop)
    command(branch_app, "list", view=True, table=True)(branch_list)
    command(tag_app, "create", table=True)(tag_create)
    command(tag_app, "replace", table=True)(tag_replace)
    command(tag_app, "drop", table=True)(tag_drop)
    command(tag_app, "list", view=True, table=True)(tag_list)
    app.add_typer(branch_app, name="branch")
    app.add_typer(tag_app, name="tag")
