"""The terminal report of ``icectl health`` (``REPORTS["health"]``): status, figures, checks, charts.

Drawn from the result's JSON document (:mod:`icectl.cli.output.health.words` reads it for the HTML page
too), sized to the console it is printed on (100-120 columns in mind). Colour only repeats what the
words and glyphs already say: ``✖ crossed``/``✔ ok``, a dashed target line in the histogram, one glyph
per operation in the snapshots chart. Imported only when a health result is printed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.constrain import Constrain
from rich.table import Table
from rich.text import Text

from icectl.cli.output.health import words as hf
from icectl.results import TableFailure

MAX_WIDTH = 120
CHART_ROWS = 8  # height of the snapshots-over-time bars
EIGHTHS = " ▏▎▍▌▋▊▉"
GLYPHS = {"append": "█", "overwrite": "▓", "delete": "▒", "replace": "░", hf.OTHER: "▚"}
STYLES = {"append": "blue", "overwrite": "yellow", "delete": "red", "replace": "green", hf.OTHER: "magenta"}


def clean(value: Any) -> str:
    """Text from metadata made safe for a terminal: control characters (an ESC in a table name could
    redraw the screen) are shown escaped instead of sent."""
    text = "" if value is None else str(value)
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def document(result: Any) -> dict[str, Any]:
    """The health document of a result (its ``to_json()``), or the document itself."""
    doc = result.to_json() if hasattr(result, "to_json") else result
    return dict(doc) if isinstance(doc, Mapping) else {}


def bar(fraction: float, width: int) -> str:
    """A horizontal bar of ``fraction`` (0-1) of ``width`` cells, in eighths; never empty for > 0."""
    eighths = round(max(0.0, min(fraction, 1.0)) * width * 8)
    if fraction > 0:
        eighths = max(eighths, 1)
    full, part = divmod(eighths, 8)
    return "█" * full + (EIGHTHS[part] if part else "")


def _header(doc: Mapping[str, Any]) -> Text:
    ok = hf.is_healthy(doc)
    line = Text()
    line.append(f"{'✔' if ok else '✖'} ", style="bold green" if ok else "bold red")
    line.append(clean(doc.get("table")), style="bold")
    line.append(" — ")
    line.append(hf.status_words(doc), style="green" if ok else "bold red")
    facts = [clean(doc.get("location")), f"format v{hf.fmt_count(doc.get('format_version'))}"]
    if doc.get("checked_at_ms") is not None:
        facts.append(f"checked {hf.fmt_time(doc.get('checked_at_ms'))} UTC")
    line.append("\n" + " · ".join(facts), style="dim")
    return line


def _figures(doc: Mapping[str, Any]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    for title, rows in hf.key_figures(doc):
        grid.add_row(title, " · ".join(f"{label} {clean(text)}" for label, text in rows))
    return grid


def _checks(doc: Mapping[str, Any]) -> Table | Text:
    items = hf.checks(doc)
    if not items:
        return Text("No checks in this document.", style="dim")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, expand=False)
    table.add_column("Status", no_wrap=True)
    table.add_column("Check", overflow="fold")
    table.add_column("Value", justify="right", no_wrap=True)
    table.add_column("Threshold", justify="right", no_wrap=True)
    table.add_column("Recommendation", overflow="fold")
    for c in items:
        crossed = bool(c.get("crossed"))
        table.add_row(Text("✖ crossed", style="bold red") if crossed else Text("✔ ok", style="green"),
                      clean(c.get("title") or c.get("id")), hf.fmt_value(c.get("value"), c.get("unit")),
                      hf.fmt_threshold(c), clean(c.get("recommendation") or "–"))
    return table


def _histogram_lines(doc: Mapping[str, Any], width: int) -> Iterator[Text]:
    """One line per size range with a bar of its file count; a dashed line where the target falls."""
    bins = hf.histogram(doc)
    counts = [hf.bin_count(b) for b in bins]
    target = hf.section(doc, "data_files").get("target_file_size_bytes")
    yield Text("Data file sizes", style="bold")
    if not bins or max(counts) == 0:
        yield Text("  no data files", style="dim")
        return
    pos = hf.target_position(bins, target)
    # Show from the first to the last non-empty range, stretched to the target: the gap between the
    # files and the target is what the chart is for.
    used = [i for i, n in enumerate(counts) if n]
    first, last = used[0], used[-1]
    if pos is not None:
        first, last = min(first, min(int(pos), len(bins) - 1)), max(last, min(int(pos), len(bins) - 1))
    labels = {i: hf.bin_label(bins[i]) for i in range(first, last + 1)}
    label_w = max(len(s) for s in labels.values())
    count_w = max(len(hf.fmt_count(n)) for n in counts)
    inside = f"  ◂ target {hf.fmt_bytes(target)} in this range"
    reserve = len(inside) if pos is not None and pos != int(pos) else 0
    bar_w = max(10, width - label_w - count_w - 14 - reserve)
    top = max(counts)
    marker = Text(f"  {' ' * label_w} ┄┄┄ target file size {hf.fmt_bytes(target)} ┄┄┄", style="bold")
    for i in range(first, last + 1):
        if pos is not None and pos == i:  # the target is this range's lower bound
            yield marker
        small = hf.bin_is_small(bins[i], target)
        line = Text(f"  {labels[i]:>{label_w}} │")
        line.append(f"{bar(counts[i] / top, bar_w):<{bar_w}}", style="yellow" if small else "blue")
        line.append(f" {hf.fmt_count(counts[i]):>{count_w}}")
        line.append(" small" if small else "      ", style="yellow")
        if pos is not None and i < pos < i + 1:
            line.append(inside, style="bold")
        yield line
    if pos is not None and pos >= last + 1:
        yield marker
    yield Text(f"  {' ' * label_w}   files per size range; small files: {hf.small_words(doc)}", style="dim")


def _allocate(stack: dict[str, int], cells: int) -> list[str]:
    """The operation of each of a bar's ``cells`` (bottom first), proportional to the counts by
    largest remainder: an operation under half a cell does not show in the bar (the legend and
    ``--json`` still count it)."""
    present = [op for op, n in stack.items() if n]
    total = sum(stack.values())
    ideal = {op: stack[op] / total * cells for op in present}
    alloc = {op: math.floor(ideal[op]) for op in present}
    for op in sorted(present, key=lambda op: alloc[op] - ideal[op])[:cells - sum(alloc.values())]:
        alloc[op] += 1
    return [op for op in present for _ in range(alloc[op])]


def _timeline_lines(doc: Mapping[str, Any], width: int) -> Iterator[Text]:
    """Snapshots per period as vertical bars stacked by operation, one glyph per operation."""
    buckets = hf.timeline(doc)
    stacks = [hf.bucket_operations(b) for b in buckets]
    totals = [sum(s.values()) for s in stacks]
    yield Text("Snapshots over time", style="bold")
    if not buckets or max(totals) == 0:
        yield Text("  no snapshots", style="dim")
        return
    top = max(totals)
    label_w = len(hf.fmt_count(top)) + 2
    col_w = max(1, min(6, (width - label_w - 2) // len(buckets)))
    plot_w = col_w * len(buckets)
    columns = [_allocate(s, max(1, round(t / top * CHART_ROWS))) if t else [] for s, t in zip(stacks, totals,
                                                                                             strict=True)]
    for row in range(CHART_ROWS - 1, -1, -1):
        label = hf.fmt_count(top) if row == CHART_ROWS - 1 else ("0" if row == 0 else "")
        line = Text(f"{label:>{label_w - 1}} │")
        for cells in columns:
            if row < len(cells):
                op = cells[row]
                line.append(GLYPHS[op] * max(col_w - 1, 1), style=STYLES[op])
                line.append(" " if col_w > 1 else "")
            else:
                line.append(" " * col_w)
        yield line
    yield Text(" " * label_w + "└" + "─" * plot_w)
    span = hf.timeline_span(buckets)
    start, end = hf.fmt_axis_time(buckets[0].get("start_ms"), span), hf.fmt_axis_time(buckets[-1].get("end_ms"), span)
    gap = max(1, plot_w - len(start) - len(end))
    yield Text(" " * (label_w + 1) + start + " " * gap + end, style="dim")
    legend = Text(" " * (label_w + 1))
    for op, n in hf.operations_used(buckets).items():
        legend.append(GLYPHS[op], style=STYLES[op])
        legend.append(f" {op} {hf.fmt_count(n)}   ")
    legend.append(f"({len(buckets)} periods)", style="dim")
    yield legend


def _recommendations(doc: Mapping[str, Any]) -> Iterator[Text]:
    recs = hf.recommendations(doc)
    yield Text("Recommendations", style="bold")
    if not recs:
        yield Text("  nothing to run", style="dim")
    for i, r in enumerate(recs, 1):
        yield Text(f"  {i}. ") + Text(clean(r), style="bold cyan")


def _extras(doc: Mapping[str, Any]) -> Iterator[Text]:
    parts = hf.top_delete_partitions(doc)
    if parts:
        yield Text("Partitions with the most deletes", style="bold")
        for p in parts:
            yield Text(f"  {clean(hf.fmt_partition(p.get('partition')))}: {hf.fmt_count(p.get('delete_files'))} "
                       f"delete files, {hf.fmt_count(p.get('delete_records'))} deleted records")
    sample = hf.orphan_sample(doc)
    if sample:
        yield Text("Orphan file candidates (sample)", style="bold")
        for s in sample:
            yield Text(f"  {clean(s)}")


class HealthReport:
    """A rich renderable drawing one health document at the console's width (at most 120 columns)."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self.doc = doc

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        # At most 120 columns, also where the console is wider (piped output is 400 wide): a report
        # is read, and its tables should wrap a long command rather than stretch.
        width = min(options.max_width, MAX_WIDTH)
        yield Constrain(Group(*self._parts(width)), width)

    def _parts(self, width: int) -> Iterator[RenderableType]:
        doc = self.doc
        yield _header(doc)
        if doc.get("error") is not None:
            yield Text(clean(doc.get("error")), style="red")
            return
        yield Text("")
        yield _figures(doc)
        yield Text("")
        yield _checks(doc)
        yield Text("")
        yield Group(*_histogram_lines(doc, width))
        yield Text("")
        yield Group(*_timeline_lines(doc, width))
        yield Text("")
        yield Group(*_recommendations(doc), *_extras(doc))


def health_report(result: Any) -> HealthReport:
    """``REPORTS["health"]``: the terminal report of a health result (or of its JSON document)."""
    return HealthReport(document(result))


def health_line(result: Any) -> str:
    """An --all run's line for one table on a terminal: healthy, or the commands its crossed checks name."""
    if isinstance(result, TableFailure):
        return f"{result.table}  failed: {result.error}"
    crossed = [c for c in result.checks if c.crossed]
    if not crossed:
        return f"{result.table}  healthy"
    what = ", ".join(dict.fromkeys(c.command for c in crossed if c.command))
    return f"{result.table}  needs attention: {len(crossed)} check(s)" + (f" ({what})" if what else "")
