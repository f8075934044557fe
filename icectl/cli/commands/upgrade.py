"""`icectl upgrade TABLE --to N`: raise a table's format version (2, 3, or 4 as the Iceberg spec merged it)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from icectl.cli.framework import command
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.errors import RefusedError
from icectl.ops.lifecycle.upgrade import V4, V4_WARNING, upgrade
from icectl.results import Result
from icectl.table import Table


def upgrade_cmd(
    table: Table,
    to: Annotated[int, typer.Option(
        "--to", help="Target format version: 2, 3, or 4 (the merged spec: root manifests).",
        show_default=False)],
    yes: Annotated[bool, typer.Option(
        "--yes", "-y", help="Upgrade to v4 without asking (for scripts).")] = False,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Upgrade a table's format version in one atomic commit.

    --to 2 and --to 3 follow the spec's Appendix E (v3 row lineage starts with the next commit).
    --to 4 gives every branch head a root manifest referencing its manifests; the new roots are
    checked to plan exactly the heads' files before anything is written. Released engines
    (Spark with Iceberg 1.10) cannot read a v4 table: on a terminal icectl asks first, and
    without a terminal it refuses (exit 6) unless --yes is given.
    """
    t = table
    if to == V4 and t.metadata.format_version < V4 and not dry_run and not yes:
        if not sys.stdin.isatty():
            raise RefusedError(f"not upgrading {t.identifier} to v4: {V4_WARNING}",
                               hint="pass --yes to upgrade anyway, or --dry-run to see the plan")
        if not typer.confirm(f"Warning: {V4_WARNING}.\nUpgrade {t.identifier} to v4?", default=False,
                             err=True):
            raise RefusedError(f"not upgrading {t.identifier} to v4: not confirmed; nothing changed")
    return upgrade(t, to, dry_run=dry_run)


def register(app: typer.Typer) -> None:
    command(app, "upgrade", table=True)(upgrade_cmd)
