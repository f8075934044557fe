"""Parameter values that need no conversion skip typer's pydantic conversion (and pydantic's import).

typer >= 0.26 converts every parameter value through a pydantic ``TypeAdapter``, built on first
use; importing pydantic for it costs 30-60 ms, more than the rest of ``icectl inspect table``. Yet
an option left unset (``None``) needs no conversion, text for a ``str`` parameter is returned as it
is (typer's ``_parse_cli_str`` is ``str(value)``), a value already of the parameter's type (a
default, a flag's bool) is kept, and a path's checks are typer's own
``coerce_cli_path``, which needs pydantic only to make the ``Path``. :func:`skip_needless_coercion`
gives each parameter of a command a converter that does just that for those values and hands
every other value to typer's own converter, built (and pydantic imported) only then. With a typer
without this machinery it does nothing; tests/cli/test_startup.py checks both the conversions
and that the light commands never import pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer import _click

try:
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:  # an older typer converts with click's own types: nothing to skip
    RuntimeParam = None  # type: ignore[assignment,misc]

if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _NoNeedlessCoercion(RuntimeParam):
        def _coerce_value(self, value: Any, param: Any, ctx: _click.Context) -> Any:
            # (None never gets here: RuntimeParam.coerce returns it before converting.)
            if type(value) is self.annotation:
                # Already what the parameter holds: a default (an enum member, a number) or a flag's
                # bool; what the command line gives arrives as text and is converted below.
                return value
            if isinstance(value, str) and self.parameter_info.parser is None:
                if self.annotation is str:
                    return value
                if self.annotation is Path and self.parameter_info.path_type is None:
                    # What typer's path adapter does, the Path made here rather than by pydantic.
                    return coerce_cli_path(Path(value), self.parameter_info, path_type=Path, param=param, ctx=ctx)
            real = build_runtime_param(param.type_descriptor)
            param._runtime_param = real  # typer's converter from now on
            return real._coerce_value(value, param=param, ctx=ctx)


def skip_needless_coercion(commands: Iterable[_click.Command]) -> None:
    """Install the converter above on every parameter of ``commands`` and their subcommands,
    the help option included (click makes that one when a context first asks for it)."""
    if RuntimeParam is None:
        return
    for command in commands:
        for param in command.params:
            _install(param)
        make_help_option = command.get_help_option

        def get_help_option(ctx: _click.Context, make: Any = make_help_option) -> Any:
            option = make(ctx)
            if option is not None:
                _install(option)
            return option

        command.get_help_option = get_help_option  # type: ignore[method-assign]
        subcommands = getattr(command, "commands", None)
        if isinstance(subcommands, dict):  # not a lazy group's: it installs this as it loads them
            skip_needless_coercion(subcommands.values())


def _install(param: _click.Parameter) -> None:
    desc = getattr(param, "type_descriptor", None)
    if desc is None or getattr(param, "_runtime_param", "absent") is not None:
        return  # not a typer parameter, or one whose converter typer built already
    try:
        converter = _NoNeedlessCoercion(parameter_info=desc.parameter_info, annotation=desc.annotation)
    except (TypeError, AttributeError):  # a typer whose RuntimeParam changed shape: keep typer's own
        return
    param._runtime_param = converter  # type: ignore[attr-defined]
