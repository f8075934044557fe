"""`icectl namespace create|list`."""

from __future__ import annotations

from typing import Annotated

import typer

from icectl.catalog import open_catalog
from icectl.cli.framework import command, load_config_and_io
from icectl.cli.options import CatalogOpt, JsonOpt
from icectl.ops.create.result import CatalogMeta, NamespaceCreateResult
from icectl.ops.create.table import parse_properties
from icectl.results import RowsResult


def create_namespace(
    namespace: Annotated[str, typer.Argument(help="Dotted namespace, e.g. sales or sales.eu.", show_default=False)],
    catalog: CatalogOpt = None,
    prop: Annotated[list[str] | None, typer.Option(
        "--property", help="Namespace property key=value (SQL, REST and Glue catalogs; repeatable).",
        show_default=False)] = None,
    exist_ok: Annotated[bool, typer.Option(
        "--exist-ok", help="Succeed when the namespace exists already (it is left as it is).")] = False,
    json_output: JsonOpt = False,
) -> NamespaceCreateResult:
    """Create a namespace (a directory in a file-system warehouse, a row in a SQL catalog, a namespace
    of a REST catalog, a Glue database).

    Creates the warehouse (or the SQLite catalog) too when it does not exist yet. An existing
    namespace is refused (exit 6), unless --exist-ok: then nothing changes and the command succeeds.
    """
    config, io = load_config_and_io()
    cat = open_catalog(config, io, catalog)
    created = cat.create_namespace(tuple(namespace.split(".")), parse_properties(prop or []) or None,
                                   exist_ok=exist_ok)
    said = "created namespace" if created else "namespace already exists:"
    return NamespaceCreateResult(message=f"{said} {namespace} in catalog {cat.name}", namespace=namespace,
                                 catalog=cat.name, created=created)


def list_namespaces(
    parent: Annotated[str | None, typer.Argument(help="List the children of this namespace.",
                                                 show_default=False)] = None,
    catalog: CatalogOpt = None,
    json_output: JsonOpt = False,
) -> RowsResult:
    """List namespaces (top level, or under PARENT)."""
    config, io = load_config_and_io()
    cat = open_catalog(config, io, catalog)
    rows = [{"namespace": ".".join(n)} for n in cat.list_namespaces(tuple(parent.split(".")) if parent else ())]
    return RowsResult("namespaces", f"Namespaces in catalog {cat.name}", ["namespace"], rows,
                      CatalogMeta(cat.name, cat.warehouse))


def register(app: typer.Typer) -> None:
    namespace_app = typer.Typer(help="Create and list namespaces of a catalog.", no_args_is_help=True,
                                rich_markup_mode=None)
    command(namespace_app, "create")(create_namespace)
    command(namespace_app, "list", view=True)(list_namespaces)
    app.add_typer(namespace_app, name="namespace")
