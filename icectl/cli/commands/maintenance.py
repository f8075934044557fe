"""Maintenance commands: `icectl expire-snapshots` (the nightly retention job) and `icectl compact`,
for one table or every table of a catalog or namespace (``--all``)."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from icectl.cli.framework import TableTargets, command
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.engine import Engine
from icectl.errors import UsageError
from icectl.ops.compact.manifests import compact
from icectl.ops.compact.plan import CompactOptions, parse_size
from icectl.ops.compact.result import CompactResult
from icectl.ops.expire import ExpirePolicy, expire_snapshots, parse_older_than
from icectl.ops.expire.result import ExpireResult
from icectl.results import MultiResult, Result


def expire_cmd(
    tables: TableTargets,
    older_than: Annotated[str | None, typer.Option(
        "--older-than", help="Expire snapshots older than this: a duration (7d, 12h) or a timestamp. "
                             "Default: history.expire.max-snapshot-age-ms (5 days).", show_default=False)]
    = None,
    retain_last: Annotated[int | None, typer.Option(
        "--retain-last", help="Keep at least this many snapshots of each branch. "
                              "Default: history.expire.min-snapshots-to-keep (1).", show_default=False)] = None,
    snapshot_id: Annotated[list[int] | None, typer.Option(
        "--snapshot-id", help="Also expire this snapshot (repeatable).", show_default=False)] = None,
    clean_expired_metadata: Annotated[bool, typer.Option(
        "--clean-expired-metadata", help="Also drop schemas and partition specs no retained snapshot uses.")]
    = False,
    max_deletes: Annotated[int | None, typer.Option(
        "--max-deletes", help="Refuse a run that would delete more files than this.", show_default=False)]
    = None,
    allow_external_deletes: Annotated[bool, typer.Option(
        "--allow-external-deletes",
        help="Also delete files outside the table location (kept and reported by default).")] = False,
    max_concurrent_deletes: Annotated[int, typer.Option(
        "--max-concurrent-deletes", help="Files deleted in parallel.")] = 8,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> Result | MultiResult:
    """Expire snapshots by retention policy, then delete the files no retained snapshot reaches.

    Policy: table properties history.expire.* and each ref's own retention, overridden by
    --older-than and --retain-last. Snapshots no branch or tag reaches are kept while younger
    than the cutoff, as Iceberg Java does. Files are deleted only after the commit succeeded.
    """
    if max_deletes is not None and max_deletes < 0:  # else every run, even an empty one, is refused
        raise UsageError("--max-deletes must be 0 or more")
    now = int(time.time() * 1000)
    policy = ExpirePolicy(older_than_ms=parse_older_than(older_than, now) if older_than else None,
                          retain_last=retain_last, snapshot_ids=tuple(snapshot_id or ()),
                          clean_expired_metadata=clean_expired_metadata)
    kw = {"dry_run": dry_run, "max_deletes": max_deletes, "allow_external_deletes": allow_external_deletes,
          "max_concurrent_deletes": max_concurrent_deletes, "now_ms": now, "engine": engine}
    if tables.all_tables and policy.snapshot_ids:
        raise UsageError("--snapshot-id names one table's snapshots; it cannot go with --all")
    return tables.run(ExpireResult, lambda t: expire_snapshots(t, policy, **kw))  # type: ignore[arg-type]


def compact_cmd(
    tables: TableTargets,
    spec_id: Annotated[int | None, typer.Option(
        "--spec-id", help="Only manifests of this partition spec (default: every spec, each apart).",
        show_default=False)] = None,
    content: Annotated[str, typer.Option(
        "--content", help="Which manifests: data, deletes or all.")] = "all",
    min_manifests: Annotated[int | None, typer.Option(
        "--min-manifests", help="Only rewrite a (spec, content) group that has at least N manifests.",
        metavar="N", show_default=False)] = None,
    target_size: Annotated[str | None, typer.Option(
        "--target-size", help="Target manifest size (8388608, 8MiB, 512KiB). "
                              "Default: commit.manifest.target-size-bytes (8 MiB).", show_default=False)] = None,
    sort_by: Annotated[str | None, typer.Option(
        "--sort-by", help="Partition fields to cluster entries by first, comma-separated "
                          "(default: the partition tuple in order).", show_default=False)] = None,
    branch: Annotated[str, typer.Option("--branch", help="The branch whose head is compacted.")] = "main",
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> Result | MultiResult:
    """Rewrite and merge manifests (data and delete manifests) into few, clustered ones.

    Groups the branch head's manifests by partition spec and content, clusters live entries
    by partition value and rolls them at the target size; a group that would not improve is
    left alone. One 'replace' commit; every file, sequence number and row id stays as it was.
    Replaced manifests stay on disk for older snapshots until expire-snapshots removes them.
    On v4 tables the leaves of the root: root-level files are flushed into leaves, manifest
    DVs applied and DELETED root entries dropped.
    """
    options = CompactOptions(
        spec_id=spec_id, content=content, min_manifests=min_manifests,
        target_size=parse_size(target_size) if target_size is not None else None,
        sort_by=tuple(s.strip() for s in sort_by.split(",") if s.strip()) if sort_by else (), branch=branch)
    options.check()
    return tables.run(CompactResult, lambda t: compact(t, options, dry_run=dry_run, engine=engine))


def register(app: typer.Typer) -> None:
    command(app, "expire-snapshots", engine="deletes", each_table=True)(expire_cmd)
    command(app, "compact", engine=True, each_table=True)(compact_cmd)

