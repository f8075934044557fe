"""Choosing, filtering, sorting and limiting the rows of a rows view (``--columns``, ``--where``,
``--sort``, ``--limit``), for the CLI and for library callers alike.

A name is a column of the view, one of its extra fields (a partition field of ``inspect files``:
``ts_day``), or a dotted path into a map or struct column (``summary.added-records``,
``data_file.partition.ts_day``). Comparisons are typed by the row's value: a number compares as a
number, a boolean as ``true``/``false``, anything else (dates and timestamps are ISO text, which
sorts as time does) as text; an enum column (``content``) also accepts its names (``content=data``).
A missing or null value matches only ``=null`` and ``!=`` anything else never, as in SQL.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from icectl.errors import UsageError
from icectl.results import RowsResult

_OPS = ("<=", ">=", "!=", "=", "<", ">")
_CONDITION = re.compile(r"^\s*([^<>=!\s]+)\s*(<=|>=|!=|=|<|>)\s*(.*?)\s*$")
_AND = re.compile(r"\s+and\b\s*", re.IGNORECASE)
_DATE_SPACE_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d")
_DATE_T_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d")


@dataclass(frozen=True)
class Condition:
    """One comparison of ``--where``: ``name op literal``."""

    name: str
    op: str
    literal: str


@dataclass
class RowQuery:
    """What to keep of a view: columns (``None``: all), conditions (all must hold), sort keys
    (``(name, descending)``) and a row limit."""

    columns: list[str] | None = None
    where: list[Condition] = field(default_factory=list)
    sort: list[tuple[str, bool]] = field(default_factory=list)
    limit: int | None = None

    def changes_rows(self) -> bool:
        return bool(self.columns or self.where or self.sort) or self.limit is not None


def parse_where(text: str) -> list[Condition]:
    """``"ts_day>=2025-01-02 and content=data"`` -> its conditions (usage error when malformed)."""
    out = []
    for part in _AND.split(text.strip()):
        m = _CONDITION.match(part)
        if not m or not m.group(3):
            raise UsageError(f"--where {text!r}: cannot read {part.strip()!r} "
                             f"(expected NAME OP VALUE with OP one of {', '.join(_OPS)}, joined by 'and')")
        literal = m.group(3)
        if literal[0] in "<>=!":  # "record_count>>3", "a==b": an operator typed twice
            raise UsageError(f"--where {text!r}: cannot read {part.strip()!r} (one operator, then the value; "
                             "quote a value that starts with one of < > = !)")
        if len(literal) >= 2 and literal[0] == literal[-1] and literal[0] in "'\"":
            literal = literal[1:-1]
        out.append(Condition(m.group(1), m.group(2), literal))
    return out


def parse_names(text: str, option: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError(f"{option} needs at least one column name")
    return names


def parse_sort(text: str) -> list[tuple[str, bool]]:
    """``"-record_count,file_path"`` -> ``[("record_count", True), ("file_path", False)]``."""
    return [(n[1:], True) if n.startswith("-") else (n, False) for n in parse_names(text, "--sort")]


def known_names(result: RowsResult) -> list[str]:
    return [*result.columns, *(n for n in result.fields if n not in result.columns)]


def check_name(result: RowsResult, name: str, option: str) -> None:
    """A usage error naming the known columns when ``name`` is none of the view's."""
    head = name.split(".", 1)[0]
    if name in result.columns or name in result.fields or name in result.column_info:
        return
    if "." in name and (head in result.columns or head in result.fields):
        return  # a path into a map or struct: its keys are only known row by row
    raise UsageError(f"{option}: unknown column {name!r} of view {result.view}; "
                     f"known: {', '.join(known_names(result))}")


def value_of(result: RowsResult, row: dict[str, Any], name: str) -> Any:
    """The value ``name`` reaches in ``row`` (``None`` when absent)."""
    info = result.column_info.get(name)
    if info is not None and info.value is not None:
        return info.value(row)
    value: Any = row
    for key in result.path_of(name):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return None


def _compare(left: Any, op: str, right: Any) -> bool:
    if op == "=":
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if op == "<":
        return bool(left < right)
    if op == "<=":
        return bool(left <= right)
    if op == ">":
        return bool(left > right)
    return bool(left >= right)


def matches(result: RowsResult, row: dict[str, Any], cond: Condition) -> bool:
    """Whether ``row`` satisfies ``cond`` (see the module's doc for the typing rules)."""
    value = value_of(result, row, cond.name)
    if value is None:
        return cond.literal.lower() == "null" and cond.op == "="
    if cond.literal.lower() == "null":
        return cond.op == "!="
    labels = result.column(cond.name).labels
    if labels:
        by_name = {str(v).lower(): k for k, v in labels.items()}
        if cond.literal.lower() in by_name:
            return _compare(value, cond.op, by_name[cond.literal.lower()])
    if isinstance(value, bool):
        return _compare(value, cond.op, cond.literal.lower() in ("true", "1", "yes"))
    number = _number(cond.literal)
    if isinstance(value, int | float) and number is not None:
        return _compare(value, cond.op, number)
    if isinstance(value, int | float):  # else 5 would compare with "abc" as text, and quietly match nothing
        raise UsageError(f"--where: {cond.name} is a number; {cond.literal!r} is not")
    if isinstance(value, str) and number is not None and (n := _number(value)) is not None:
        return _compare(n, cond.op, number)  # a summary figure ("123") compares as a number
    text = value if isinstance(value, str) else str(value)
    literal = cond.literal
    if _DATE_SPACE_TIME.match(literal) and _DATE_T_TIME.match(text):
        literal = literal[:10] + "T" + literal[11:]  # as a terminal shows it: "2025-01-02 10:00:00"
    return _compare(text, cond.op, literal)


def _sort_key(value: Any) -> tuple[int, Any]:
    # Nulls last; numbers before text; one comparable value per group.
    if value is None:
        return (3, 0)
    if isinstance(value, bool):
        return (0, int(value))
    if isinstance(value, int | float):
        return (0, value)
    if isinstance(value, str) and (n := _number(value)) is not None:
        return (0, n)
    return (1, value if isinstance(value, str) else str(value))


def _sorted(result: RowsResult, rows: Iterable[dict[str, Any]], keys: list[tuple[str, bool]]) -> list[dict[str, Any]]:
    out = list(rows)
    for name, descending in reversed(keys):  # stable sorts, last key first
        present = [r for r in out if value_of(result, r, name) is not None]
        absent = [r for r in out if value_of(result, r, name) is None]

        def key(r: dict[str, Any], n: str = name) -> tuple[int, Any]:
            return _sort_key(value_of(result, r, n))

        present.sort(key=key, reverse=descending)
        out = present + absent  # nulls last either way
    return out


def apply_query(result: RowsResult, query: RowQuery) -> RowsResult:
    """``result`` with ``query`` applied: rows filtered, sorted, limited, and cut to the chosen
    columns (a dotted name becomes a key of its own). The same result when the query changes nothing."""
    if not query.changes_rows():
        return result
    for name in query.columns or ():
        check_name(result, name, "--columns")
    for cond in query.where:
        check_name(result, cond.name, "--where")
    for name, _ in query.sort:
        check_name(result, name, "--sort")
    if query.limit is not None and query.limit < 0:
        raise UsageError("--limit must be 0 or more")
    rows: Iterable[dict[str, Any]] = result.rows
    if query.where:
        conds = list(query.where)
        rows = (r for r in rows if all(matches(result, r, c) for c in conds))
    if query.sort:
        rows = _sorted(result, rows, query.sort)
    if query.limit is not None:
        rows = itertools.islice(rows, query.limit)
    columns = result.columns
    if query.columns:
        chosen = list(query.columns)
        rows = _project(result, rows, chosen)
        columns = chosen
    # Default terminal columns stay those of the view unless columns were chosen.
    return replace(result, columns=columns, rows=rows, json_text=None,
                   terminal_columns=None if query.columns else result.terminal_columns)


def _project(result: RowsResult, rows: Iterable[dict[str, Any]], names: list[str]) -> Iterator[dict[str, Any]]:
    for r in rows:
        yield {n: value_of(result, r, n) for n in names}


def query_rows(result: RowsResult, *, columns: list[str] | str | None = None, where: str | None = None,
               sort: str | None = None, limit: int | None = None) -> RowsResult:
    """Library entry: ``query_rows(file_rows(t), where="ts_day>=2025-01-02 and content=data", limit=10)``."""
    query = RowQuery(columns=parse_names(columns, "--columns") if isinstance(columns, str) else columns,
                     where=parse_where(where) if where else [], sort=parse_sort(sort) if sort else [], limit=limit)
    return apply_query(result, query)


__all__ = ["Condition", "RowQuery", "apply_query", "check_name", "matches", "parse_names", "parse_sort",
           "parse_where", "query_rows", "value_of"]
