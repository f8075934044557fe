"""What every command shares: global state, the result-rendering wrapper and the error boundary."""

from __future__ import annotations

import functools
import inspect
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer

from icectl.cli.render import print_error, render
from icectl.config import Config, load_config
from icectl.errors import ExitCode, IcectlError
from icectl.storage import FileIO

F = TypeVar("F", bound=Callable[..., Any])



class _State:
    """Global options of this invocation (set by the root callback)."""

    debug: bool = False
    config_path: Path | None = None


state = _State()

def command(group: typer.Typer, name: str, **kwargs: Any) -> Callable[[F], F]:
    """Register a command whose function returns a result; render it and map errors to exit codes.

    Commands never print or exit themselves: this wrapper is the only place that does.
    """

    def decorator(fn: F) -> F:
        as_json_param = "json_output" in inspect.signature(fn).parameters

        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> None:
            as_json = bool(kw.get("json_output")) if as_json_param else False
            try:
                result = fn(*args, **kw)
                if result is not None:
                    render(result, as_json=as_json)
                    code = getattr(result, "exit_code", 0)
                    if code:
                        raise typer.Exit(code)
            except typer.Exit:
                raise
            except IcectlError as e:
                if state.debug:
                    traceback.print_exc()
                print_error(f"icectl: error: {e.one_line()}")
                raise typer.Exit(e.exit_code) from None
            except KeyboardInterrupt:
                print_error("icectl: interrupted")
                raise typer.Exit(130) from None
            except BrokenPipeError:
                # `icectl ... | head`: the reader went away; that is not an error of ours.
                sys.stderr.close()
                raise typer.Exit(0) from None
            except Exception as e:
                if state.debug:
                    traceback.print_exc()
                print_error(f"icectl: internal error: {type(e).__name__}: {' '.join(str(e).split())}"
                            + ("" if state.debug else "; rerun with --debug for the traceback"))
                raise typer.Exit(ExitCode.INTERNAL) from None

        group.command(name, **kwargs)(wrapper)
        return fn

    return decorator


def load_config_and_io() -> tuple[Config, FileIO]:
    config = load_config(state.config_path)
    return config, FileIO(s3=config.s3)
