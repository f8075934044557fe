"""icectl.cli.output.health.html: the health page is one self-contained document whose charts say what the
health document says (bar heights follow the counts, the target line sits where the target size
falls), that loads nothing from anywhere, and in which no string from metadata becomes markup."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from support.health_docs import HOSTILE, MiB, empty_doc, healthy_doc, hostile_doc, unhealthy_doc
from support.html_tree import Element, parse

from icectl.cli.output.health.html import health_html


def _page(*docs: dict[str, Any]) -> Element:
    return parse(health_html(list(docs)))


def test_page_has_figures_checks_recommendations_and_both_charts() -> None:
    doc = unhealthy_doc()
    html = health_html([doc])
    assert html.startswith("<!DOCTYPE html>")
    page = parse(html)
    [sec] = page.find_all("section", "table-report")
    assert sec.find("h2").text() == "db.events"
    assert "needs attention (4 of 7 checks crossed)" in sec.find("span", "badge").text()
    # the checks: crossed first, highlighted, each with its threshold and (when any) its command
    rows = sec.find("table", "checks").find("tbody").find_all("tr")
    assert [r.attrs["data-check"] for r in rows] == [c["id"] for c in doc["checks"] if c["crossed"]] + [
        c["id"] for c in doc["checks"] if not c["crossed"]]
    crossed = [r for r in rows if "crossed" in r.classes]
    assert len(crossed) == 4 and all("✖ crossed" in r.find("td", "status").text() for r in crossed)
    manifests = next(r for r in rows if r.attrs["data-check"] == "manifests.count")
    assert [td.text() for td in manifests.find_all("td", "num")] == ["2,216", "500"]
    assert manifests.find("code").text() == "icectl compact db.events"
    oldest = next(r for r in rows if r.attrs["data-check"] == "snapshots.oldest_age")
    assert [td.text() for td in oldest.find_all("td", "num")] == ["31d", "1w"]
    assert [c.text() for c in sec.find("ol", "recs").find_all("code")] == doc["recommendations"]
    # the key figures, in words
    cards = {c.find("h4").text(): c for c in sec.find_all("div", "card")}
    assert {"Snapshots", "Metadata files", "Manifests", "Data files", "Delete files"} <= set(cards)
    assert "512 MiB" in cards["Data files"].text() and "2,175 (99.8%)" in cards["Data files"].text()
    assert [svg.attrs["class"] for svg in sec.find_all("svg")] == ["chart histogram", "chart timeline"]


def test_histogram_bars_follow_the_counts_and_the_target_line_sits_at_the_target() -> None:
    doc = unhealthy_doc()
    bins = doc["data_files"]["size_histogram"]
    svg = _page(doc).find("svg", "histogram")
    bars = svg.find_all("rect", "bar")
    nonzero = [b for b in bins if b["count"]]
    assert len(bars) == len(nonzero)
    # heights are proportional to the counts (to the drawing's rounding)
    tallest = max(bars, key=lambda r: r.num("height"))
    top = max(b["count"] for b in bins)
    for rect, b in zip(bars, nonzero, strict=True):
        assert rect.num("height") == pytest.approx(max(b["count"] / top * tallest.num("height"), 1), abs=0.15)
        assert f"{b['count']:,} files" in rect.find("title").text()
    # every range ending at or below 512 MiB is "small"; the target line is right of every such bar
    assert all("small" in r.classes for r in bars)
    [target] = svg.find_all("line", "target")
    assert all(target.num("x1") >= r.num("x") + r.num("width") for r in bars)
    slot = (bars[1].num("x") - bars[0].num("x")) / (bins.index(nonzero[1]) - bins.index(nonzero[0]))
    boundary = next(i for i, b in enumerate(bins) if b["lower_bytes"] == 512 * MiB)
    # at the boundary between the 256-512 MiB and 512 MiB-1 GiB ranges (a range is ~30 units wide;
    # the slot measured from rounded coordinates is off by a little)
    left = bars[0].num("x") - 0.1 * slot
    assert target.num("x1") == pytest.approx(left + (boundary - bins.index(nonzero[0])) * slot, abs=1.5)
    assert "target 512 MiB" in svg.find("text", "target-label").text()


def test_a_large_file_is_not_small_and_a_target_inside_a_range_falls_inside_it() -> None:
    doc = unhealthy_doc()
    doc["data_files"]["target_file_size_bytes"] = 768 * MiB  # between 512 MiB and 1 GiB
    doc["data_files"]["size_histogram"][-1]["count"] = 3  # [1 GiB, ∞)
    svg = _page(doc).find("svg", "histogram")
    bars = svg.find_all("rect", "bar")
    assert ["small" in r.classes for r in bars] == [True] * (len(bars) - 1) + [False]
    x = svg.find("line", "target").num("x1")
    slot = bars[-1].num("width") / 0.8
    left_of_range = bars[-1].num("x") - 0.1 * slot - slot  # the [512 MiB, 1 GiB) range is the one before
    assert left_of_range < x < left_of_range + slot


def test_small_ranges_follow_the_documents_small_flags() -> None:
    """`icectl health` flags the ranges under the small-file size (a fraction of the target); the page
    colours and names exactly those."""
    doc = unhealthy_doc()
    doc["data_files"]["small_file_bytes"] = 384 * MiB
    for b in doc["data_files"]["size_histogram"]:
        b["small"] = b["upper_bytes"] is not None and b["upper_bytes"] <= 1 * MiB
    page = _page(doc)
    bars = page.find("svg", "histogram").find_all("rect", "bar")
    nonzero = [b for b in doc["data_files"]["size_histogram"] if b["count"]]
    assert ["small" in r.classes for r in bars] == [b["small"] for b in nonzero] == [True, True, True, True, False]
    assert "small files (under 384 MiB)" in page.find("ul", "legend").text()
    doc["checks"][3]["comparison"] = ">="
    row = next(r for r in _page(doc).find_all("tr") if r.attrs.get("data-check") == "manifests.count")
    assert [td.text() for td in row.find_all("td", "num")] == ["2,216", "≥ 500"]


def test_timeline_stacks_each_period_by_operation() -> None:
    doc = unhealthy_doc()
    svg = _page(doc).find("svg", "timeline")
    groups = svg.find_all("g", "bucket")
    assert len(groups) == len(doc["timeline"])
    for g, bucket in zip(groups, doc["timeline"], strict=True):
        segs = g.find_all("rect", "seg")
        ops = bucket["operations"]
        known = {op: n for op, n in ops.items() if op in ("append", "overwrite", "delete", "replace")}
        expected = [f"op-{op}" for op in ("append", "overwrite", "delete", "replace") if known.get(op)]
        if len(known) < len(ops):
            expected.append("op-other")
        assert [next(c for c in s.classes if c.startswith("op-")) for s in segs] == expected
        # stacked: each segment sits on the one below it, and the stack's height follows the count
        for lower, upper in itertools.pairwise(segs):
            assert upper.num("y") + upper.num("height") == pytest.approx(lower.num("y"), abs=0.1)
        assert f"{bucket['snapshots']} snapshots" in g.find("title").text()
    heights = [sum(s.num("height") for s in g.find_all("rect", "seg")) for g in groups]
    totals = [b["snapshots"] for b in doc["timeline"]]
    assert heights.index(max(heights)) == totals.index(max(totals))
    # the legend (outside the svg) names each operation with its count: words, not only colours
    text = _page(doc).find_all("ul", "legend")[1].text()
    assert "append 2,708" in text and "other 1" in text


def test_the_page_loads_nothing_and_runs_nothing() -> None:
    html = health_html([unhealthy_doc(), hostile_doc(), healthy_doc()])
    page = parse(html)
    assert not page.find_all("script") and not page.find_all("img") and not page.find_all("link")
    assert not page.find_all("iframe") and not page.find_all("object")
    for el in page.iter():
        for name, value in el.attrs.items():
            assert not name.startswith("on"), (el.tag, name)
            if name in ("src", "href", "srcset", "action", "poster"):
                assert (value or "").startswith("#"), (el.tag, name, value)  # in-page links only
    style = "".join(s.text() for s in page.find_all("style"))
    assert "url(" not in style and "@import" not in style and "@font-face" not in style
    # the only URL is the SVG namespace, which is a name, not a download
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) == {"http://www.w3.org/2000/svg"}
    csp = next(m for m in page.find_all("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in (csp.attrs["content"] or "")


def test_strings_from_metadata_are_text_never_markup() -> None:
    doc = hostile_doc()
    html = health_html([doc, unhealthy_doc()])
    page = parse(html)
    assert not page.find_all("script") and not page.find_all("img")
    assert "<script" not in html and "<img" not in html
    assert not any(name == "onerror" for el in page.iter() for name in el.attrs)
    sec = page.find_all("section", "table-report")[0]
    assert sec.find("h2").text() == doc["table"]  # shown as written, once unescaped by the parser
    assert HOSTILE in sec.find("table", "partitions").text()
    assert HOSTILE in sec.find("table", "checks").text()  # the check's message
    assert f"icectl compact {doc['table']}" in [c.text() for c in sec.find("ol", "recs").find_all("code")]
    assert any(HOSTILE in li.text() for li in sec.find_all("li", "mono"))  # orphan paths
    assert page.find("title").text().startswith("icectl health: " + doc["table"])
    # the run's overview links to each table by a generated id, never by the table's name
    links = [a.attrs["href"] for a in page.find("table", "summary").find_all("a")]
    assert links == ["#table-1", "#table-2"]
    assert [s.attrs["id"] for s in page.find_all("section", "table-report")] == ["table-1", "table-2"]


def test_empty_table_draws_no_chart_and_says_so() -> None:
    page = _page(empty_doc())
    assert not page.find_all("svg")
    texts = [p.text() for p in page.find_all("p", "empty")]
    assert texts == ["No data files to draw.", "No snapshots to draw."]
    assert "✔ healthy" in page.find("span", "badge").text()


@pytest.mark.parametrize("doc", [
    {"view": "health", "table": "db.bare"},  # every section missing
    {"table": "db.nulls", "snapshots": None, "data_files": {"size_histogram": None, "count": None},
     "timeline": None, "checks": None, "recommendations": None, "delete_files": {"top_partitions": None}},
    {"table": "db.odd", "data_files": {"size_histogram": [{"lower_bytes": 0, "upper_bytes": None, "count": 5}],
                                       "target_file_size_bytes": None},
     "timeline": [{"start_ms": None, "end_ms": None, "snapshots": 2, "operations": {}}]},
])
def test_incomplete_documents_still_draw(doc: dict[str, Any]) -> None:
    page = _page(doc)
    assert page.find("h2").text() == doc["table"]
    if doc["table"] == "db.odd":  # one open-ended range and an undated period: drawn, without labels or target
        assert len(page.find("svg", "histogram").find_all("rect", "bar")) == 1
        assert not page.find("svg", "histogram").find_all("line", "target")
        assert [s.attrs["class"] for s in page.find("svg", "timeline").find_all("rect")] == ["seg op-other"]


def test_a_table_that_failed_shows_its_error_and_several_tables_get_an_overview() -> None:
    failed = {"view": "health", "table": "db.gone", "error": "table not found: db.gone"}
    page = _page(unhealthy_doc(), failed, healthy_doc())
    rows = page.find("table", "summary").find("tbody").find_all("tr")
    assert [r.find("a").text() for r in rows] == ["db.events", "db.gone", "db.small"]
    assert [r.find("td", "status").text() for r in rows] == [
        "✖ needs attention (4 of 7 checks crossed)", "✖ could not be checked", "✔ healthy"]
    gone = page.find_all("section", "table-report")[1]
    assert gone.find("p", "error").text() == "table not found: db.gone" and not gone.find_all("svg")
    assert "3 tables, 2 need attention" in page.find("header").text()
    assert health_html([]).count("<section") == 0
