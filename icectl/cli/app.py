"""The icectl command-line app: the root command and its global options.

The root knows its commands through :mod:`icectl.cli.registry` and imports a command's module
only when that command is used, so ``icectl --help`` and ``--version`` start in a few hundredths
of a second (tests/cli/test_startup.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from icectl import __version__
from icectl.cli.registry import RootGroup
from icectl.cli.state import state
from icectl.errors import EXIT_CODE_TABLE

EXIT_CODES_HELP = "Exit codes: " + ", ".join(f"{code} {name}" for code, name, _ in EXIT_CODE_TABLE) + "."

app = typer.Typer(
    name="icectl",
    cls=RootGroup,
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
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", help="Neither read nor write the manifest cache in this run.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    state.debug = debug
    state.config_path = config
    state.no_cache = no_cache


def main() -> None:
    os.environ.setdefault("PYTHONIOENCODING", "utf-8")
    if os.environ.get(COMPLETE_VAR):
        enable_completion()
    app(prog_name="icectl")


COMPLETE_VAR = "_ICECTL_COMPLETE"  # click's completion protocol: the shell scripts in completions/ call back


def enable_completion() -> None:
    """Register typer's shell classes for click's completion protocol (add_completion=False leaves
    them out); only when a shell asks, since importing them costs start-up time."""
    import typer.completion

    typer.completion.completion_init()
