"""Views on the Spark fixtures: every default terminal view fits 120 columns with every id whole;
``--format csv`` of ``inspect files`` loads in pyarrow's CSV reader with the rows and values of
``--json``; ``--where`` on a partition field and content keeps the files Spark's ``files`` table
keeps for the same condition."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pyarrow.csv as pacsv
import pytest
from rich.console import Console
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.cli.output.formats import terminal_table
from icectl.cli.output.row_query import value_of
from icectl.ops.inspect import tree as inspect_v4
from icectl.ops.inspect import views as core
from icectl.ops.properties import list_properties
from icectl.ops.snapshots.refs import list_refs
from icectl.results import RowsResult
from icectl.table import Table, load_table

KINDS = ["v1_unpart", "v2_part", "v3_dv"]
VIEWS: dict[str, Callable[[Table], RowsResult]] = {
    "snapshots": core.snapshot_rows, "history": core.history_rows, "refs": core.ref_rows,
    "metadata-log": core.metadata_log_rows, "schema": core.schema_rows, "manifests": core.manifest_rows,
    "manifests --all": lambda t: core.manifest_rows(t, all_snapshots=True), "files": core.file_rows,
    "files --metrics": lambda t: core.file_rows(t, metrics=True), "entries": core.entry_rows,
    "partitions": core.partition_rows, "dvs": core.dv_rows, "tree": inspect_v4.tree_rows,
    "branch list": list_refs, "properties list": list_properties}


def run(*args: str) -> str:
    r = CliRunner().invoke(app, list(args), env={"ICECTL_CONFIG": ""})
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_every_default_view_fits_120_columns_with_ids_whole(spark_tables: Any, kind: str) -> None:
    table = load_table(str(spark_tables[kind].location))
    for name, make in VIEWS.items():
        result = make(table)
        ids = {(c, str(v)) for row in make(table).rows for c in result.default_columns()
               if result.column(c).kind == "id" and (v := value_of(result, row, c)) is not None and v > 9}
        console = Console(width=120, file=io.StringIO(), color_system=None)
        with console.capture() as cap:
            console.print(terminal_table(result, width=120))
        lines = cap.get().splitlines()
        assert max(len(line) for line in lines) <= 120, (name, lines)
        text = "\n".join(lines)
        left_out = " ".join(text.split()).partition("not shown for lack of width:")[2]
        for c, i in ids:  # whole on a line (a split id would hold a line break), unless its column is left out
            assert i in text or c in left_out, (name, c, i)


def _same(csv_value: Any, json_value: Any) -> bool:
    if isinstance(json_value, dict | list):
        return json.loads(csv_value) == json_value
    if json_value == "":
        return csv_value in ("", None)
    return bool(csv_value == json_value)


@pytest.mark.parametrize("kind", ["v2_part", "v3_dv"])
def test_csv_loads_in_pyarrow_with_the_json_rows(spark_tables: Any, kind: str) -> None:
    location = str(spark_tables[kind].location)
    doc = json.loads(run("inspect", "files", location, "--json"))
    assert run("inspect", "files", location, "--format", "json") == run("inspect", "files", location, "--json")
    csv_text = run("inspect", "files", location, "--format", "csv")
    got = pacsv.read_csv(io.BytesIO(csv_text.encode()),
                         convert_options=pacsv.ConvertOptions(strings_can_be_null=True)).to_pylist()
    assert len(got) == len(doc["rows"]) > 0
    for g, want in zip(got, doc["rows"], strict=True):
        assert list(g) == list(want)
        for k, v in want.items():
            assert _same(g[k], v), (k, g[k], v)


def test_where_sort_limit_columns_as_spark_files(spark: Any, spark_tables: Any) -> None:
    t = spark_tables["v2_part"]
    want = sorted(r.file_path for r in spark.sql(
        f"SELECT file_path FROM {t.name}.files WHERE content = 0 AND partition.ts_day >= DATE '2024-01-02'"
    ).collect())
    assert want  # the condition keeps some files, and not all
    doc = json.loads(run("inspect", "files", str(t.location), "--where", "ts_day>=2024-01-02 and content=data",
                         "--columns", "file_path,record_count", "--sort", "file_path", "--format", "json"))
    assert [r["file_path"] for r in doc["rows"]] == want and list(doc["rows"][0]) == ["file_path", "record_count"]
    everything = json.loads(run("inspect", "files", str(t.location), "--json"))["rows"]
    assert len(want) < len(everything)
    lines = run("inspect", "files", str(t.location), "--where", "content!=data", "--sort", "-record_count",
                "--limit", "2", "--format", "jsonl").splitlines()
    counts = sorted((r["record_count"] for r in everything if r["content"] != 0), reverse=True)[:2]
    assert [json.loads(line)["record_count"] for line in lines] == counts
    bad = CliRunner().invoke(app, ["inspect", "files", str(t.location), "--where", "nope=1"], env={"ICECTL_CONFIG": ""})
    assert bad.exit_code == 2 and "known: content, file_path" in bad.stderr and "ts_day" in bad.stderr
