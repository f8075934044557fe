"""The icectl command-line app: the root command and its global options."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from icectl import __version__
from icectl.cli import (
    catalog_cmd,
    inspect_cmd,
    maintenance_cmd,
    namespace_cmd,
    orphan_cmd,
    properties_cmd,
    refs_cmd,
    remove_files_cmd,
    snapshot_cmd,
    table_cmd,
    upgrade_cmd,
    validate_cmd,
    write_cmd,
)
from icectl.cli.framework import state
from icectl.errors import EXIT_CODE_TABLE

EXIT_CODES_HELP = "Exit codes: " + ", ".join(f"{code} {name}" for code, name, _ in EXIT_CODE_TABLE) + "."

app = typer.Typer(
    name="icectl",
    help="Administer Apache Iceberg tables: inspect, create, expire, remove orphan files, compact, "
         "validate, upgrade; roll back, branch, tag, set properties, register and drop.\n\n"
         + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=False,  # static completions are shipped in completions/ (see scripts/gen_docs.py)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"icectl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    debug: Annotated[bool, typer.Option("--debug", envvar="ICECTL_DEBUG",
                                        help="Show tracebacks for errors.")] = False,
    config: Annotated[Path | None, typer.Option("--config", envvar="ICECTL_CONFIG", show_default=False,
                                                help="Config file (catalogs, storage).")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    state.debug = debug
    state.config_path = config


inspect_cmd.register(app)
catalog_cmd.register(app)
namespace_cmd.register(app)
write_cmd.register_create(app)
write_cmd.register(app)
maintenance_cmd.register(app)
upgrade_cmd.register(app)
remove_files_cmd.register(app)
validate_cmd.register(app)
snapshot_cmd.register(app)
refs_cmd.register(app)
properties_cmd.register(app)
orphan_cmd.register(app)
table_cmd.register(app)


def main() -> None:
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    app(prog_name="icectl")
