"""``inspect files --json`` renders rows from Arrow columns; its text is byte for byte the row path's.

Checked on every snapshot of the Spark fixtures (v1, v2 with partition evolution, v3 with DVs and
row lineage, many snapshots), on an icectl table whose file names JSON must escape, and with the
cache cold and warm.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from icectl.cli.output.render import render
from icectl.ops.inspect.views import ContentFilter, file_rows
from icectl.table import Table, load_table
from unit.ops.lifecycle.test_upgrade import icectl, parquet


def both_ways(table: Table, **kwargs: object) -> tuple[str, str]:
    fast, slow = io.StringIO(), io.StringIO()
    result = file_rows(table, **kwargs)  # type: ignore[arg-type]
    assert result.json_text is not None
    render(result, as_json=True, out=fast)
    render(dataclasses.replace(file_rows(table, **kwargs), json_text=None), as_json=True, out=slow)  # type: ignore[arg-type]
    return fast.getvalue(), slow.getvalue()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ICECTL_CACHE_RACY_SECONDS", "0")
    monkeypatch.setenv("ICECTL_CACHE_MIN_MANIFEST_BYTES", "0")  # small ones too
    return tmp_path / "cache"


@pytest.mark.parametrize("kind", ["v1_unpart", "v2_part", "v3_dv", "many_snaps"])
def test_fast_json_is_the_row_paths_text_on_every_fixture_snapshot(spark_tables, cache: Path, kind: str) -> None:
    table = load_table(str(spark_tables[kind].location))
    snapshots = [s.snapshot_id for s in table.metadata.snapshots]
    rows = 0
    for sid in snapshots[:40]:
        for content in ContentFilter:
            for _round in ("cold", "warm"):
                fast, slow = both_ways(table, snapshot_id=sid, content=content)
                assert fast == slow
            rows += fast.count('"file_path"')
    assert rows > 0


def test_fast_json_escapes_what_json_must_escape(tmp_path: Path, cache: Path) -> None:
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
           "--format-version", "3")
    for i, name in enumerate(['plain.parquet', 'quo"te.parquet', 'back\\slash.parquet', 'tab\there.parquet',
                              'ünï€😀.parquet']):
        icectl("add-files", str(d), parquet(tmp_path / name, range(i * 10, i * 10 + 3), i + 1))
    table = load_table(str(d))
    fast, slow = both_ways(table)
    assert fast == slow
    assert '\\"' in fast and "\\\\" in fast and "\\t" in fast and "😀" in fast
