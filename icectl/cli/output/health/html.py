"""``icectl health --html FILE``: one self-contained HTML page for one table or a whole ``--all`` run.

The page is drawn from the health documents (what ``--json`` prints), so it says exactly what the
JSON says. It is one file: inline CSS, inline SVG charts (:mod:`icectl.cli.output.health.svg`), no script,
no font, image or stylesheet from anywhere else, and a Content-Security-Policy that forbids loading
any (so a mail client or an intranet wiki shows it as written). Table names, partition values and
paths come from metadata anyone may have written: every one of them goes through ``html.escape``.
Light or dark follows the reader's system (``prefers-color-scheme``); status is said in words and
symbols, never by colour alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from icectl.cli.output.health.svg import histogram_svg, timeline_svg
from icectl.cli.output.health.words import (
    OPERATIONS,
    OTHER,
    checks,
    crossed_count,
    fmt_count,
    fmt_partition,
    fmt_threshold,
    fmt_time,
    fmt_value,
    histogram,
    is_healthy,
    key_figures,
    operations_used,
    orphan_sample,
    recommendations,
    section,
    small_words,
    status_words,
    timeline,
    top_delete_partitions,
)

# Nothing may load: not a font, an image, a frame or a script (the page has none of its own).
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"

CSS = """
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1b1f24; --muted: #57606a; --line: #d0d7de;
  --card: #f6f8fa; --link: #0969da; --ok: #1a7f37; --bad: #cf222e; --bad-bg: #ffebe9; --bar: #4a78c2;
  --small: #d4802a;
  --append: #4a78c2; --overwrite: #d4802a; --delete: #c8413a; --replace: #3c9a5f; --other: #8a63c9; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9da7b3; --line: #30363d; --card: #161b22; --link: #58a6ff;
    --ok: #3fb950;
    --bad: #ff7b72; --bad-bg: #3d1418; --bar: #6f9be0; --small: #e59a4b; --append: #6f9be0; --overwrite: #e59a4b;
    --delete: #e5625b; --replace: #56b77a; --other: #a888e0; }
}
* { box-sizing: border-box; }
body { margin: 0 auto; padding: 1.5rem; max-width: 1160px; background: var(--bg); color: var(--fg);
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
a { color: var(--link); }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; }
h2 { font-size: 1.3rem; margin: 0; overflow-wrap: anywhere; }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .5rem; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace;
  font-size: .9em; overflow-wrap: anywhere; }
code.cmd { user-select: all; background: var(--card); border: 1px solid var(--line); border-radius: 4px;
  padding: .1em .35em; }
.muted { color: var(--muted); }
section.table-report { border: 1px solid var(--line); border-radius: 8px; padding: 1.2rem 1.4rem;
  margin: 1.5rem 0; }
.head { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: baseline; }
.badge { font-weight: 600; border-radius: 999px; padding: .1em .7em; border: 1px solid currentColor;
  white-space: nowrap; }
.badge.ok { color: var(--ok); } .badge.bad { color: var(--bad); }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(280px, 1fr)); gap: .7rem;
  margin-top: 1rem; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: .6rem .8rem; }
.card h4 { margin: 0 0 .3rem; font-size: .95rem; }
.card dl { margin: 0; display: grid; grid-template-columns: auto 1fr; gap: .1rem .8rem; font-size: .9rem; }
.card dt { color: var(--muted); } .card dd { margin: 0; text-align: right; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
tr.crossed td { background: var(--bad-bg); }
tr.crossed td.status { color: var(--bad); font-weight: 600; }
td.status { white-space: nowrap; color: var(--ok); }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 1rem; }
figure { margin: 0; } figcaption { font-weight: 600; margin-bottom: .3rem; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg .grid { stroke: var(--line); stroke-width: 1; }
svg .axis { stroke: var(--muted); stroke-width: 1; }
svg text { fill: var(--muted); font-size: 13px; font-family: inherit; }
svg text.value { fill: var(--fg); font-size: 12px; }
svg .bar { fill: var(--bar); } svg .bar.small { fill: var(--small); }
svg .target { stroke: var(--fg); stroke-width: 1.5; stroke-dasharray: 5 4; }
svg text.target-label { fill: var(--fg); font-weight: 600; }
svg .op-append { fill: var(--append); } svg .op-overwrite { fill: var(--overwrite); }
svg .op-delete { fill: var(--delete); } svg .op-replace { fill: var(--replace); } svg .op-other { fill: var(--other); }
.legend { list-style: none; padding: 0; margin: .3rem 0 0; display: flex; flex-wrap: wrap; gap: .3rem 1rem;
  font-size: .85rem; color: var(--muted); }
.swatch { display: inline-block; width: .8em; height: .8em; border-radius: 2px; margin-right: .3em;
  vertical-align: -.05em; }
.swatch.bar { background: var(--bar); } .swatch.small { background: var(--small); }
.swatch.target { border: 1.5px dashed var(--fg); width: 0; border-radius: 0; }
.swatch.op-append { background: var(--append); } .swatch.op-overwrite { background: var(--overwrite); }
.swatch.op-delete { background: var(--delete); } .swatch.op-replace { background: var(--replace); }
.swatch.op-other { background: var(--other); }
p.empty { color: var(--muted); border: 1px dashed var(--line); border-radius: 6px; padding: 2rem 1rem;
  text-align: center; }
ol.recs { padding-left: 1.4rem; } ol.recs li { margin: .2rem 0; }
.error { color: var(--bad); }
footer { color: var(--muted); font-size: .85rem; margin-top: 2rem; }
"""


def e(value: Any) -> str:
    """Any value as escaped HTML text (quotes too: some land in attributes)."""
    return escape("" if value is None else str(value), quote=True)


def _anchor(i: int) -> str:
    return f"table-{i + 1}"


def _badge(doc: Mapping[str, Any]) -> str:
    ok = is_healthy(doc)
    return f'<span class="badge {"ok" if ok else "bad"}">{"✔" if ok else "✖"} {e(status_words(doc))}</span>'


def _figures(doc: Mapping[str, Any]) -> str:
    cards = []
    for title, rows in key_figures(doc):
        items = "".join(f"<dt>{e(label)}</dt><dd>{e(text)}</dd>" for label, text in rows)
        cards.append(f'<div class="card"><h4>{e(title)}</h4><dl>{items}</dl></div>')
    return f'<div class="figures">{"".join(cards)}</div>'


def _checks_table(doc: Mapping[str, Any]) -> str:
    items = checks(doc)
    if not items:
        return '<p class="muted">No checks in this document.</p>'
    rows = []
    for c in items:
        crossed = bool(c.get("crossed"))
        rec = c.get("recommendation")
        rec_html = f'<code class="cmd">{e(rec)}</code>' if rec else '<span class="muted">–</span>'
        rows.append(
            f'<tr class="{"crossed" if crossed else "ok"}" data-check="{e(c.get("id"))}">'
            f'<td class="status">{"✖ crossed" if crossed else "✔ ok"}</td>'
            f"<td>{e(c.get('title') or c.get('id'))}<br><span class=\"muted\">{e(c.get('message'))}</span></td>"
            f'<td class="num">{e(fmt_value(c.get("value"), c.get("unit")))}</td>'
            f'<td class="num">{e(fmt_threshold(c))}</td>'
            f"<td>{rec_html}</td></tr>")
    head = "<tr><th>Status</th><th>Check</th><th>Value</th><th>Threshold</th><th>Recommendation</th></tr>"
    return f'<table class="checks"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _recommendations(doc: Mapping[str, Any]) -> str:
    recs = recommendations(doc)
    if not recs:
        return '<p class="muted">Nothing to run.</p>'
    return '<ol class="recs">' + "".join(f'<li><code class="cmd">{e(r)}</code></li>' for r in recs) + "</ol>"


def _histogram_figure(doc: Mapping[str, Any]) -> str:
    target = section(doc, "data_files").get("target_file_size_bytes")
    svg = histogram_svg(histogram(doc), target)
    body = svg or '<p class="empty">No data files to draw.</p>'
    legend = ('<ul class="legend"><li><span class="swatch bar"></span>files per size range</li>'
              f'<li><span class="swatch small"></span>small files ({e(small_words(doc))})</li>'
              '<li><span class="swatch target"></span>target file size</li></ul>') if svg else ""
    return f'<figure><figcaption>Data file sizes</figcaption>{body}{legend}</figure>'


def _timeline_figure(doc: Mapping[str, Any]) -> str:
    buckets = timeline(doc)
    svg = timeline_svg(buckets)
    body = svg or '<p class="empty">No snapshots to draw.</p>'
    legend = ""
    if svg:
        used = operations_used(buckets)
        legend = '<ul class="legend">' + "".join(
            f'<li><span class="swatch op-{op}"></span>{e(op)} {fmt_count(used[op])}</li>'
            for op in (*OPERATIONS, OTHER) if op in used) + "</ul>"
    return f'<figure><figcaption>Snapshots over time</figcaption>{body}{legend}</figure>'


def _delete_partitions(doc: Mapping[str, Any]) -> str:
    parts = top_delete_partitions(doc)
    if not parts:
        return ""
    rows = "".join(
        f'<tr><td class="mono">{e(fmt_partition(p.get("partition")))}</td>'
        f'<td class="num">{e(fmt_count(p.get("delete_files")))}</td>'
        f'<td class="num">{e(fmt_count(p.get("delete_records")))}</td></tr>' for p in parts)
    head = "<tr><th>Partition</th><th>Delete files</th><th>Deleted records</th></tr>"
    return (f"<h3>Partitions with the most deletes</h3>"
            f'<table class="partitions"><thead>{head}</thead><tbody>{rows}</tbody></table>')


def _orphans(doc: Mapping[str, Any]) -> str:
    sample = orphan_sample(doc)
    if not sample:
        return ""
    items = "".join(f'<li class="mono">{e(p)}</li>' for p in sample)
    return f"<h3>Orphan file candidates (sample)</h3><ul>{items}</ul>"


def table_section(doc: Mapping[str, Any], i: int) -> str:
    """One table's report: status, key figures, charts, checks, recommendations."""
    head = (f'<div class="head"><h2>{e(doc.get("table"))}</h2>{_badge(doc)}</div>'
            f'<div class="muted mono">{e(doc.get("location"))}</div>')
    if doc.get("error") is not None:
        body = f'<p class="error">{e(doc.get("error"))}</p>'
    else:
        # the pictures first, for people who would rather look than read; then the checks in words
        body = (f'{_figures(doc)}<h3>Charts</h3><div class="charts">{_histogram_figure(doc)}{_timeline_figure(doc)}'
                f"</div><h3>Checks</h3>{_checks_table(doc)}<h3>Recommendations</h3>{_recommendations(doc)}"
                f"{_delete_partitions(doc)}{_orphans(doc)}")
    return f'<section class="table-report" id="{_anchor(i)}">{head}{body}</section>'


def _summary(docs: Sequence[Mapping[str, Any]]) -> str:
    """The run's overview (several tables): each table's status, linked to its section."""
    rows = "".join(
        f'<tr class="{"ok" if is_healthy(d) else "crossed"}"><td><a href="#{_anchor(i)}">{e(d.get("table"))}</a></td>'
        f'<td class="status">{"✔" if is_healthy(d) else "✖"} {e(status_words(d))}</td>'
        f'<td class="num">{fmt_count(crossed_count(d))}</td></tr>' for i, d in enumerate(docs))
    head = "<tr><th>Table</th><th>Status</th><th>Crossed checks</th></tr>"
    return f'<table class="summary"><thead>{head}</thead><tbody>{rows}</tbody></table>'


def health_html(docs: list[dict[str, Any]]) -> str:
    """The HTML page of one or more health documents (one per table, as ``--json`` prints them)."""
    docs = [d for d in docs if isinstance(d, Mapping)]
    attention = sum(1 for d in docs if not is_healthy(d))
    names = ", ".join(str(d.get("table")) for d in docs[:3]) + (", …" if len(docs) > 3 else "")
    checked = max((d["checked_at_ms"] for d in docs if isinstance(d.get("checked_at_ms"), int)), default=None)
    lead = (f"{len(docs)} table{'' if len(docs) == 1 else 's'}, "
            f"{attention} need{'s' if attention == 1 else ''} attention" if docs else "No tables were checked.")
    if checked is not None:
        lead += f" · checked {fmt_time(checked)} UTC"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="color-scheme" content="light dark">',
        f"<title>{e(f'icectl health: {names}' if docs else 'icectl health')}</title>",
        f"<style>{CSS}</style></head><body>",
        f'<header><h1>Table health</h1><p class="muted">{e(lead)}</p></header>',
    ]
    if len(docs) > 1:
        parts.append(_summary(docs))
    parts.extend(table_section(d, i) for i, d in enumerate(docs))
    parts.append('<footer>Drawn by icectl health from the same figures as <code>--json</code>. Sizes in '
                 "binary units (1 MiB = 1,048,576 bytes), times in UTC.</footer></body></html>")
    return "\n".join(parts) + "\n"
