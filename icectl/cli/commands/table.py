"""Commands: register and drop."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.catalog import looks_like_path, open_catalog, split_identifier
from icectl.cli.framework import command, load_config_and_io
from icectl.cli.options import DryRunOpt, JsonOpt, TableArg
from icectl.errors import CorruptInputError, NotFoundError, UsageError
from icectl.ops.lifecycle.drop import DropResult, drop_table, drop_unreadable_entry
from icectl.ops.lifecycle.register import RegisterResult, register_table
from icectl.table import load_table


def register_cmd(
    identifier: Annotated[str, typer.Argument(
        metavar="[CATALOG.]NAMESPACE.TABLE", help="The name the table gets in the catalog.",
        show_default=False)],
    metadata_file: Annotated[str, typer.Argument(
        metavar="METADATA_FILE", help="The table's metadata file (a *.metadata.json path or URL).",
        show_default=False)],
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> RegisterResult:
    """Register an existing table's metadata file under a name (Spark's register_table).

    The metadata file is checked first (it parses, Iceberg Java would load it, and every branch
    and tag head's manifest list is readable; exit 4 otherwise). An existing name is refused
    (exit 6). SQL and Glue catalogs point at the given file as it is; a REST catalog is asked to
    register it; a file-system warehouse gets a copy as the table directory's v1.metadata.json.
    Glue and REST refuse a namespace that does not exist (exit 3).
    """
    config, io = load_config_and_io()
    if looks_like_path(identifier):
        raise UsageError(f"'{identifier}' is a path: register names a catalog table",
                         hint="icectl register [catalog.]namespace.table METADATA_FILE")
    catalog_name, namespace, name = split_identifier(identifier.strip(), config)
    catalog = open_catalog(config, io, catalog_name)
    return register_table(catalog, (*namespace, name), metadata_file, dry_run=dry_run)


def drop_cmd(
    table: TableArg,
    purge: Annotated[bool, typer.Option(
        "--purge", help="Also delete every file the table reaches (data, deletes, manifests, metadata), "
                        "after the catalog entry is gone; refused when gc.enabled=false.")] = False,
    max_concurrent_deletes: Annotated[int, typer.Option(
        "--max-concurrent-deletes", help="Files deleted in parallel.")] = 8,
    allow_shared: Annotated[list[str] | None, typer.Option(
        "--allow-shared", metavar="TABLE",
        help="With --purge: delete the files this other table (catalog.namespace.table or its folder) "
             "also reaches, which breaks it; repeatable. Without it a purge sharing files is refused.")] = None,
    dry_run: DryRunOpt = False,
    json_output: JsonOpt = False,
) -> DropResult:
    """Drop a table from its catalog; with --purge, delete its files too (Spark's DROP TABLE ... PURGE).

    Asks nothing (safe for cron): --dry-run shows the entry and every file that would go. The
    entry goes only while it still names the metadata read (a concurrent commit: planned
    again). Files are deleted only after the entry is gone and only inside the table location;
    files it reaches elsewhere are kept and listed. A file-system table (Hadoop warehouse or
    table directory) has no entry apart from its files: it needs --purge. A SQL or Glue
    table whose metadata file is damaged or missing can be dropped without --purge (the entry
    only; a warning says so). A purge is refused (exit 6) when another table (a catalog entry
    with the same table-uuid or metadata, or whose location is inside or around this one's)
    reaches a file it would delete, naming that table; --allow-shared TABLE deletes them anyway.
    """
    config, io = load_config_and_io()
    try:
        loaded = load_table(table, config, io)
    except (CorruptInputError, NotFoundError) as e:
        # A SQL or Glue entry whose metadata is damaged or gone can still be dropped (without
        # --purge: nothing says which files are the table's), as Java's catalogs drop unread.
        if purge or looks_like_path(table):
            raise
        catalog_name, namespace, name = split_identifier(table.strip(), config)
        return drop_unreadable_entry(open_catalog(config, io, catalog_name), (*namespace, name), e,
                                     dry_run=dry_run)
    return drop_table(loaded, purge=purge, dry_run=dry_run, max_concurrent_deletes=max_concurrent_deletes,
                      allow_shared=allow_shared or ())


def register(app: typer.Typer) -> None:
    """Add the commands to ``app``."""
    command(app, "register")(register_cmd)
    command(app, "drop")(drop_cmd)


