"""The manifest cache on Spark-written tables: every read path answers the same with the cache off,
cold, warm, and after the biggest manifest of the current snapshot is replaced in place (another
length; then the same length with other content). v2 with partition evolution and deletes, v3 with
deletion vectors and row lineage (``inspect dvs`` reads the Puffin files the entries name)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.relocate import copy_table_dir
from unit.table.test_cache_read_paths import (
    bigger_file,
    cache_entries,
    current_manifests,
    every_read,
    replace_manifest,
    uncached,
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(folder))
    monkeypatch.setenv("ICECTL_CACHE_RACY_SECONDS", "0")
    monkeypatch.setenv("ICECTL_CACHE_MIN_MANIFEST_BYTES", "0")  # small ones too
    monkeypatch.delenv("ICECTL_CACHE", raising=False)
    return folder


@pytest.mark.parametrize("kind", ["v2_part", "v3_dv"])
def test_spark_tables_answer_the_same_with_the_cache(spark_tables, tmp_path: Path, cache: Path,
                                                     monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    # A warehouse of its own: expire and the orphan scan read every neighbouring table of the
    # shared one, which the tests before this one fill (224-319 s instead of 30 s in full runs).
    d = copy_table_dir(Path(spark_tables[kind].location), tmp_path / "wh" / "db" / kind)
    table = str(d)
    truth = uncached(table, monkeypatch)
    assert every_read(table) == truth  # cold
    assert cache_entries(cache) > 2
    assert every_read(table) == truth  # warm

    biggest = max(current_manifests(d), key=lambda m: m.manifest_length)
    first = replace_manifest(d, biggest, bigger_file, codec="null")
    truth = uncached(table, monkeypatch)
    assert every_read(table) == truth
    second = replace_manifest(d, biggest, bigger_file, codec="null")
    assert len(second) == len(first) and second != first
    truth2 = uncached(table, monkeypatch)
    assert truth2 != truth
    assert every_read(table) == truth2
    shutil.rmtree(cache)
    assert every_read(table) == truth2  # a removed cache folder is a cold cache
