"""What every command shares: global state, the result-rendering wrapper and the error boundary."""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import typer

from icectl import engine as engines
from icectl import progress, replay
from icectl.cli.each_table import each_table
from icectl.cli.options import AllTablesOpt, CatalogOpt, TableArg, TableOrNamespaceArg
from icectl.cli.options import engine as engine_options
from icectl.cli.options import view as view_options
from icectl.cli.output.render import print_error, render, stderr_console
from icectl.cli.state import state
from icectl.config import Config, load_config, set_active_config
from icectl.errors import ExitCode, IcectlError, UsageError
from icectl.results import CommandResult, MultiResult, Result, RowsResult
from icectl.storage import FileIO
from icectl.storage.identity import racy_window_ns
from icectl.table import Table, load_table, manifest_cache

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class TableTargets:
    """What ``TABLE|NAMESPACE``, ``--all`` and ``--catalog`` name: one table, or every table of a
    catalog (or of one namespace). Handed to a command registered with ``each_table=True``."""

    address: str | None
    all_tables: bool
    catalog: str | None

    def run(self, item: type[CommandResult], fn: Callable[[Table], Result]) -> Result | MultiResult:
        """``fn`` on the one table, or on each (``--all``: one ``item`` per table, a failing one reported)."""
        if self.all_tables:
            return MultiResult(item.view, self.each(item.view, fn), item=item)
        return fn(self.one())

    def one(self) -> Table:
        if self.address is None:
            raise UsageError("give a TABLE, or --all")
        return open_table(self.address)

    def each(self, view: str, fn: Callable[[Table], Result]) -> Iterator[Result]:
        config, io = load_config_and_io()
        return each_table(config, io, self.catalog, self.address, view, fn)


def _table_params(fn: Callable[..., Any], table: bool, targets: bool) -> list[inspect.Parameter]:
    """``fn``'s parameters as typer sees them: a ``table: Table`` becomes the TABLE argument, a
    ``tables: TableTargets`` the ``[TABLE] --all --catalog`` trio."""
    params = list(inspect.signature(fn, eval_str=True).parameters.values())
    first = "table" if table else "tables" if targets else None
    if first is None:
        return params
    if not params or params[0].name != first:
        raise TypeError(f"{fn.__name__}: table=/each_table= commands take '{first}' as their first parameter")
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    head = ([inspect.Parameter("table", kind, annotation=TableArg)] if table else
            [inspect.Parameter("table", kind, default=None, annotation=TableOrNamespaceArg),
             inspect.Parameter("all_tables", kind, default=False, annotation=AllTablesOpt),
             inspect.Parameter("catalog", kind, default=None, annotation=CatalogOpt)])
    return [*head, *params[1:]]


@contextlib.contextmanager
def _exit_codes() -> Iterator[None]:
    """Every way a command ends, as its exit code: an :class:`IcectlError` is its one line on
    stderr and its code; Ctrl-C says how far a delete run got; a closed pipe (``| head``) is no
    error; anything else is an internal error (the traceback only with ``--debug``)."""
    try:
        yield
    except typer.Exit:
        raise
    except IcectlError as e:
        if state.debug:
            traceback.print_exc()
        print_error(f"icectl: error: {e.one_line()}")
        raise typer.Exit(e.exit_code) from None
    except KeyboardInterrupt as e:  # a delete run says how far it got (icectl.table.delete_tally)
        print_error("icectl: interrupted" + (f": {' '.join(str(e).split())}" if str(e) else ""))
        raise typer.Exit(ExitCode.INTERRUPTED) from None
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
    finally:
        set_active_config(None)
        replay.finish(False)  # a run that failed: its recording (and temporary file) goes


def command(group: typer.Typer, name: str, *, view: bool | str = False, engine: bool | str = False,
            table: bool = False, each_table: bool = False, **kwargs: Any) -> Callable[[F], F]:
    """Register a command whose function returns a result; render it and map errors to exit codes.

    Commands never print or exit themselves: this wrapper is the only place that does.
    ``table=True``: the function's first parameter ``table: Table`` is the TABLE argument, loaded
    here with the run's config (a command body never loads a table itself). ``each_table=True``:
    the first parameter ``tables: TableTargets`` is ``[TABLE] --all --catalog`` (a table, or with
    ``--all`` every table of the catalog or of the namespace given); the body calls
    ``tables.run(ResultClass, fn)``.
    ``view=True`` (a rows view) adds ``--columns --where --sort --limit --format --no-pager`` to the
    command's options, once for all views; ``view="document"`` adds ``--no-pager`` alone.
    ``engine=True`` (``"deletes"``: with ``--executor-deletes``) adds the engine options, opens the
    run's engine and passes it to the command function's ``engine`` parameter (not a CLI option),
    which hands it to the operation; the engine is also the run's context value
    (:func:`icectl.engine.active`) for the code that reads it.
    """

    def decorator(fn: F) -> F:
        params = _table_params(fn, table, each_table)
        as_json_param = "json_output" in inspect.signature(fn).parameters
        added = dict(view_options.VIEW_PARAMS if view is True else view_options.DOCUMENT_PARAMS if view else {})
        engine_params = (engine_options.DELETE_ENGINE_PARAMS if engine == "deletes"
                         else engine_options.ENGINE_PARAMS if engine else {})
        added.update(engine_params)
        takes_engine = bool(engine) and "engine" in inspect.signature(fn).parameters
        if engine and not takes_engine:
            raise TypeError(f"command {name!r}: engine=True passes the run's engine to an 'engine' parameter, "
                            f"which {fn.__name__} lacks")

        @functools.wraps(fn)
        def wrapper(*args: Any, **kw: Any) -> None:
            as_json = bool(kw.get("json_output")) if as_json_param else False
            given = {k: kw.pop(k) for k in added if k in kw}
            set_active_config(None)  # until the command loads its config: never the previous run's
            with _exit_codes():
                options = view_options.from_params(given, as_json) if view else None
                run_engine = (engines.open_engine(engine_options.settings_from(
                    given, load_config(state.config_path).engine)) if engine else None)
                if state.no_cache:  # --no-cache (the root callback only notes it: --help loads no table layer)
                    manifest_cache.set_cache_enabled(False)
                reporter = _terminal_reporter()
                with progress.reporting(reporter), engines.using(run_engine or engines.active()):
                    mark = run_engine.mark() if run_engine is not None else None
                    if takes_engine:
                        kw["engine"] = run_engine
                    if table:
                        kw["table"] = open_table(kw["table"])
                        if kw["table"].catalog is not None or (run_engine is not None and run_engine.name != "local"):
                            replay.spoil()  # a catalog's answer or a Spark task is not a file a stat can vouch for
                    elif each_table:
                        kw["tables"] = TableTargets(kw.pop("table"), kw.pop("all_tables"), kw.pop("catalog"))
                    result = fn(*args, **kw)
                    if run_engine is not None:
                        result = _with_engine_report(result, run_engine, mark)
                    if reporter is not None and sys.stdout.isatty():
                        reporter.quiet_down()
                    for warning in getattr(result, "warnings", ()):  # stderr: --json keeps stdout one document
                        print_error(f"icectl: warning: {warning}")
                    if result is not None:
                        render(result, as_json=as_json or view_options.wants_json(options),
                               options=options)  # rows stream, so reading goes on here
                    note = (spark_suggestion(reporter.most_manifests, run_engine.name) if reporter is not None
                            and run_engine is not None and not given.get("engine_name") else None)
                    if note:
                        print_error(note)
                code = getattr(result, "exit_code", 0)
                if replay.armed():  # store it, where `cache clear` looks
                    replay.finish(code == 0, racy_ns=racy_window_ns(), cache_root=manifest_cache.cache_dir())
                if code:
                    raise typer.Exit(code)

        view_options.add_params(wrapper, fn, added, params)
        if takes_engine:
            _hide_param(wrapper, "engine")
        group.command(name, **kwargs)(wrapper)
        return fn

    return decorator


def _hide_param(wrapper: Callable[..., Any], name: str) -> None:
    """``wrapper`` without the parameter ``name`` for typer: the framework fills it, not the command line."""
    sig = inspect.signature(wrapper)
    wrapper.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[p for p in sig.parameters.values() if p.name != name])
    wrapper.__annotations__ = {k: v for k, v in wrapper.__annotations__.items() if k != name}


def _with_engine_report(result: Any, engine: engines.Engine, mark: Any) -> Any:
    """``result`` whose JSON says which engine ran and, for Spark, how many tasks: a rows view after
    its rows (they are read while printed), each table of an ``--all`` run for itself."""
    if isinstance(result, MultiResult):
        def each(results: Any) -> Any:
            last = engine.mark()
            for r in results:
                r = _with_engine_report(r, engine, last)
                last = engine.mark()
                yield r

        result.results = each(result.results)
    elif isinstance(result, RowsResult):
        result.json_tail = lambda: {"engine": engine.report_since(mark).to_json()}
    elif result is not None:
        result.engine_report = engine.report_since(mark)
    return result


def spark_suggestion(manifests: int, engine_name: str) -> str | None:
    """The stderr line of a terminal run of the default local engine that read more than
    :data:`icectl.engine.SPARK_SUGGESTED_MANIFESTS` manifests in one batch: the Spark engine pays there."""
    if engine_name != "local" or manifests < engines.SPARK_SUGGESTED_MANIFESTS:
        return None
    return (f"icectl: note: {manifests} manifests read on this machine; on a Spark cluster, --engine spark "
            "spreads that work over its executors (README: Running on Spark)")


class _RichReporter:
    """Progress bars on stderr (transient: they vanish when the work is done)."""

    def __init__(self) -> None:
        self.progress: Any = None  # made on the first task: rich.progress costs 25 ms to import
        self.active = 0
        self.quiet = False  # set once the result is printed: bars and the result must not share lines
        self.most_manifests = 0  # the biggest batch of manifests one task announced (the Spark suggestion)

    def quiet_down(self) -> None:
        """Clear the bars before the result goes to the same terminal; later tasks draw none."""
        self.quiet = True
        if self.progress is not None and self.active:
            self.progress.stop()

    def start(self, description: str, total: int | None) -> object:
        if total and "manifest" in description:
            self.most_manifests = max(self.most_manifests, total)
        if self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=stderr_console(), transient=True)
        if self.active == 0 and not self.quiet:
            self.progress.start()
        self.active += 1
        return self.progress.add_task(description, total=total)

    def advance(self, handle: object, n: int) -> None:
        self.progress.advance(handle, n)

    def finish(self, handle: object) -> None:
        self.progress.remove_task(handle)
        self.active -= 1
        if self.active == 0 and not self.quiet:
            self.progress.stop()


def _terminal_reporter() -> _RichReporter | None:
    return _RichReporter() if sys.stderr.isatty() else None


def load_config_and_io() -> tuple[Config, FileIO]:
    config = load_config(state.config_path)
    set_active_config(config)  # the neighbouring-table search of deleting commands reads the same catalogs
    manifest_cache.configure_cache(config.cache)  # the [cache] of --config FILE, not of the default file
    return config, FileIO(s3=config.s3)


def open_table(address: str) -> Table:
    """The table a command's TABLE argument names, with the config and storage of this run."""
    config, io = load_config_and_io()
    return load_table(address, config, io)
