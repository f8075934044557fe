"""icectl.cli.output.render: --json prints exactly one JSON document per result (one per table for --all),
and that document is the result's ``to_json()``; rows stream without changing it."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

import icectl.cli.output.render as render_module
from icectl.cli.output.formats import OutputFormat, ViewOptions
from icectl.cli.output.render import render, to_json
from icectl.cli.output.row_query import RowQuery
from icectl.errors import CorruptInputError
from icectl.ops.create.result import CatalogMeta, CreateResult, NamespaceCreateResult
from icectl.ops.expire.result import ExpireResult
from icectl.ops.inspect.result import SchemaBrief, SortOrderBrief, SpecBrief, TableOverview, TableViewMeta
from icectl.ops.lifecycle.upgrade import UpgradeBranch, UpgradeResult
from icectl.results import DryRun, MultiResult, RowsResult, TableFailure
from icectl.validate import RuleCount, ValidateSummary


def _rows() -> Iterator[dict[str, Any]]:
    yield {"a": 1, "b": b"\x01\x02"}
    yield {"a": 2, "b": None}


RESULTS: dict[str, Any] = {
    "create": CreateResult(title="Created", table="db.t", dry_run=False, location="/w/db/t", format_version=2,
                           schema=["1: id long"], partition_spec=[], sort_order=[], properties={"k": "v"},
                           metadata_location="/w/db/t/metadata/v1.metadata.json"),
    "expire": ExpireResult(title="Would expire", table="db.t", dry_run=True, expired_snapshots=[], removed_refs=[],
                           retained_snapshot_count=1, leftover_snapshots=[], skipped_metadata=[],
                           dry=DryRun([], {}), kept_external_files=[]),
    "overview": TableOverview(title="Table db.t", table="db.t", metadata_location="m", format_version=2,
                              table_uuid="u", location="l", last_updated=None, last_sequence_number=0,
                              current_snapshot_id=None, current_snapshot=None, snapshot_count=0, refs={},
                              schema=SchemaBrief(0, ["1: id long"]), partition_spec=SpecBrief(0, []),
                              sort_order=SortOrderBrief(0, []), properties={}, totals={}),
    "namespace": NamespaceCreateResult(message="created namespace db", namespace="db", catalog="local",
                                       created=True),
    "failure": TableFailure(view="compact", title="db.x: failed", table="db.x", error="boom", exit_code=4),
    "upgrade": UpgradeResult(title="Upgraded", table="db.t", dry_run=False, from_version=3, to_version=4,
                             branches=[UpgradeBranch("main", 1, 2, 3, "r.avro", 1, 5, 0, None)]),
    "rows_part_meta": RowsResult("files", "Files", ["a", "b"], _rows(),
                                 TableViewMeta(table="db.t", metadata_location="m", snapshot_id=None)),
    "rows_catalog": RowsResult("namespaces", "Namespaces", ["a"], [{"a": "db"}], CatalogMeta("local", "/w")),
    "rows_validate": RowsResult("validate", "validate db.t", ["a"], [], ValidateSummary(
        table="db.t", errors=0, warnings=0, snapshots=1, manifests=1, entries=1, summary="ok")),
    "rows_rules": RowsResult("validate_rules", "rules", ["a"], [{"a": "x"}], RuleCount(1)),
    "rows_dict_meta": RowsResult("schema", "Schema", ["a"], [{"a": 1}], {"table": "db.t"}),
    "rows_no_meta": RowsResult("x", "X", ["a"], []),
}
EXPECTED = {  # the documents, written out
    "namespace": {"message": "created namespace db", "namespace": "db", "catalog": "local", "created": True},
    "failure": {"view": "compact", "table": "db.x", "error": "boom"},
    "upgrade": {"view": "upgrade", "table": "db.t", "dry_run": False, "from_version": 3, "to_version": 4,
                "branches": [{"branch": "main", "head_snapshot_id": 1, "new_snapshot_id": 2, "sequence_number": 3,
                              "root_manifest": "r.avro", "manifests": 1, "live_files": 5, "first_row_id": 0,
                              "added_rows": None}]},
    "rows_part_meta": {"view": "files", "table": "db.t", "metadata_location": "m", "snapshot_id": None,
                       "rows": [{"a": 1, "b": "0102"}, {"a": 2, "b": None}]},
    "rows_catalog": {"view": "namespaces", "catalog": "local", "warehouse": "/w", "rows": [{"a": "db"}]},
    "rows_validate": {"view": "validate", "table": "db.t", "errors": 0, "warnings": 0, "snapshots": 1,
                      "manifests": 1, "entries": 1, "summary": "ok", "rows": []},
    "rows_rules": {"view": "validate_rules", "rules": 1, "rows": [{"a": "x"}]},
    "rows_dict_meta": {"view": "schema", "table": "db.t", "rows": [{"a": 1}]},
    "rows_no_meta": {"view": "x", "rows": []},
}


def _json(result: Any) -> str:
    out = io.StringIO()
    render(result, as_json=True, out=out)
    return out.getvalue()


@pytest.mark.parametrize("name", list(RESULTS))
def test_json_is_exactly_one_document(name: str) -> None:
    result = RESULTS[name]
    text = _json(result)
    doc = json.loads(text)  # json.loads refuses a second document ("Extra data")
    assert text.endswith("}\n") and text.count("\n") == (1 if not isinstance(result, RowsResult)
                                                         else max(1, len(doc["rows"])))
    if name in EXPECTED:
        assert list(doc.items()) == list(EXPECTED[name].items())
    if not isinstance(result, RowsResult):  # rows are consumed by rendering; the rest is to_json()
        assert json.dumps(doc) == json.dumps(result.to_json())


def test_streamed_rows_equal_to_json() -> None:
    """The row-by-row document is the one ``to_json()`` describes (encoded the same way)."""
    streamed = _json(RowsResult("files", "Files", ["a", "b"], _rows(), CatalogMeta("c", None)))
    whole = RowsResult("files", "Files", ["a", "b"], list(_rows()), CatalogMeta("c", None)).to_json()
    assert json.loads(streamed) == json.loads(to_json(whole))
    assert list(json.loads(streamed)) == ["view", "catalog", "warehouse", "rows"]


def test_multi_result_one_document_per_table_and_worst_exit_code() -> None:
    multi = MultiResult("compact", iter([RESULTS["failure"], RESULTS["upgrade"]]))
    lines = _json(multi).splitlines()
    assert [json.loads(line)["table"] for line in lines] == ["db.x", "db.t"]
    assert multi.exit_code == 4


@pytest.mark.parametrize("name", ["create", "expire", "overview", "failure", "upgrade"])
def test_terminal_tree_has_the_title_and_no_view(name: str) -> None:
    out = io.StringIO()
    render(RESULTS[name], as_json=False, out=out)
    text = out.getvalue()
    assert text.splitlines()[0] == RESULTS[name].title and "view:" not in text


def test_terminal_message() -> None:
    out = io.StringIO()
    render(RESULTS["namespace"], as_json=False, out=out)
    assert out.getvalue() == "created namespace db\n"


@pytest.mark.parametrize("rows_before", [1, 3000])
def test_an_error_after_some_rows_leaves_json_stdout_empty(rows_before: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The Spark engine streams rows as its tasks finish: a damaged manifest may be met after
    # thousands of rows were encoded. --json prints one document or nothing (a small spool here,
    # so the 3,000-row case goes through the temporary file).
    monkeypatch.setattr(render_module, "_SPOOL_BYTES", 4096)  # 3,000 rows: past it, into the file

    def rows() -> Iterator[dict[str, Any]]:
        for i in range(rows_before):
            yield {"a": f"row {i} \u00e9\u6f22"}
        raise CorruptInputError("manifest is damaged", path="m7.avro")

    out = io.StringIO()
    with pytest.raises(CorruptInputError):
        render(RowsResult("files", "Files", ["a"], rows(), {"table": "t"}), as_json=True, out=out)
    assert out.getvalue() == ""
    whole = io.StringIO()
    render(RowsResult("files", "Files", ["a"], [{"a": f"row {i} \u00e9\u6f22"} for i in range(rows_before)],
                      {"table": "t"}), as_json=True, out=whole)
    # without the error, all of it, multi-byte characters whole across the spool's chunks
    assert [r["a"] for r in json.loads(whole.getvalue())["rows"]] == [f"row {i} \u00e9\u6f22"
                                                                      for i in range(rows_before)]


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv", "tsv", "table"])
def test_an_error_before_the_first_row_leaves_stdout_empty(fmt: str) -> None:
    # A damaged first manifest, or a --where that cannot compare, fails while the rows are read:
    # a script must not get half a JSON document (or a CSV header) and then exit non-zero.
    def rows() -> Iterator[dict[str, Any]]:
        raise CorruptInputError("manifest is damaged", path="m0.avro")
        yield {}

    out = io.StringIO()
    result = RowsResult("files", "Files", ["a"], rows(), {"table": "t"})
    with pytest.raises(CorruptInputError):
        render(result, as_json=fmt == "json", out=out,
               options=ViewOptions(query=RowQuery(), format=OutputFormat(fmt), pager=False))
    assert out.getvalue() == ""
