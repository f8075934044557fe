"""The health page in a real browser (issue 16's acceptance): Debian's headless Chromium renders the
page `icectl health --html` writes, draws both charts with their bars, runs no script that fails,
loads nothing, and paints a screenshot with the charts' and the crossed checks' colours in it.

Chromium is the judge of the markup, CSS and SVG: its own parser and layout report what it drew (a
probe script placed before the page's Content-Security-Policy writes the laid-out chart boxes, the
computed bar colour, every script error and every blocked load into the DOM, which `--dump-dom`
prints). A control page with a failing script and an external image shows the probe sees both.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.health_docs import empty_doc, hostile_doc, unhealthy_doc
from support.html_tree import Element, parse
from support.png import read_png
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.cli.output.health.html import CSS, health_html
from icectl.cli.registry import COMMANDS

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDTH, HEIGHT = 1200, 1600

PROBE = """<script>(function () {
  var d = document.documentElement, errors = [], blocked = [];
  window.addEventListener('error', function (e) {  // script errors, and (captured) failed loads
    errors.push(String(e.message || (e.target && e.target.tagName) || e.type));
    d.setAttribute('data-errors', errors.join(' | '));
  }, true);
  document.addEventListener('securitypolicyviolation', function (e) {
    blocked.push(e.violatedDirective + ' ' + e.blockedURI);
    d.setAttribute('data-blocked', blocked.join(' | '));
  });
  window.addEventListener('load', function () {
    var charts = [];
    document.querySelectorAll('svg.chart').forEach(function (s) {
      var r = s.getBoundingClientRect(), marks = 0;
      s.querySelectorAll('rect').forEach(function (m) {
        var b = m.getBoundingClientRect();
        if (b.width > 0 && b.height > 0) marks++;
      });
      charts.push(s.getAttribute('class') + ' ' + Math.round(r.width) + 'x' + Math.round(r.height) + ' ' + marks);
    });
    d.setAttribute('data-charts', charts.join(';'));
    var bar = document.querySelector('svg.histogram rect.bar');
    d.setAttribute('data-bar-fill', bar ? getComputedStyle(bar).fill : '');
    d.setAttribute('data-resources', String(performance.getEntriesByType('resource').length));
    d.setAttribute('data-loaded', 'yes');
  });
})();</script>"""


def _chromium(tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{name}"
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=90, check=False)


def _probed(tmp_path: Path, name: str, html: str) -> tuple[Element, list[str]]:
    """The DOM Chromium holds after loading ``html`` with the probe in front, and its console lines."""
    assert html.count("<head>") == 1
    page = tmp_path / f"{name}.html"
    page.write_text(html.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    run = _chromium(tmp_path, name, "--enable-logging=stderr", "--v=0", "--dump-dom", page.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    dom = parse(run.stdout)
    [root] = dom.find_all("html")
    assert root.attrs.get("data-loaded") == "yes", "the load event never came"
    return root, [line for line in run.stderr.splitlines() if ":CONSOLE" in line]


def _colour(var: str, dark: bool) -> tuple[int, ...]:
    """A colour of the page's palette (light: the first definition of ``var``, dark: the second)."""
    found = re.findall(rf"--{var}: #([0-9a-f]{{6}})", CSS)
    hexa = found[1 if dark else 0]
    return tuple(int(hexa[i:i + 2], 16) for i in (0, 2, 4))


def _docs() -> list[dict[str, Any]]:
    return [unhealthy_doc(), hostile_doc(), empty_doc()]


def test_chromium_draws_the_charts_without_errors_or_loads(tmp_path: Path) -> None:
    docs = _docs()
    root, console = _probed(tmp_path, "health", health_html(docs))
    assert root.attrs.get("data-errors") is None, root.attrs["data-errors"]
    assert root.attrs.get("data-blocked") is None, root.attrs["data-blocked"]  # nothing tried to load or run
    assert root.attrs["data-resources"] == "0"
    assert console == []
    # the markup survived a browser's parser: the sections, the bars and the stacked periods are there
    sections = root.find_all("section", "table-report")
    assert [s.find("h2").text() for s in sections] == [d["table"] for d in docs]
    assert not root.find_all("img") and len(root.find_all("script")) == 1  # the probe's, nothing of the page's
    for sec, doc in zip(sections[:2], docs[:2], strict=True):
        bars = sec.find("svg", "histogram").find_all("rect", "bar")
        assert len(bars) == sum(1 for b in doc["data_files"]["size_histogram"] if b["count"])
        assert len(sec.find("svg", "timeline").find_all("g", "bucket")) == len(doc["timeline"])
        assert sec.find("svg", "histogram").find_all("line", "target")
    assert not sections[2].find_all("svg")  # the empty table: words instead of charts
    # and it laid them out: every chart has a size and every bar a visible box
    charts = root.attrs["data-charts"].split(";")
    assert len(charts) == 4
    for chart, doc in zip(charts, [docs[0], docs[0], docs[1], docs[1]], strict=True):
        kind, size, marks = chart.rsplit(" ", 2)
        w, h = (int(v) for v in size.split("x"))
        assert 300 <= w <= WIDTH and 100 <= h, chart
        expected = (sum(1 for b in doc["data_files"]["size_histogram"] if b["count"]) if "histogram" in kind
                    else sum(len([n for n in b["operations"].values() if n]) for b in doc["timeline"]))
        assert int(marks) == expected, chart
    fill = root.attrs["data-bar-fill"]
    assert fill in (f"rgb({', '.join(map(str, _colour('small', dark)))})" for dark in (False, True)), fill


def test_screenshot_shows_the_page_with_its_charts(tmp_path: Path) -> None:
    page, png = tmp_path / "health.html", tmp_path / "health.png"
    page.write_text(health_html(_docs()), encoding="utf-8")
    run = _chromium(tmp_path, "shot", f"--screenshot={png}", f"--window-size={WIDTH},{HEIGHT}",
                    "--hide-scrollbars", page.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    image = read_png(png.read_bytes())
    assert (image.width, image.height) == (WIDTH, HEIGHT)
    colours = image.colours(step=2)
    background = image.pixel(2, 2)
    dark = background == _colour("bg", True)
    assert background == _colour("bg", dark)
    assert len(colours) > 50 and colours[background] < 0.9 * sum(colours.values())  # not one flat colour
    # the first table's charts are on screen: both bar colours are painted, each over many pixels
    # (a 1-pixel slip of anti-aliasing aside, these are the fills of the bars and stacked segments)
    assert colours[_colour("small", dark)] > 300, "histogram bars (below target) not painted"
    assert colours[_colour("append", dark)] > 1000, "snapshot bars not painted"
    assert colours[_colour("bad-bg", dark)] > 5000, "crossed checks not highlighted"


def test_probe_sees_a_failing_script_and_a_blocked_load(tmp_path: Path) -> None:
    """The control: without it, a probe that saw nothing would pass the first test too. A script
    placed before the page's policy runs and fails; an image and a script in the page are blocked."""
    broken = health_html([unhealthy_doc()]).replace("<head>", "<head><script>undefinedFunction()</script>", 1)
    broken = broken.replace("</body>", '<img src="http://192.0.2.1/x.png"><script>document.title = 1</script></body>')
    root, console = _probed(tmp_path, "broken", broken)
    assert "undefinedFunction is not defined" in (root.attrs.get("data-errors") or "")
    blocked = root.attrs.get("data-blocked") or ""
    assert "img-src http://192.0.2.1/x.png" in blocked and "script-src" in blocked
    assert console, "Chromium logged nothing for the failing script and the blocked loads"


@pytest.mark.skipif("health" not in COMMANDS or importlib.util.find_spec("support.appends") is None,
                    reason="needs `icectl health` and tests/support/appends.py (helper C's branch)")
def test_icectl_health_html_of_a_real_table_renders(tmp_path: Path) -> None:
    """End to end: `icectl health --html` of a table of 60 one-file appends an hour apart. The charts
    say what was built (60 files, 60 appends), in the page Chromium draws and on the terminal."""
    from support.appends import build_appends  # C's builder: on main once both branches are merged

    n = 60
    table = tmp_path / "db" / "appends"
    build_appends(table, n, step_ms=3_600_000)
    page = tmp_path / "health.html"
    env = {"ICECTL_WAREHOUSE": str(tmp_path), "ICECTL_CONFIG": ""}
    run = CliRunner().invoke(app, ["health", str(table), "--json", "--html", str(page)], env=env)
    assert run.exit_code in (0, 7), run.stderr
    doc = json.loads(run.stdout)
    html = page.read_text(encoding="utf-8")
    assert html == health_html([doc])  # the page is the document's, nothing else
    root, console = _probed(tmp_path, "real", html)
    assert root.attrs.get("data-errors") is None and root.attrs.get("data-blocked") is None and console == []
    bins = [b for b in doc["data_files"]["size_histogram"] if b["count"]]
    histogram, snapshots = root.attrs["data-charts"].split(";")
    assert histogram.startswith("chart histogram ") and int(histogram.rsplit(" ", 1)[1]) == len(bins)
    assert snapshots.startswith("chart timeline ")
    svg = root.find("svg", "histogram")
    assert sum(int(re.search(r": ([\d,]+) files", r.find("title").text())[1].replace(",", ""))
               for r in svg.find_all("rect", "bar")) == n  # one file per append
    stacked = [int(re.search(r": ([\d,]+) snapshots", g.find("title").text())[1].replace(",", ""))
               for g in root.find("svg", "timeline").find_all("g", "bucket")]
    assert sum(stacked) == n and len(stacked) > 1
    assert {s.attrs["class"] for s in root.find("svg", "timeline").find_all("rect")} == {"seg op-append"}
    # the terminal report of the same table
    run = CliRunner().invoke(app, ["health", str(table)], env=env)
    assert "Data file sizes" in run.stdout and f"█ append {n}" in run.stdout, run.stdout
