"""`icectl list`: tables and namespaces of a catalog."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.catalog import open_catalog, walk_tables
from icectl.cli.framework import command, load_config_and_io
from icectl.cli.options import CatalogOpt, JsonOpt
from icectl.ops.create.result import CatalogMeta
from icectl.results import RowsResult


def list_tables(
    namespace: Annotated[str | None, typer.Argument(
        help="Namespace (dotted) whose tables to list; omit with --all for the whole catalog.",
        show_default=False)] = None,
    all_tables: Annotated[bool, typer.Option("--all", "-a", help="Every table in every namespace.")] = False,
    catalog: CatalogOpt = None,
    json_output: JsonOpt = False,
) -> RowsResult:
    """List the tables of a namespace, or of the whole catalog with --all."""
    config, io = load_config_and_io()
    cat = open_catalog(config, io, catalog)
    ns = tuple(namespace.split(".")) if namespace else ()
    if ns and not all_tables:
        names = cat.list_tables(ns)
    elif all_tables:
        names = walk_tables(cat, ns)
    else:
        rows = [{"namespace": ".".join(n)} for n in cat.list_namespaces(())]
        return RowsResult("namespaces", f"Namespaces in catalog {cat.name}", ["namespace"], rows,
                          CatalogMeta(cat.name, cat.warehouse))
    rows = [{"namespace": ".".join(t[:-1]), "table": t[-1], "identifier": ".".join(t)} for t in names]
    return RowsResult("tables", f"Tables in catalog {cat.name}", ["namespace", "table"], rows,
                      CatalogMeta(cat.name, cat.warehouse))


def register(app: typer.Typer) -> None:
    command(app, "list", view=True)(list_tables)
