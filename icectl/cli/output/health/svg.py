"""The health page's charts as inline SVG: the data-file size histogram and snapshots over time.

Plain SVG 1.1 elements coloured by CSS classes of the page (``bar``, ``op-append``, ``target``...),
so one drawing follows the page's light or dark palette. Every text from the document is escaped;
each bar carries a ``<title>`` (the browser's tooltip) with its exact figures, so nothing is said by
colour or size alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from html import escape
from typing import Any

from icectl.cli.output.health.words import (
    OPERATIONS,
    OTHER,
    bin_count,
    bin_is_small,
    bin_label,
    bucket_operations,
    fmt_axis_time,
    fmt_bytes,
    fmt_count,
    fmt_time,
    number,
    target_position,
    timeline_span,
)

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 28, 44  # room for the y labels, the target's label and the x labels
MAX_X_LABELS = 8


def _f(x: float) -> str:
    """A coordinate with at most one decimal (smaller pages, stable text)."""
    return f"{x:.1f}".removesuffix(".0")


def nice_ticks(top: int) -> list[int]:
    """Up to five round y-axis values from 0 to at least ``top`` (1, 2 or 5 times a power of ten apart)."""
    if top <= 0:
        return [0]
    raw = top / 4
    power = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    step = max(int(step), 1)
    return list(range(0, math.ceil(top / step) * step + 1, step))


def _frame(kind: str, label: str, body: list[str], y_ticks: list[int], y_scale: float, y_title: str) -> str:
    """The ``<svg>`` around a chart's marks: y grid lines with their values, the axes, a caption."""
    base = HEIGHT - BOTTOM
    out = [f'<svg class="chart {kind}" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" '
           f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">',
           f"<title>{escape(label)}</title>"]
    for t in y_ticks:
        y = base - t * y_scale
        out.append(f'<line class="grid" x1="{LEFT}" y1="{_f(y)}" x2="{WIDTH - RIGHT}" y2="{_f(y)}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{_f(y + 4)}" text-anchor="end">{fmt_count(t)}</text>')
    out.append(f'<text class="axis-title" x="12" y="{_f(TOP + (base - TOP) / 2)}" text-anchor="middle" '
               f'transform="rotate(-90 12 {_f(TOP + (base - TOP) / 2)})">{escape(y_title)}</text>')
    out.extend(body)
    out.append(f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}"/>')
    out.append("</svg>")
    return "\n".join(out)


def _y_scale(top: int) -> tuple[list[int], float]:
    ticks = nice_ticks(top)
    return ticks, (HEIGHT - BOTTOM - TOP) / max(ticks[-1], 1)


def _x_label(x: float, text: str, anchor: str = "middle") -> str:
    return f'<text class="tick" x="{_f(x)}" y="{HEIGHT - BOTTOM + 16}" text-anchor="{anchor}">{escape(text)}</text>'


def histogram_svg(bins: list[Mapping[str, Any]], target_bytes: Any) -> str:
    """The data files per size range as bars, with the target file size as a dashed line.

    Bins are drawn at equal widths in the document's order (they are usually powers of two, so this
    is a log axis); bars of ranges that end at or below the target are class ``small``. Empty string
    when there is no file to draw.
    """
    counts = [bin_count(b) for b in bins]
    if not bins or max(counts) == 0:
        return ""
    ticks, scale = _y_scale(max(counts))
    target = number(target_bytes)
    slot = (WIDTH - LEFT - RIGHT) / len(bins)
    base = HEIGHT - BOTTOM
    body: list[str] = []
    for i, (b, n) in enumerate(zip(bins, counts, strict=True)):
        if n == 0:
            continue
        small = bin_is_small(b, target)
        x, h = LEFT + i * slot + slot * 0.1, max(n * scale, 1.0)
        tip = f"{bin_label(b)}: {fmt_count(n)} files, {fmt_bytes(b.get('total_bytes'))}"
        if small:
            tip += " (small files)"
        body.append(f'<rect class="bar{" small" if small else ""}" x="{_f(x)}" y="{_f(base - h)}" '
                    f'width="{_f(max(slot * 0.8, 1.0))}" height="{_f(h)}"><title>{escape(tip)}</title></rect>')
        if slot >= 30:  # the count over its bar when there is room for it
            body.append(f'<text class="value" x="{_f(x + slot * 0.4)}" y="{_f(base - h - 4)}" '
                        f'text-anchor="middle">{fmt_count(n)}</text>')
    every = max(1, math.ceil((len(bins) + 1) / MAX_X_LABELS))
    for i in range(0, len(bins) + 1, every):  # the bounds between bins, under tick marks
        x = LEFT + i * slot
        bound = bins[i].get("lower_bytes") if i < len(bins) else bins[-1].get("upper_bytes")
        if number(bound) is None:
            continue
        body.append(f'<line class="axis" x1="{_f(x)}" y1="{base}" x2="{_f(x)}" y2="{base + 4}"/>')
        body.append(_x_label(x, fmt_bytes(bound)))
    pos = target_position(bins, target)
    if pos is not None and target is not None:
        x = LEFT + pos * slot
        anchor = "end" if pos > len(bins) * 0.7 else "start"
        dx = -4 if anchor == "end" else 4
        body.append(f'<line class="target" x1="{_f(x)}" y1="{TOP - 14}" x2="{_f(x)}" y2="{base}">'
                    f"<title>target file size {escape(fmt_bytes(target))}</title></line>")
        body.append(f'<text class="target-label" x="{_f(x + dx)}" y="{TOP - 6}" text-anchor="{anchor}">'
                    f"target {escape(fmt_bytes(target))}</text>")
    label = f"Data files by size: {fmt_count(sum(counts))} files in {len(bins)} size ranges"
    return _frame("histogram", label, body, ticks, scale, "files")


def timeline_svg(buckets: list[Mapping[str, Any]]) -> str:
    """Snapshots per time bucket as bars stacked by operation (classes ``op-append``... ``op-other``).

    Empty string when no bucket holds a snapshot.
    """
    stacks = [bucket_operations(b) for b in buckets]
    totals = [sum(s.values()) for s in stacks]
    if not buckets or max(totals) == 0:
        return ""
    ticks, scale = _y_scale(max(totals))
    slot = (WIDTH - LEFT - RIGHT) / len(buckets)
    base = HEIGHT - BOTTOM
    body: list[str] = []
    for i, (b, stack, total) in enumerate(zip(buckets, stacks, totals, strict=True)):
        if total == 0:
            continue
        x, w = LEFT + i * slot + slot * 0.1, max(slot * 0.8, 1.0)
        parts = ", ".join(f"{op} {n}" for op, n in stack.items() if n)
        tip = f"{fmt_time(b.get('start_ms'))} – {fmt_time(b.get('end_ms'))}: {fmt_count(total)} snapshots ({parts})"
        body.append(f'<g class="bucket"><title>{escape(tip)}</title>')
        y = float(base)
        for op in (*OPERATIONS, OTHER):
            if not stack[op]:
                continue
            h = max(stack[op] * scale, 1.0)
            y -= h
            body.append(f'<rect class="seg op-{op}" x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}"/>')
        body.append("</g>")
    span = timeline_span(buckets)
    body.append(_x_label(LEFT, fmt_axis_time(buckets[0].get("start_ms"), span), "start"))
    if len(buckets) >= 3:
        mid = len(buckets) // 2
        body.append(_x_label(LEFT + mid * slot, fmt_axis_time(buckets[mid].get("start_ms"), span)))
    body.append(_x_label(WIDTH - RIGHT, fmt_axis_time(buckets[-1].get("end_ms"), span), "end"))
    label = f"Snapshots over time: {fmt_count(sum(totals))} snapshots in {len(buckets)} periods, by operation"
    return _frame("timeline", label, body, ticks, scale, "snapshots")
