"""The options every rows view takes, declared once and added to each view's signature by
:func:`icectl.cli.framework.command` (``view=True``): ``--columns --where --sort --limit --format
--no-pager``. Typer reads a command's parameters from its signature, so the wrapper's
``__signature__`` and annotations get these after the view's own."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from icectl.cli.output.formats import OutputFormat, ViewOptions
from icectl.cli.output.row_query import RowQuery, parse_names, parse_sort, parse_where
from icectl.errors import UsageError

ColumnsOpt = Annotated[str | None, typer.Option(
    "--columns", metavar="COL,COL", show_default=False,
    help="Columns to show, in order: any column of the view, a partition field, or a path into a map "
         "(summary.added-records). Also chooses the columns of json, jsonl, csv and tsv.")]
WhereOpt = Annotated[str | None, typer.Option(
    "--where", "-w", metavar="EXPR", show_default=False,
    help="Keep rows where every comparison holds: NAME OP VALUE with OP one of = != < <= > >=, joined by "
         "'and' (\"ts_day>=2025-01-02 and content=data\"). Numbers compare as numbers, dates and "
         "timestamps as ISO text; null matches =null.")]
SortOpt = Annotated[str | None, typer.Option(
    "--sort", metavar="COL[,COL]", show_default=False,
    help="Sort rows by these columns; a leading - sorts descending (-record_count). Nulls last.")]
LimitOpt = Annotated[int | None, typer.Option(
    "--limit", "-n", metavar="N", min=0, show_default=False, help="Print at most N rows (after --where and --sort).")]
FormatOpt = Annotated[OutputFormat, typer.Option(
    "--format", "-f", case_sensitive=False,
    help="table (aligned columns; boxes and human values on a terminal only), json (as --json), jsonl (one "
         "row per line), csv or tsv (a header row, every column, nested values as JSON text).")]
NoPagerOpt = Annotated[bool, typer.Option(
    "--no-pager", help="Never page. Otherwise long terminal output goes through $ICECTL_PAGER, $PAGER or "
                       "'less -FRX', as git does.")]

# name -> (annotation, default), in the order they are listed in --help
VIEW_PARAMS: dict[str, tuple[Any, Any]] = {
    "columns": (ColumnsOpt, None), "where": (WhereOpt, None), "sort": (SortOpt, None), "limit": (LimitOpt, None),
    "output_format": (FormatOpt, OutputFormat.TABLE), "no_pager": (NoPagerOpt, False)}
DOCUMENT_PARAMS: dict[str, tuple[Any, Any]] = {"no_pager": (NoPagerOpt, False)}


def add_params(wrapper: Callable[..., Any], fn: Callable[..., Any], params: dict[str, tuple[Any, Any]],
               own: list[inspect.Parameter] | None = None) -> None:
    """Give ``wrapper`` (which wraps ``fn``) the parameters ``params`` after ``fn``'s own (or after
    ``own``, the framework's rewrite of them), for typer."""
    sig = inspect.signature(fn, eval_str=True)  # typer takes a set __signature__ as it is
    extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a)
             for n, (a, d) in params.items()]
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) if p.kind == p.VAR_KEYWORD else p
           for p in (own if own is not None else sig.parameters.values())]
    wrapper.__signature__ = sig.replace(parameters=[*own, *extra])  # type: ignore[attr-defined]
    # typer resolves annotations with get_type_hints, which reads __annotations__ in fn's globals;
    # the added ones are objects already (so are the rewritten ones).
    wrapper.__annotations__ = {**{p.name: p.annotation for p in own}, **{n: a for n, (a, _) in params.items()}}
    if "return" in getattr(fn, "__annotations__", {}):
        wrapper.__annotations__["return"] = fn.__annotations__["return"]


def from_params(given: dict[str, Any], as_json: bool) -> ViewOptions:
    """The :class:`ViewOptions` of a view's parsed options (usage error on a bad expression)."""
    fmt = OutputFormat(given.get("output_format") or OutputFormat.TABLE)
    if as_json and fmt not in (OutputFormat.TABLE, OutputFormat.JSON):
        raise UsageError(f"--json and --format {fmt.value} contradict each other; give one")
    columns, where, sort = given.get("columns"), given.get("where"), given.get("sort")
    query = RowQuery(columns=parse_names(columns, "--columns") if columns is not None else None,
                     where=parse_where(where) if where else [], sort=parse_sort(sort) if sort else [],
                     limit=_row_count(given.get("limit")))
    return ViewOptions(format=fmt, query=query, pager=not given.get("no_pager", False))


def _row_count(limit: int | None) -> int | None:
    """--limit beyond what a list can hold is no limit (islice refuses numbers past sys.maxsize)."""
    return None if limit is None or limit >= 2**63 - 1 else limit


def wants_json(options: ViewOptions | None) -> bool:
    return options is not None and options.format == OutputFormat.JSON
