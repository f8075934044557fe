"""The one place results are printed: rich tables on a terminal, one JSON document with --json."""

from __future__ import annotations

import datetime
import decimal
import io
import itertools
import json
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import IO, TYPE_CHECKING, Any, TextIO, TypeVar

from icectl import replay
from icectl.cli.output.formats import (
    OutputFormat,
    ViewOptions,
    terminal_table,
    write_csv,
    write_jsonl,
    write_plain,
    write_tsv,
)
from icectl.cli.output.human import human_document
from icectl.cli.output.human import text as cell
from icectl.cli.output.pager import page
from icectl.cli.output.row_query import apply_query
from icectl.cli.output.terminal_views import one_line_renderer, report_renderer
from icectl.results import MessageResult, MultiResult, Result, RowsResult

_T = TypeVar("_T")

# rich is imported where a view is drawn: `--json` and `--help` never load it, and a document
# (`inspect table`) loads the tree but not the table module.
if TYPE_CHECKING:
    from rich.console import Console, Group
    from rich.tree import Tree


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if hasattr(value, "to_json"):
        return value.to_json()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def to_json(value: Any) -> str:
    return json.dumps(value, default=_json_default, ensure_ascii=False)


def stdout_console() -> Console:
    from rich.console import Console

    # markup off: paths and properties come from metadata and may contain [brackets].
    # Not a terminal: don't squeeze columns to 80 characters.
    return Console(file=sys.stdout, markup=False, highlight=False, emoji=False,
                   width=None if sys.stdout.isatty() else 400, soft_wrap=False)


def stderr_console() -> Console:
    from rich.console import Console

    return Console(file=sys.stderr, markup=False, highlight=False, emoji=False)


def render(result: Result | MultiResult, *, as_json: bool, out: TextIO | None = None,
           options: ViewOptions | None = None) -> None:
    """Print ``result``: with ``as_json`` its ``to_json()`` document (one per table for --all).

    ``options`` are a view's ``--columns --where --sort --limit --format --no-pager``; without them
    nothing is paged and rows keep every column the view declares.
    """
    out = out or sys.stdout
    if isinstance(result, MultiResult):
        n = failed = 0
        line = None if as_json else one_line_renderer(result)
        for r in result:  # streamed: each table is printed as soon as it is done
            if line is not None:  # a terminal gets one line per table
                out.write(line(r) + "\n")
            else:
                render(r, as_json=as_json, out=out)
            n += 1
            failed += bool(r.exit_code)
        if not as_json:  # JSON stays one line per table; people get a closing count
            out.write(f"{result.view}: {n} table(s), {failed} with problems\n")
        return
    fmt = OutputFormat.JSON if as_json else (options.format if options else OutputFormat.TABLE)
    if isinstance(result, RowsResult) and options is not None:
        result = apply_query(result, options.query)
    if isinstance(result, RowsResult) and result.json_text is None:
        result = replace(result, rows=_first_read(result.rows))
    if fmt == OutputFormat.JSON:
        _render_json(result, out)
        return
    if isinstance(result, RowsResult) and fmt != OutputFormat.TABLE:
        {OutputFormat.JSONL: lambda r, o: write_jsonl(r.rows, o, to_json), OutputFormat.CSV: lambda r, o: write_csv(
            r, o, to_json), OutputFormat.TSV: lambda r, o: write_tsv(r, o, to_json)}[fmt](result, out)
        out.flush()
        return
    terminal = out is sys.stdout and out.isatty()
    report = report_renderer(result)
    if isinstance(result, RowsResult) and report is None and not terminal:
        # Piped: plain aligned text, full values, never a box.
        write_plain(result, out, to_json, chosen=bool(options and options.query.columns))
        out.flush()
        return
    if out is sys.stdout:
        console = stdout_console()
    else:
        from rich.console import Console

        console = Console(file=out, markup=False, width=400)
    if report is not None:  # a result with its own terminal report (validate, health)
        renderable: Any = report(result)
    elif isinstance(result, RowsResult):
        renderable = terminal_table(result, chosen=bool(options and options.query.columns), width=console.width)
    elif isinstance(result, MessageResult):
        renderable = result.message
    else:  # a document: a tree under the title (which says what "view" would)
        body = result.to_json()
        body.pop("view", None)
        renderable = record_tree(result.title, human_document(body) if terminal else body)
    if options is None or not terminal:
        console.print(renderable)
        return
    with console.capture() as captured:  # paged as git does: only when taller than the terminal
        console.print(renderable)
    page(captured.get(), out, enabled=options.pager)


def _render_json(result: Result, out: TextIO) -> None:
    if isinstance(result, RowsResult):
        # The rows array is streamed, so a view of a million files never sits in memory as text,
        # into a spool (memory, then a temporary file): stdout gets the document only once every
        # row was read. A manifest found damaged halfway (the Spark engine streams its tasks'
        # rows as they come) leaves stdout empty, never half a document.
        # Bytes, not text: a text spool holds ASCII as 4-byte characters (150 MB at 100,000 files).
        # A run recorded for a replay (icectl.replay) spools into the file that becomes the entry.
        kept = replay.spool() if out is sys.stdout else None
        with kept or tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as spool:
            text = io.TextIOWrapper(spool, encoding="utf-8", newline="")
            _write_rows_json(result, text)
            text.flush()
            text.detach()
            spool.seek(0)
            _copy_out(spool, out)
            if kept is not None:
                replay.offer(spool)
    else:
        doc = result.to_json()
        report = getattr(result, "engine_report", None)
        if report is not None:  # set by the framework on a command run with --engine (icectl.engine)
            doc = {**doc, "engine": report.to_json()}
        out.write(to_json(doc) + "\n")
    out.flush()


_SPOOL_BYTES = 16 << 20


def _copy_out(spool: IO[bytes], out: TextIO) -> None:
    """The spool's UTF-8 text onto ``out``: its byte buffer when it has one (stdout), else as text."""
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        out.flush()
        shutil.copyfileobj(spool, buffer, 1 << 20)
        buffer.flush()
        return
    reader = io.TextIOWrapper(spool, encoding="utf-8", newline="")
    shutil.copyfileobj(reader, out, 1 << 20)
    reader.detach()


def _write_rows_json(result: RowsResult, out: TextIO) -> None:
    chunks = _first_read((to_json(row) for row in result.rows) if result.json_text is None
                         else result.json_text(to_json))
    head = result.json_head()
    out.write(to_json(head)[:-1] + (", " if head else "") + '"rows": [')
    first = True
    for chunk in chunks:
        if chunk:  # a chunk holds one row or, from json_text, several
            if isinstance(chunk, bytes):  # UTF-8 as is, behind the text written so far
                out.write("" if first else ",\n")
                out.flush()
                out.buffer.write(chunk)
            else:
                out.write(("" if first else ",\n") + chunk)
            first = False
    tail = result.json_tail() if result.json_tail is not None else {}
    out.write("]" + (", " + to_json(tail)[1:] if tail else "}") + "\n")


def _first_read(items: Iterable[_T]) -> Iterator[_T]:
    """``items`` with the first one read now, before a byte is written: an error met on the way to it
    (a damaged first manifest, a --where that cannot compare) leaves stdout empty, not half a document."""
    it = iter(items)
    first = list(itertools.islice(it, 1))
    return itertools.chain(first, it)


def rows_table(result: RowsResult) -> Group:
    """The terminal table of a rows view (its default columns, human values)."""
    return terminal_table(result)


def record_tree(title: str, data: dict[str, Any]) -> Tree:
    from rich.tree import Tree

    tree = Tree(title)
    _add(tree, data)
    return tree


def _add(node: Tree, value: Any) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict | list) and v and not _flat_list(v):
                _add(node.add(str(k)), v)
            else:
                node.add(f"{k}: {cell(v)}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, dict | list):
                _add(node.add(f"[{i}]"), v)
            else:
                node.add(cell(v))


def _flat_list(v: Any) -> bool:
    # Short lists of scalars read best on one line; long ones one item per line.
    return (isinstance(v, list) and all(not isinstance(x, dict | list) for x in v)
            and len(cell(v)) <= 80)


def print_error(line: str) -> None:
    replay.spoil()  # a replay would not say it again
    sys.stderr.write(line.rstrip("\n") + "\n")
    sys.stderr.flush()

