"""Commands: remove-orphan-files."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from icectl.cli.framework import TableTargets, command
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.engine import Engine
from icectl.errors import UsageError
from icectl.ops.orphans import parse_equal_map, remove_orphan_files
from icectl.ops.orphans.result import RemoveOrphanFilesResult
from icectl.results import MultiResult, Result
from icectl.spec.durations import parse_point_in_time_ms
from icectl.table import Table


def remove_orphan_files_cmd(
    tables: TableTargets,
    older_than: Annotated[str, typer.Option(
        "--older-than", help="Only files last modified before this: a duration back from now (3d, 36h) or "
                             "a timestamp (ISO or epoch ms). Younger files may belong to a commit in flight.")]
    = "3d",
    allow_recent: Annotated[bool, typer.Option(
        "--allow-recent", help="Allow --older-than less than 24 hours ago (only when no other writer runs).")]
    = False,
    location: Annotated[str | None, typer.Option(
        "--location", help="The folder to clean (default: the table location); must lie inside the table.",
        show_default=False)] = None,
    prefix_mismatch_mode: Annotated[str, typer.Option(
        "--prefix-mismatch-mode",
        help="A listed file the metadata names with another scheme or authority: error (delete nothing), "
             "ignore (keep it) or delete.")] = "error",
    equal_schemes: Annotated[str | None, typer.Option(
        "--equal-schemes", help="Schemes that name the same storage, FROM=TO,... (added to s3a=s3,s3n=s3).",
        show_default=False)] = None,
    equal_authorities: Annotated[str | None, typer.Option(
        "--equal-authorities", help="Authorities (buckets, hosts) that are the same, FROM=TO,...",
        show_default=False)] = None,
    max_deletes: Annotated[int | None, typer.Option(
        "--max-deletes", help="Refuse a run that would delete more files than this.", show_default=False)]
    = None,
    max_concurrent_deletes: Annotated[int, typer.Option(
        "--max-concurrent-deletes", help="Files deleted in parallel.")] = 8,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
    engine: Engine | None = None,
) -> Result | MultiResult:
    """Delete the files under the table location that no snapshot or metadata file of the table reaches.

    As Iceberg's remove_orphan_files: files every snapshot reaches, statistics files, the
    metadata files of the metadata log and version-hint.text are kept, and so are hidden
    names (_x, .x) except partition folders, and every file modified at or after the cutoff.
    A file the metadata names with another scheme or authority stops the run (see
    --prefix-mismatch-mode). Only files inside the table location are deleted, never
    through a symbolic link. With --all, every table of the catalog (the nightly job after
    expire-snapshots).
    """
    now = int(time.time() * 1000)
    cutoff = parse_point_in_time_ms(older_than, now, "--older-than")
    if max_deletes is not None and max_deletes < 0:
        raise UsageError("--max-deletes must be 0 or more")
    schemes = parse_equal_map(equal_schemes, "--equal-schemes")
    authorities = parse_equal_map(equal_authorities, "--equal-authorities")

    def run(t: Table) -> Result:
        return remove_orphan_files(
            t, older_than_ms=cutoff, location=location, prefix_mismatch_mode=prefix_mismatch_mode.strip().lower(),
            equal_schemes=schemes, equal_authorities=authorities, max_deletes=max_deletes,
            max_concurrent_deletes=max_concurrent_deletes, dry_run=dry_run, allow_recent=allow_recent, now_ms=now,
            engine=engine)

    if tables.all_tables and location is not None:
        raise UsageError("--location names one table's folder; it cannot go with --all")
    return tables.run(RemoveOrphanFilesResult, run)


def register(app: typer.Typer) -> None:
    """Add the commands to ``app``."""
    command(app, "remove-orphan-files", engine="deletes", each_table=True)(remove_orphan_files_cmd)

