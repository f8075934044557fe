"""Session-wide real Spark + Iceberg fixtures (see tests/support/).

Tests that use ``spark``, ``spark_warehouse``, ``spark_tables`` or ``spark_clone`` are marked
``spark`` automatically, so ``pytest -m "not spark"`` skips everything that needs the JVM.
Nothing starts Spark unless a collected test asks for one of these fixtures.  Tests are also
marked by folder (``interop``, ``property``, ``cli``, ``e2e``) and every hypothesis test is
``property``; see tests/README.md.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings
from support.fixtures import FixtureTable, LazyFixtureTables, clone_table
from support.spark import timed_start_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The real servers (moto's S3 and Glue, SeaweedFS's REST catalog, PostgreSQL): their fixtures are
# registered once here, so each session-scoped server starts once per test session. A test module
# that imported a fixture function would get its own copy of it, and with it a server of its own.
pytest_plugins = ["support.s3", "support.glue", "support.seaweedfs", "support.postgres"]

SPARK_FIXTURES = frozenset({"spark", "spark_warehouse", "spark_tables", "spark_clone"})

# (label, seconds) of Spark startup and each fixture build, shown in the terminal summary.
_TIMINGS: list[tuple[str, float]] = []


# Markers by folder (tests/README.md): the first folder under tests/ names the tier.
FOLDER_MARKERS: dict[str, tuple[str, ...]] = {
    "interop": ("interop",),
    "property": ("property",),
    "cli": ("cli",),
    "e2e": ("e2e", "cli"),
}
TESTS_DIR = Path(__file__).resolve().parent

# Hypothesis: "ci" (chosen when $CI is set) keeps runs bounded and reproducible; "dev" is the default.
# Tests with an explicit @settings(max_examples=...) keep it; ICECTL_HOSTILE_EXAMPLES /
# ICECTL_EXPIRE_PROPERTY_EXAMPLES still scale the two slow Spark-backed properties.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, max_examples=50, derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

# A user's ICECTL_WAREHOUSE (README command 1 sets one) would point the tests' default catalog at
# that warehouse: tests that expect the default (./warehouse in their own folder) met each other's
# tables there. The tests choose their warehouses themselves.
os.environ.pop("ICECTL_WAREHOUSE", None)


MAX_WORKERS = 4  # each worker that runs a Spark test starts its own JVM (about 1.5 GB)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (the default addopts): one worker per core, at most MAX_WORKERS; ``-n 0`` or
    ``-p no:xdist`` runs in this process."""
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SPARK_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)
        try:
            folder = Path(str(item.path)).resolve().relative_to(TESTS_DIR).parts[0]
        except ValueError:
            folder = ""
        for marker in FOLDER_MARKERS.get(folder, ()):
            item.add_marker(marker)
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False) and folder != "property":
            item.add_marker(pytest.mark.property)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIMINGS:
        terminalreporter.section("spark fixture timings")
        for label, seconds in _TIMINGS:
            terminalreporter.write_line(f"{label:<40} {seconds:6.1f}s")


@pytest.fixture(scope="session", autouse=True)
def manifest_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test (and every icectl process a test starts) uses a manifest cache of this session,
    never the user's ~/.cache/icectl."""
    folder = tmp_path_factory.mktemp("icectl-cache")
    old = os.environ.get("ICECTL_CACHE_DIR")
    os.environ["ICECTL_CACHE_DIR"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("ICECTL_CACHE_DIR", None)
    else:
        os.environ["ICECTL_CACHE_DIR"] = old


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


@pytest.fixture(scope="session")
def spark_engine(spark: SparkSession) -> Iterator[Any]:
    """icectl's Spark engine (issue 17) on the session's Spark (``local[2]``): tasks run in Spark's Python
    workers, which import icectl from the zip the engine ships. Use ``with icectl.engine.using(spark_engine):``."""
    from icectl.engine.spark import SparkEngine

    yield SparkEngine(spark)


@pytest.fixture
def spark_clone(spark: SparkSession) -> Callable[..., FixtureTable]:
    """``spark_clone(source, new_name=None)``: a private copy of a fixture.

    ``source`` is a fixture kind (``"v2_part"``) or a table name built by the fixtures.  The
    table directory is copied under a unique name with every absolute path rewritten
    (``support.relocate``), so a destructive test cannot disturb other tests; the copy has the
    source's snapshot ids (no test needs fresh ones; ``support.fixtures.build_one`` makes them).
    """

    def make(source: str, new_name: str | None = None) -> FixtureTable:
        base = source.rsplit(".", 1)[-1]
        table = clone_table(spark, source, new_name or f"{base}_clone{next(_clone_ids)}")
        _TIMINGS.append((f"clone {table.name}", table.build_seconds))
        return table

    return make
