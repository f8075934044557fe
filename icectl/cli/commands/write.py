"""Commands that change tables: `icectl add-files` (and `create`, `namespace`)."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.cli.framework import command, load_config_and_io
from icectl.cli.options import DryRunOpt, JsonOpt
from icectl.ops.create.result import CreateResult
from icectl.ops.create.table import SchemaSource, create, parse_properties
from icectl.ops.files.add_files import add_files
from icectl.results import Result
from icectl.table import Table


def add_files_cmd(
    table: Table,
    paths: Annotated[list[str], typer.Argument(
        metavar="PATH...", help="Parquet files, or directories whose *.parquet files to add.",
        show_default=False)],
    branch: Annotated[str, typer.Option(
        "--branch", "-b", help="Branch to append to (it must exist, unless --create-branch).")] = "main",
    create_branch: Annotated[bool, typer.Option(
        "--create-branch", help="Create the --branch when missing, starting at main's head.")] = False,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> Result:
    """Register existing Parquet files in a table as one append snapshot.

    Record counts and column metrics come from each file's footer; partition values from its
    rows through the table's transforms. A file spanning partitions, or already in the table,
    is refused. Like Spark's add_files, the same commit sets the table's name mapping
    (schema.name-mapping.default), created when missing and extended to new columns, so
    readers match the columns of files without field ids by name, not by position.
    """
    return add_files(table, paths, branch=branch, create_branch=create_branch,
                     dry_run=dry_run)


def create_cmd(
    table: Annotated[str, typer.Argument(
        metavar="TABLE", help="[catalog.]namespace.table, or a directory for a file-system table.",
        show_default=False)],
    schema: Annotated[str | None, typer.Option(
        "--schema", help="Columns as DDL: 'id long not null, ts timestamptz, tags list<string>'.",
        show_default=False)] = None,
    schema_file: Annotated[str | None, typer.Option(
        "--schema-file", help="A JSON schema (Iceberg spec, Appendix C).", show_default=False)] = None,
    like: Annotated[str | None, typer.Option(
        "--like", help="Take the schema from this Parquet file.", show_default=False)] = None,
    partition_by: Annotated[str, typer.Option(
        "--partition-by", "-p", help="Partition spec: 'days(ts), bucket(16, id), truncate(4, name)'.")] = "",
    sort_by: Annotated[str, typer.Option(
        "--sort-by", help="Sort order: 'id desc nulls last, days(ts)'.")] = "",
    prop: Annotated[list[str] | None, typer.Option(
        "--property", help="Table property key=value (repeatable).", show_default=False)] = None,
    format_version: Annotated[int | None, typer.Option(
        "--format-version", help="Table format version 1, 2 or 3 (default 2, as Spark).",
        show_default=False)] = None,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> CreateResult:
    """Create an empty Iceberg table (metadata as Iceberg Java would write it).

    In --schema, 'timestamp' is Iceberg's timestamp WITHOUT time zone, not Spark SQL's
    TIMESTAMP (which is timestamptz): write timestamptz (or timestamp_ltz) for instants in
    time, timestamp_ntz for the type without zone. Plain 'timestamp' gets a warning on stderr.
    """
    config, io = load_config_and_io()
    return create(table, SchemaSource(schema, schema_file, like), config=config, io=io,
                  partition_by=partition_by, sort_by=sort_by, properties=parse_properties(prop or []),
                  format_version=format_version, dry_run=dry_run)


def register(app: typer.Typer) -> None:
    command(app, "add-files", table=True)(add_files_cmd)


def register_create(app: typer.Typer) -> None:
    command(app, "create")(create_cmd)
