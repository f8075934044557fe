"""Writers of a rows view: the terminal table, plain aligned text when piped, JSON lines, CSV and TSV.

``--format table`` on a terminal is a rich table of the view's default columns with human values
(sizes, durations, relative paths), ids never wrapped and empty columns left out; piped it is plain
text aligned in columns (no box, full values, absolute paths, raw numbers), for grep and awk.
``json`` is the ``--json`` document; ``jsonl`` one row object per line; ``csv``/``tsv`` a header row
and one line per row, with every column (or those chosen), nested values as JSON text.
"""

from __future__ import annotations

import csv
import itertools
import json
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, TextIO

from icectl.cli.output.human import show
from icectl.cli.output.row_query import RowQuery, value_of
from icectl.results import RowsResult

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Group, JustifyMethod


class OutputFormat(str, Enum):
    TABLE = "table"
    JSON = "json"
    JSONL = "jsonl"
    CSV = "csv"
    TSV = "tsv"


@dataclass
class ViewOptions:
    """The options every rows view takes (``--columns --where --sort --limit --format --no-pager``)."""

    format: OutputFormat = OutputFormat.TABLE
    query: RowQuery = field(default_factory=RowQuery)
    pager: bool = True


# Kinds whose values must never be broken across lines (ids are copied into --snapshot).
_ATOMIC = {"id", "bytes", "count", "number", "timestamp", "duration", "enum", "bool"}
_RIGHT = {"bytes", "count", "number", "duration"}


def _columns(result: RowsResult, chosen: bool) -> list[str]:
    return list(result.columns) if chosen else result.default_columns()


_GAP = 2  # characters between columns


def _header(text: str, width: int) -> str:
    """A heading wrapped at its spaces to ``width`` (rich does not wrap a no_wrap column's heading)."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=False)) or text


def terminal_table(result: RowsResult, *, chosen: bool = False, width: int = 120) -> Group:
    """The rich table a terminal of ``width`` columns shows (all rows are read: rich lays a table out whole).

    Columns whose values must stay whole (ids, numbers, times) get exactly their width; paths, maps
    and text fold. When the default columns are wider than the terminal, the last ones are left out
    (the caption says which) rather than breaking an id; chosen columns are all shown.
    """
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    names = _columns(result, chosen)
    infos = [result.column(n) for n in names]
    cells = [[show(value_of(result, row, n), info, result.location) for n, info in zip(names, infos, strict=True)]
             for row in result.rows]
    # Empty columns take no width (a view without rows keeps its headings).
    keep = [i for i, n in enumerate(names) if chosen or not cells or any(r[i] for r in cells)]
    natural, least = {}, {}
    for i in keep:
        header = infos[i].header or names[i]
        word = max((len(w) for w in header.split()), default=1)
        natural[i] = max([len(r[i]) for r in cells] + [word])
        least[i] = natural[i] if infos[i].kind in _ATOMIC else min(natural[i], max(word, 16))
    # The view's first path or text column (a file's path, a partition) is what a row is about: it
    # stays whole while the columns after it can make room; only then it folds.
    primary = next((i for i in keep if infos[i].kind not in _ATOMIC), None)
    whole = primary is not None and natural[primary] <= width - 20
    if primary is not None and whole:
        least[primary] = natural[primary]
    left_out = []

    def too_wide() -> bool:
        return sum(least[i] for i in keep) + _GAP * (len(keep) - 1) > width

    while not chosen and too_wide() and len(keep) > 1 and (primary is None or keep[-1] > primary):
        left_out.append(names[keep.pop()])
    if primary is not None and (not whole or too_wide()):  # it folds: other folding columns give way
        least[primary] = min(natural[primary], 30)
        for i in [i for i in keep if i > primary and infos[i].kind not in _ATOMIC and not chosen]:
            keep.remove(i)
            left_out.append(names[i])
    while not chosen and too_wide() and len(keep) > 1:  # still too wide: the last columns give way
        left_out.append(names[keep.pop()])
    meta = result.json_head()
    meta.pop("view")
    notes = [f"{k}={v}" for k, v in meta.items() if k not in ("table", "metadata_location") and v is not None
             and not isinstance(v, dict | list)]
    if left_out:
        notes.append(f"not shown for lack of width: {', '.join(reversed(left_out))} (--columns)")
    caption = "; ".join([f"{len(cells)} row{'s' if len(cells) != 1 else ''}", *notes])
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    for i in keep:
        info = infos[i]
        header = info.header or names[i]
        justify: JustifyMethod = "right" if info.kind in _RIGHT else "left"
        if info.kind in _ATOMIC or least[i] == natural[i]:
            table.add_column(_header(header, natural[i]), justify=justify, no_wrap=True, width=natural[i])
        else:
            table.add_column(header, justify=justify, overflow="fold", min_width=least[i])
    for r in cells:
        table.add_row(*(r[i] for i in keep))
    # Title and caption on lines of their own: a table's would wrap to the table's width.
    return Group(Text(result.title, style="italic"), table, Text(caption, style="dim"))


def plain_cell(value: Any, encode: Callable[[Any], str]) -> str:
    """A value as one cell of piped text, CSV or TSV: raw numbers, nested values as JSON text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))  # int subclasses (Millis) as their number, as in JSON
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return repr(value)
    text = encode(value)
    if isinstance(value, dict | list | tuple | set | frozenset):
        return text
    decoded = json.loads(text)  # bytes (hex), dates, decimals: their JSON string's content
    return decoded if isinstance(decoded, str) else text


def _records(result: RowsResult, names: list[str], encode: Callable[[Any], str]) -> Iterator[list[str]]:
    for row in result.rows:
        yield [plain_cell(value_of(result, row, n), encode) for n in names]


def write_plain(result: RowsResult, out: TextIO, encode: Callable[[Any], str], *, chosen: bool = False) -> None:
    """Piped ``--format table``: columns aligned with two spaces, full values, no box.

    Widths come from the first 1,000 rows, so a large view streams; a longer value later only
    shifts its own line.
    """
    names = _columns(result, chosen)
    records = _records(result, names, encode)
    head = list(itertools.islice(records, 1000))
    widths = [max([len(n)] + [len(r[i]) for r in head]) for i, n in enumerate(names)]
    for r in itertools.chain([names], head, records):
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def write_csv(result: RowsResult, out: TextIO, encode: Callable[[Any], str]) -> None:
    """RFC 4180 CSV of every column of the view (or those chosen)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(result.columns)
    writer.writerows(_records(result, list(result.columns), encode))


_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def write_tsv(result: RowsResult, out: TextIO, encode: Callable[[Any], str]) -> None:
    """Tab-separated values; a tab, newline or backslash inside a value is escaped (``\\t``, ``\\n``,
    ``\\\\``) so that every line is one row, as PostgreSQL's and ClickHouse's TSV do."""
    for r in itertools.chain([list(result.columns)], _records(result, list(result.columns), encode)):
        out.write("\t".join(c.translate(_TSV_ESCAPES) for c in r) + "\n")


def write_jsonl(rows: Iterable[dict[str, Any]], out: TextIO, encode: Callable[[Any], str]) -> None:
    """One JSON object per row and line (the view's keys before ``rows`` are left out)."""
    for row in rows:
        out.write(encode(row) + "\n")
