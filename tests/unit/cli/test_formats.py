"""icectl.cli.output.formats: the terminal table (width, whole ids, human values), piped plain text, CSV,
TSV and JSON lines; icectl.cli.output.pager's choice of command."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from rich.console import Console

from icectl.cli.output.formats import terminal_table, write_csv, write_jsonl, write_plain, write_tsv
from icectl.cli.output.human import human_document
from icectl.cli.output.pager import pager_command
from icectl.cli.output.render import to_json
from icectl.results import Column, RowsResult

LOCATION = "s3://bucket/warehouse/db/events"


def rows(n: int = 3) -> list[dict[str, Any]]:
    return [{"snapshot_id": 7_000_000_000_000_000_000 + i, "file_path": f"{LOCATION}/data/part-{i:05d}.parquet",
             "file_size_in_bytes": 1_300_000 * (i + 1), "max_ref_age_ms": 432_000_000, "empty": None,
             "partition": {"day": "2025-01-02", "b": None}, "note": 'say "hi",\tthen\nleave', "flag": i % 2 == 0,
             "raw": b"\x01\x02"}
            for i in range(n)]


COLUMNS = ["snapshot_id", "file_path", "file_size_in_bytes", "max_ref_age_ms", "empty", "partition", "note", "flag",
           "raw"]


def view(n: int = 3, **kw: Any) -> RowsResult:
    return RowsResult("files", "Files of db.events", COLUMNS, rows(n), {"table": "db.events"}, location=LOCATION,
                      **kw)


def draw(result: RowsResult, width: int, **kw: Any) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    with console.capture() as cap:
        console.print(terminal_table(result, width=width, **kw))
    return cap.get().splitlines()


def test_terminal_table_is_human_and_fits() -> None:
    lines = draw(view(terminal_columns=["snapshot_id", "file_path", "file_size_in_bytes", "max_ref_age_ms",
                                        "empty", "partition"]), 80)
    text = "\n".join(lines)
    assert all(len(line) <= 80 for line in lines)
    assert "1.2 MiB" in text and "5d" in text and "432000000" not in text  # human sizes and durations
    assert "data/part-00000.parquet" in text and LOCATION not in text     # paths relative to the table
    assert "empty" not in text                                             # an empty column takes no width
    for r in rows():
        assert sum(str(r["snapshot_id"]) in line for line in lines) == 1  # each id whole, on one line


def test_too_narrow_leaves_columns_out_rather_than_break_ids() -> None:
    lines = draw(view(terminal_columns=["snapshot_id", "file_size_in_bytes", "max_ref_age_ms", "flag"]), 30)
    assert all(len(line) <= 30 for line in lines)
    assert sum("7000000000000000000" in line for line in lines) == 1
    assert "not shown for lack of width" in " ".join(" ".join(lines).split())


def test_chosen_columns_are_shown_even_empty() -> None:
    text = "\n".join(draw(view(), 200, chosen=True))
    assert "empty" in text


def test_enum_and_short_labels() -> None:
    r = RowsResult("files", "F", ["content"], [{"content": 1}, {"content": 0}], {},
                   column_info={"content": Column("enum", labels={0: "data", 1: "position_deletes"},
                                                  short={1: "pos del"})})
    text = "\n".join(draw(r, 80))
    assert "pos del" in text and "data" in text


def test_csv_and_tsv_keep_every_column_and_full_values() -> None:
    out = io.StringIO()
    write_csv(view(), out, to_json)
    got = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [list(g) for g in got] == [COLUMNS] * 3
    for g, r in zip(got, rows(), strict=True):
        assert g["file_path"] == r["file_path"]                 # absolute
        assert int(g["snapshot_id"]) == r["snapshot_id"]
        assert int(g["max_ref_age_ms"]) == 432_000_000          # raw
        assert json.loads(g["partition"]) == r["partition"]     # nested: JSON text
        assert g["note"] == r["note"] and g["empty"] == "" and g["raw"] == "0102"
        assert g["flag"] == ("true" if r["flag"] else "false")
    out = io.StringIO()
    write_tsv(view(), out, to_json)
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and all(len(line.split("\t")) == len(COLUMNS) for line in lines)
    assert 'say "hi",\\tthen\\nleave' in lines[1]


def test_plain_text_is_aligned_without_boxes() -> None:
    out = io.StringIO()
    write_plain(view(50, terminal_columns=["snapshot_id", "file_path", "file_size_in_bytes"]), out, to_json)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["snapshot_id", "file_path", "file_size_in_bytes"]
    assert len(lines) == 51 and not any(c in out.getvalue() for c in "│┃━─")
    starts = {line.index(f"{LOCATION}/data") for line in lines[1:]}
    assert len(starts) == 1  # one column, full absolute paths
    assert lines[1].split()[2] == "1300000"


def test_jsonl() -> None:
    out = io.StringIO()
    write_jsonl([{"a": 1}, {"a": None}], out, to_json)
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [{"a": 1}, {"a": None}]


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "less -FRX"), ({"PAGER": "more"}, "more"), ({"PAGER": "more", "ICECTL_PAGER": "most"}, "most"),
    ({"ICECTL_PAGER": ""}, None), ({"PAGER": "cat"}, None), ({"PAGER": "no-such-pager-xyz -R"}, None)])
def test_pager_command(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str | None) -> None:
    for var in ("PAGER", "ICECTL_PAGER"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr("shutil.which", lambda p: None if p.startswith("no-such") else f"/usr/bin/{p}")
    assert pager_command() == expected


def test_inspect_table_document_on_a_terminal() -> None:
    doc = {"last_updated": "2026-11-25T00:18:13.667+00:00", "format_version": 2,
           "properties": {"history.expire.max-snapshot-age-ms": "432000000", "owner": "root"},
           "totals": {"total-files-size": "1300000", "total-records": "163"}, "current_snapshot_id": 123456789}
    shown = human_document(doc)
    assert shown == {"last_updated": "2026-11-25 00:18:13", "format_version": 2,
                     "properties": {"history.expire.max-snapshot-age-ms": "5d (432000000)", "owner": "root"},
                     "totals": {"total-files-size": "1.2 MiB (1300000)", "total-records": "163"},
                     "current_snapshot_id": 123456789}


def test_relative_paths_ignore_a_file_scheme_on_either_side() -> None:
    from icectl.cli.output.human import relative_path

    assert relative_path("/wh/t/data/a.parquet", "/wh/t") == "data/a.parquet"
    assert relative_path("file:/wh/t/data/a.parquet", "/wh/t") == "data/a.parquet"  # Spark's local paths
    assert relative_path("/wh/t/data/a.parquet", "file:/wh/t/") == "data/a.parquet"
    assert relative_path("/wh/t2/data/a.parquet", "/wh/t") == "/wh/t2/data/a.parquet"  # another table: whole
