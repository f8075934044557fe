"""Session-wide real Spark + Iceberg fixtures (see tests/support/).

Tests that use ``spark``, ``spark_warehouse``, ``spark_tables`` or ``spark_clone`` are marked
``spark`` automatically, so ``pytest -m "not spark"`` skips everything that needs the JVM.
Nothing starts Spark unless a collected test asks for one of these fixtures.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from support.fixtures import FixtureTable, LazyFixtureTables, clone_table
from support.spark import timed_start_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_FIXTURES = frozenset({"spark", "spark_warehouse", "spark_tables", "spark_clone"})

# (label, seconds) of Spark startup and each fixture build, shown in the terminal summary.
_TIMINGS: list[tuple[str, float]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SPARK_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIMINGS:
        terminalreporter.section("spark fixture timings")
        for label, seconds in _TIMINGS:
            terminalreporter.write_line(f"{label:<40} {seconds:6.1f}s")


@pytest.fixture(scope="session")
def spark_warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Per-session warehouse: Iceberg metadata holds absolute paths, so never share one."""
    return str(tmp_path_factory.mktemp("iceberg-warehouse"))


@pytest.fixture(scope="session")
def spark(spark_warehouse: str) -> Iterator[SparkSession]:
    """One local Spark session (Hadoop catalog ``local`` on ``spark_warehouse``) for the session."""
    session, seconds = timed_start_spark(spark_warehouse)
    _TIMINGS.append(("spark startup", seconds))
    print(f"[spark-fixtures] spark startup: {seconds:.1f}s", flush=True)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_tables(spark: SparkSession) -> Iterator[LazyFixtureTables]:
    """``kind -> FixtureTable`` (``local.db.<kind>``); each table is built on first access.

    Shared by all tests: treat these tables as read-only and use ``spark_clone`` to modify one.
    """
    tables = LazyFixtureTables(spark)
    yield tables
    _TIMINGS.extend((f"fixture {t.kind}", t.build_seconds) for t in tables.built.values())


_clone_ids = itertools.count(1)


@pytest.fixture
def spark_clone(spark: SparkSession) -> Callable[..., FixtureTable]:
    """``spark_clone(source, new_name=None)``: a private, identically-generated copy of a fixture.

    ``source`` is a fixture kind (``"v2_part"``) or a table name built by the fixtures.  The copy
    is regenerated with real Spark (absolute paths make file copies impossible) under a unique
    name, so a destructive test cannot disturb other tests.
    """

    def make(source: str, new_name: str | None = None) -> FixtureTable:
        base = source.rsplit(".", 1)[-1]
        table = clone_table(spark, source, new_name or f"{base}_clone{next(_clone_ids)}")
        _TIMINGS.append((f"clone {table.name}", table.build_seconds))
        return table

    return make
