"""icectl.cli.output.health.terminal: the health report on a terminal fits 100 and 120 columns, draws the
file-size histogram and the snapshots-over-time bars with block characters whose lengths follow the
document, and says everything in words and glyphs (no colour needed to read it)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from support.health_docs import empty_doc, healthy_doc, hostile_doc, unhealthy_doc

from icectl.cli.output.health.terminal import bar, health_report
from icectl.cli.output.render import render
from icectl.cli.output.terminal_views import report_renderer
from icectl.ops.health.result import HealthResult

EIGHTHS = {" ": 0, "▏": 1, "▎": 2, "▍": 3, "▌": 4, "▋": 5, "▊": 6, "▉": 7, "█": 8}


def _draw(doc: dict[str, Any], width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None, markup=False, highlight=False,
                      emoji=False, legacy_windows=False)
    console.print(health_report(doc))
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def _bar_eighths(line: str) -> int:
    """The length of a histogram row's bar, in eighths of a cell."""
    drawn = line.split("│", 1)[1]
    return sum(EIGHTHS.get(c, 0) for c in drawn)


def _target_inside_a_range() -> dict[str, Any]:
    doc = unhealthy_doc("db." + "long_name_" * 8)
    doc["data_files"]["target_file_size_bytes"] = 768 << 20
    return doc


@pytest.mark.parametrize("width", [100, 120])
@pytest.mark.parametrize("make", [unhealthy_doc, healthy_doc, empty_doc, hostile_doc, _target_inside_a_range])
def test_report_fits_the_width(width: int, make: Any) -> None:
    lines = _draw(make(), width)
    assert max(cell_len(line) for line in lines) <= width
    assert len(lines) < 90  # a report, not a dump


@pytest.mark.parametrize("width", [100, 120])
def test_report_says_status_checks_and_commands_in_words(width: int) -> None:
    doc = unhealthy_doc()
    lines = _draw(doc, width)
    text = "\n".join(lines)
    assert lines[0] == "✖ db.events — needs attention (4 of 7 checks crossed)"
    for c in doc["checks"]:  # one row per check: its status word, value and threshold in its unit
        [row] = [line for line in lines if f" {c['title']} " in line and ("crossed" in line or " ok " in line)]
        assert row.lstrip().startswith("✖ crossed" if c["crossed"] else "✔ ok")
    [small] = [line for line in lines if " Small data files " in line]
    assert "99.8%" in small and "50%" in small and "icectl compact db.events --data" in small
    recs = lines[lines.index("Recommendations") + 1:][:3]
    assert recs == [f"  {i}. {r}" for i, r in enumerate(doc["recommendations"], 1)]
    assert "current snapshot 8743111222333444555" in text  # an id is never broken
    assert "day=2025-01-02: 9 delete files, 700 deleted records" in text


@pytest.mark.parametrize("width", [100, 120])
def test_histogram_bars_follow_the_counts_and_the_target_line_is_in_place(width: int) -> None:
    lines = _draw(unhealthy_doc(), width)
    start = lines.index("Data file sizes") + 1
    section = lines[start:lines.index("", start)]
    rows = {line.split("│")[0].strip(): line for line in section if "│" in line}
    assert next(iter(rows)) == "4 KiB – 8 KiB" and list(rows)[-1] == "512 MiB – 1 GiB"
    full = _bar_eighths(rows["16 KiB – 32 KiB"])  # 1,200 files: the longest bar
    assert full >= 8 * 60 and rows["16 KiB – 32 KiB"].endswith("1,200 small")
    # "small" in words on every range at or under the target, not on the range above it
    assert [label for label, row in rows.items() if not row.endswith(" small")] == ["512 MiB – 1 GiB"]
    assert _bar_eighths(rows["8 KiB – 16 KiB"]) == pytest.approx(full * 900 / 1200, abs=1)
    assert _bar_eighths(rows["512 KiB – 1 MiB"]) == pytest.approx(full * 35 / 1200, abs=1)
    assert _bar_eighths(rows["256 MiB – 512 MiB"]) >= 1  # 4 files still show
    assert _bar_eighths(rows["1 MiB – 2 MiB"]) == 0
    below = lines.index(rows["256 MiB – 512 MiB"])
    assert "target file size 512 MiB" in lines[below + 1]
    assert lines[below + 2] == rows["512 MiB – 1 GiB"]


def test_target_inside_a_range_is_marked_on_that_row() -> None:
    doc = unhealthy_doc()
    doc["data_files"]["target_file_size_bytes"] = 768 << 20
    [row] = [line for line in _draw(doc, 100) if "target" in line and "│" in line]
    assert row.split("│")[0].strip() == "512 MiB – 1 GiB" and "◂ target 768 MiB in this range" in row


@pytest.mark.parametrize("width", [100, 120])
def test_snapshots_over_time_are_bars_per_period_with_a_legend(width: int) -> None:
    doc = unhealthy_doc()
    lines = _draw(doc, width)
    start = lines.index("Snapshots over time") + 1
    chart = lines[start:start + 8]
    assert chart[0].lstrip().startswith("141 │") and chart[-1].lstrip().startswith("0 │")
    axis = lines[start + 8]
    assert axis.lstrip().startswith("└")
    origin = axis.index("└") + 1
    col_w = (len(axis) - origin) // len(doc["timeline"])
    heights = [sum(1 for row in chart if row[origin + i * col_w:origin + (i + 1) * col_w].strip())
               for i in range(len(doc["timeline"]))]
    totals = [b["snapshots"] for b in doc["timeline"]]
    assert heights == [max(1, round(t / max(totals) * 8)) for t in totals]
    assert "2025-01-01" in lines[start + 9] and lines[start + 9].rstrip().endswith("2025-01-31")
    legend = lines[start + 10]
    for part in ("█ append 2,708", "▓ overwrite 10", "▒ delete 25", "░ replace 5", "▚ other 1"):
        assert part in legend


def test_a_wider_console_still_gets_at_most_120_columns() -> None:
    """Piped output is drawn 400 wide; the report stays readable (a long command wraps in its cell)."""
    doc = unhealthy_doc("db." + "very_long_table_name_" * 4)
    lines = _draw(doc, 400)
    assert max(cell_len(line) for line in lines) <= 120
    assert any(f"icectl compact {doc['table']}" in line for line in lines)  # the recommendations list keeps it whole


def test_empty_table_says_there_is_nothing_to_draw() -> None:
    text = "\n".join(_draw(empty_doc(), 100))
    assert "Data file sizes\n  no data files" in text and "Snapshots over time\n  no snapshots" in text
    assert text.startswith("✔ db.empty — healthy")


def test_control_characters_from_metadata_are_not_sent_to_the_terminal() -> None:
    doc = unhealthy_doc("db.\x1b[2J\x1b]0;owned\x07t")
    text = "\n".join(_draw(doc, 120))
    assert "\x1b" not in text and "\x07" not in text
    assert "db.\\x1b[2J\\x1b]0;owned\\x07t" in text


def test_bar_lengths() -> None:
    assert bar(0, 10) == "" and bar(1, 10) == "█" * 10 and bar(0.5, 3) == "█▌"
    assert bar(1e-9, 10) == "▏"  # a range with files never looks empty


@dataclass
class _Health:
    """A stand-in for the health command's result (the renderer needs view, title, exit code, to_json)."""

    doc: dict[str, Any]
    view: str = "health"
    title: str = "Health"
    exit_code: int = 7
    terminal_report: str = HealthResult.terminal_report

    def to_json(self) -> dict[str, Any]:
        return self.doc


def test_renderer_draws_health_results_with_this_report() -> None:
    assert report_renderer(HealthResult) is health_report  # the result class names its renderer
    out = io.StringIO()
    render(_Health(unhealthy_doc()), as_json=False, out=out)
    assert "Data file sizes" in out.getvalue() and "Snapshots over time" in out.getvalue()
    out = io.StringIO()
    render(_Health(unhealthy_doc()), as_json=True, out=out)
    assert json.loads(out.getvalue()) == unhealthy_doc()  # --json is the document, untouched
