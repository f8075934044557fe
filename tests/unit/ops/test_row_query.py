"""icectl.cli.output.row_query: --columns, --where, --sort and --limit over a view's rows."""

from __future__ import annotations

from typing import Any

import pytest

from icectl.cli.output.row_query import RowQuery, apply_query, parse_sort, parse_where, query_rows
from icectl.errors import UsageError
from icectl.results import Column, RowsResult

ROWS: list[dict[str, Any]] = [
    {"content": 0, "file_path": "/t/data/a.parquet", "partition": {"ts_day": "2025-01-01", "b": 3},
     "record_count": 10, "summary": {"added-records": "9"}, "flag": True},
    {"content": 1, "file_path": "/t/data/b.parquet", "partition": {"ts_day": "2025-01-02", "b": 12},
     "record_count": 2, "summary": {"added-records": "10"}, "flag": False},
    {"content": 0, "file_path": "/t/data/c.parquet", "partition": {"ts_day": "2025-01-03", "b": None},
     "record_count": 100, "summary": {}, "flag": True},
    {"content": 2, "file_path": "/t/data/d.parquet", "partition": {"ts_day": None, "b": 1},
     "record_count": 10, "summary": {"added-records": "100"}, "flag": False},
]
COLUMNS = ["content", "file_path", "partition", "record_count", "summary", "flag"]


def view() -> RowsResult:
    return RowsResult("files", "Files", COLUMNS, iter([dict(r) for r in ROWS]), {"table": "t"},
                      column_info={"content": Column("enum", labels={0: "data", 1: "position_deletes",
                                                                     2: "equality_deletes"})},
                      fields={"ts_day": ("partition", "ts_day"), "b": ("partition", "b")})


def paths(result: RowsResult) -> list[str]:
    return [r["file_path"][-9:-8] for r in result.rows]


@pytest.mark.parametrize(("where", "expected"), [
    ("content=data", "ac"),                       # an enum by its name
    ("content=0", "ac"),                          # ... or by its code
    ("content!=data", "bd"),
    ("ts_day>=2025-01-02 and content=data", "c"),  # a partition field; a date as ISO text
    ("ts_day<2025-01-02", "a"),                   # null matches no ordering comparison
    ("ts_day=null", "d"),
    ("ts_day!=null", "abc"),
    ("b>2", "ab"),                                # numbers compare as numbers: 12 > 2 (as text "12" < "2")
    ("record_count<=10", "abd"),
    ("summary.added-records>=10", "bd"),          # a summary figure ("100") compares as a number
    ("flag=true", "ac"),
    ("file_path='/t/data/b.parquet'", "b"),       # quotes are optional
    ("partition.b = 12", "b"),                    # a dotted path; spaces around the operator
])
def test_where(where: str, expected: str) -> None:
    assert "".join(paths(query_rows(view(), where=where))) == expected


def test_timestamps_compare_as_iso_text() -> None:
    r = RowsResult("snapshots", "S", ["committed_at"], [{"committed_at": f"2025-01-02T1{i}:00:00.000+00:00"}
                                                       for i in range(3)], {})
    assert len(list(query_rows(r, where="committed_at>=2025-01-02 11:00").rows)) == 2  # as a terminal shows it
    r.rows = [{"committed_at": f"2025-01-0{i}T00:00:00.000+00:00"} for i in (1, 2, 3)]
    assert len(list(query_rows(r, where="committed_at>2025-01-02").rows)) == 2  # a date: the day's start


def test_sort_limit_columns() -> None:
    r = query_rows(view(), sort="-record_count,file_path", limit=3, columns="file_path,record_count,ts_day")
    assert r.columns == ["file_path", "record_count", "ts_day"]
    assert list(r.rows) == [
        {"file_path": "/t/data/c.parquet", "record_count": 100, "ts_day": "2025-01-03"},
        {"file_path": "/t/data/a.parquet", "record_count": 10, "ts_day": "2025-01-01"},
        {"file_path": "/t/data/d.parquet", "record_count": 10, "ts_day": None}]
    # nulls last in both directions
    assert "".join(paths(query_rows(view(), sort="ts_day"))) == "abcd"
    assert "".join(paths(query_rows(view(), sort="-ts_day"))) == "cbad"
    assert "".join(paths(query_rows(view(), sort="b"))) == "dabc"  # numbers, not text
    assert list(query_rows(view(), limit=0).rows) == []


def test_no_query_is_the_same_result() -> None:
    r = view()
    assert apply_query(r, RowQuery()) is r


@pytest.mark.parametrize("kwargs", [{"where": "nope=1"}, {"sort": "nope"}, {"columns": "file_path,nope"}])
def test_unknown_column_is_a_usage_error_naming_the_known_ones(kwargs: dict[str, str]) -> None:
    with pytest.raises(UsageError) as e:
        query_rows(view(), **kwargs)
    assert "'nope'" in e.value.message and "record_count" in e.value.message and "ts_day" in e.value.message


@pytest.mark.parametrize("text", ["content", "a=", "=1", "a=1 and", "a ~ 1", "a>>3", "a==1", "a<=>1"])
def test_malformed_where(text: str) -> None:
    with pytest.raises(UsageError):
        parse_where(text)


def test_a_number_compared_with_text_is_a_usage_error() -> None:
    # Compared as text, record_count>abc would quietly match nothing.
    with pytest.raises(UsageError, match="record_count is a number; 'abc' is not"):
        list(query_rows(view(), where="record_count>abc").rows)
    assert paths(query_rows(view(), where="file_path='>x'")) == []  # quoted: a value that starts with '>'


def test_parse() -> None:
    assert [(c.name, c.op, c.literal) for c in parse_where("a>=1 AND b != 'x y'")] == [("a", ">=", "1"),
                                                                                       ("b", "!=", "x y")]
    assert parse_sort("-a, b") == [("a", True), ("b", False)]
