"""Fixture tables written by real Spark + Iceberg, deterministic and re-runnable under any name.

Every builder is a fixed sequence of Spark SQL statements over generated (non-random) data, so
``build_one(spark, kind, name)`` reproduces the same history (same operations, same rows, same
partitioning) under a new table name.  Snapshot ids, timestamps and file names of course differ.

:func:`clone_table` does not rebuild: it copies the built table's directory next to it in the
warehouse with every absolute path rewritten (:func:`support.relocate.copy_table_dir`), so the
clone is the same table (same snapshot ids, uuid, files) under a new name, in a second or two
instead of Spark's tens of seconds.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .relocate import copy_table_dir
from .spark import CATALOG, latest_metadata_path, table_location

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAMESPACE = f"{CATALOG}.db"
MANY_SNAPSHOTS = 250
MANY_APPENDS = 200

_MOR = ", ".join(f"'write.{op}.mode'='merge-on-read'" for op in ("delete", "update", "merge"))


@dataclass(frozen=True)
class FixtureTable:
    """One generated table: Spark name (``local.db.v2_part``), kind, directory, format version."""

    name: str
    kind: str
    location: Path
    format_version: int
    notes: str
    build_seconds: float

    @property
    def path(self) -> Path:  # alias: "table directory path"
        return self.location


@contextmanager
def _sql_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    # Session confs are global: restore them so one builder cannot change another's semantics.
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)


# --------------------------------------------------------------------------- v1_unpart


def _v1_rows(lo: int, hi: int) -> str:
    return f"""
        SELECT id,
               concat('name-', id) AS name,
               id * 1.25 AS price,
               date_add(DATE'2024-01-01', CAST(id AS INT)) AS day,
               timestamp_seconds(1704067200 + id * 3601) AS ts,
               CAST(id * 10.05 AS DECIMAL(10, 2)) AS amount,
               id % 2 = 0 AS flag,
               unhex(lpad(hex(id), 8, '0')) AS payload
        FROM range({lo}, {hi})"""


def _build_v1_unpart(spark: SparkSession, t: str) -> str:
    spark.sql(
        f"""CREATE TABLE {t} (id BIGINT, name STRING, price DOUBLE, day DATE, ts TIMESTAMP,
                              amount DECIMAL(10, 2), flag BOOLEAN, payload BINARY)
            USING iceberg TBLPROPERTIES ('format-version'='1')"""
    )
    for lo, hi in ((0, 20), (20, 35), (35, 50)):
        spark.sql(f"INSERT INTO {t} {_v1_rows(lo, hi)}")
    return "v1, unpartitioned, 3 appends of 20+15+15 rows (ids 0..49)"


# --------------------------------------------------------------------------- v2_part

_V2_COLUMNS = """id BIGINT, name STRING, category STRING, qty INT, price DOUBLE, score FLOAT,
                 amount DECIMAL(12, 2), flag BOOLEAN, ts TIMESTAMP, ts_ntz TIMESTAMP_NTZ, day DATE,
                 payload BINARY, tags ARRAY<STRING>, attrs MAP<STRING, STRING>,
                 point STRUCT<x: DOUBLE, y: DOUBLE>"""


def _v2_rows(lo: int, hi: int, tag: str = "", note: bool = False) -> str:
    # ts spans 3 days (id % 3) so days(ts) x bucket(4, id) gives about 12 partitions per write.
    extra = ", concat('note-', id) AS note" if note else ""
    return f"""
        SELECT id,
               concat('name-', id, '{tag}') AS name,
               element_at(array('red', 'green', 'blue', NULL), CAST(id % 4 + 1 AS INT)) AS category,
               CAST(id % 10 AS INT) AS qty,
               id * 1.5 AS price,
               CAST(id / 4.0 AS FLOAT) AS score,
               CAST(id * 3.25 AS DECIMAL(12, 2)) AS amount,
               id % 2 = 0 AS flag,
               timestamp_seconds(1704067200 + (id % 3) * 86400 + id * 60) AS ts,
               CAST(timestamp_seconds(1704067200 + id * 7200) AS TIMESTAMP_NTZ) AS ts_ntz,
               date_add(DATE'2024-01-01', CAST(id % 30 AS INT)) AS day,
               unhex(lpad(hex(id), 8, '0')) AS payload,
               array(concat('t', id % 4), 'all') AS tags,
               map('k', CAST(id AS STRING), 'tag', '{tag}') AS attrs,
               named_struct('x', id * 1.0D, 'y', id * -0.5D) AS point{extra}
        FROM range({lo}, {hi})"""


def _build_v2_part(spark: SparkSession, t: str) -> str:
    spark.sql(
        f"""CREATE TABLE {t} ({_V2_COLUMNS}) USING iceberg
            PARTITIONED BY (days(ts), bucket(4, id))
            TBLPROPERTIES ('format-version'='2', {_MOR})"""
    )
    spark.sql(f"INSERT INTO {t} {_v2_rows(0, 40)}")
    spark.sql(f"INSERT INTO {t} {_v2_rows(40, 80)}")
    # Dynamic overwrite: replaces only the partitions the query writes (day 0, i.e. id % 3 == 0).
    with _sql_conf(spark, "spark.sql.sources.partitionOverwriteMode", "dynamic"):
        spark.sql(f"INSERT OVERWRITE {t} SELECT * FROM ({_v2_rows(0, 80, '-ow')}) WHERE id % 3 = 0")
    # merge-on-read row-level ops: v2 writes position delete files.
    spark.sql(f"DELETE FROM {t} WHERE id % 7 = 3")
    spark.sql(f"UPDATE {t} SET price = price + 100, name = concat(name, '-upd') WHERE id % 5 = 1")
    spark.sql(
        f"""MERGE INTO {t} AS tgt
            USING ({_v2_rows(70, 90, "-merge")}) AS src
            ON tgt.id = src.id
            WHEN MATCHED AND src.id % 2 = 0 THEN UPDATE SET *
            WHEN MATCHED THEN DELETE
            WHEN NOT MATCHED THEN INSERT *"""
    )
    spark.sql(f"ALTER TABLE {t} CREATE TAG after_merge RETAIN 3650 DAYS")
    spark.sql(f"ALTER TABLE {t} CREATE BRANCH dev")
    spark.sql(f"INSERT INTO {t}.branch_dev {_v2_rows(100, 110, '-dev')}")
    spark.sql(f"DELETE FROM {t}.branch_dev WHERE id % 4 = 0")
    # Schema evolution (table-wide, so also visible from the branch).
    spark.sql(f"ALTER TABLE {t} ADD COLUMN note STRING")
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN qty TO quantity")
    spark.sql(f"INSERT INTO {t} {_v2_rows(200, 220, '-s1', note=True)}")
    # Partition evolution: spec 1 = days(ts), category (bucket dropped).
    spark.sql(f"ALTER TABLE {t} ADD PARTITION FIELD category")
    spark.sql(f"ALTER TABLE {t} DROP PARTITION FIELD bucket(4, id)")
    spark.sql(f"INSERT INTO {t} {_v2_rows(300, 330, '-s2', note=True)}")
    spark.sql(f"DELETE FROM {t} WHERE id % 10 = 5")
    spark.sql(f"UPDATE {t} SET note = 'late-update' WHERE id IN (2, 204, 306)")
    return (
        "v2, merge-on-read; spec0 days(ts)+bucket(4,id), spec1 days(ts)+category; appends, dynamic "
        "INSERT OVERWRITE, DELETE/UPDATE/MERGE (position deletes), tag after_merge, branch dev with "
        "2 commits, ADD COLUMN note, RENAME qty->quantity"
    )


# --------------------------------------------------------------------------- v3_dv


def _v3_rows(lo: int, hi: int) -> str:
    # Region NULL every 10th row: a null partition value.
    return f"""
        SELECT id,
               CASE WHEN id % 10 = 9 THEN NULL
                    ELSE element_at(array('eu', 'us', 'apac'), CAST(id % 3 + 1 AS INT)) END AS region,
               id * 0.5D AS value,
               timestamp_seconds(1717200000 + id * 600) AS ts,
               concat('row-', id) AS note
        FROM range({lo}, {hi})"""


def _build_v3_dv(spark: SparkSession, t: str) -> str:
    spark.sql(
        f"""CREATE TABLE {t} (id BIGINT, region STRING, value DOUBLE, ts TIMESTAMP, note STRING)
            USING iceberg PARTITIONED BY (region)
            TBLPROPERTIES ('format-version'='3', {_MOR})"""
    )
    # Three appends: every region partition gets three data files.
    for lo, hi in ((0, 30), (30, 60), (60, 90)):
        spark.sql(f"INSERT INTO {t} {_v3_rows(lo, hi)}")
    # One task handles the whole 'eu' partition -> one Puffin file with a DV per data file.
    spark.sql(f"DELETE FROM {t} WHERE region = 'eu' AND id % 4 = 0")
    spark.sql(f"UPDATE {t} SET value = value * 10, note = 'updated' WHERE id % 5 = 2")
    # Deleting again from files that already have DVs: Iceberg merges old+new into a replacement DV.
    spark.sql(f"DELETE FROM {t} WHERE region = 'eu' AND id % 4 = 1")
    # "Unpartitioned" writes: drop the only partition field, write, then delete across both specs.
    spark.sql(f"ALTER TABLE {t} DROP PARTITION FIELD region")
    spark.sql(f"INSERT INTO {t} {_v3_rows(100, 130)}")
    spark.sql(f"DELETE FROM {t} WHERE id % 6 = 0")
    return (
        "v3, merge-on-read with deletion vectors (Puffin); spec0 identity(region) incl. NULL region, "
        "spec1 unpartitioned; 3 appends, DELETE (multi-file DV Puffin), UPDATE, 2nd DELETE merging "
        "DVs, unpartitioned append, DELETE across specs; row lineage (next-row-id)"
    )


# --------------------------------------------------------------------------- many_snaps


def _build_many_snaps(spark: SparkSession, t: str) -> str:
    spark.sql(
        f"""CREATE TABLE {t} (id BIGINT, batch INT, ts TIMESTAMP, payload STRING)
            USING iceberg
            TBLPROPERTIES ('format-version'='2',
                           'write.metadata.delete-after-commit.enabled'='true',
                           'write.metadata.previous-versions-max'='25')"""
    )
    # One-row INSERT ... VALUES is the fastest real Spark commit (~0.1 s warm; df.writeTo().append()
    # measured ~30% slower).  Each commit = 1 data file + 1 manifest + 1 manifest list.
    for i in range(MANY_SNAPSHOTS):
        spark.sql(
            f"INSERT INTO {t} VALUES ({i}, {i // 10}, timestamp_seconds({1704067200 + i * 60}), 'p{i:04d}')"
        )
    return (
        f"v2, unpartitioned, {MANY_SNAPSHOTS} single-row append snapshots; old metadata JSONs are "
        "pruned (write.metadata.delete-after-commit.enabled, previous-versions-max=25)"
    )


# --------------------------------------------------------------------------- many_appends


def _build_many_appends(spark: SparkSession, t: str) -> str:
    spark.sql(
        f"""CREATE TABLE {t} (id BIGINT, part INT, ts TIMESTAMP, payload STRING)
            USING iceberg PARTITIONED BY (part)
            TBLPROPERTIES ('format-version'='2', 'commit.manifest-merge.enabled'='false')"""
    )
    # Manifest merging off: each INSERT leaves its own one-entry manifest in every later snapshot,
    # as frequent small (streaming) writers do. Seven partitions, visited round-robin, so the
    # manifests of one partition are scattered over the whole manifest list.
    for i in range(MANY_APPENDS):
        spark.sql(
            f"INSERT INTO {t} VALUES ({i}, {i % 7}, timestamp_seconds({1704067200 + i * 60}), 'p{i:04d}')"
        )
    return (
        f"v2, identity(part) over 7 values, {MANY_APPENDS} single-row appends with "
        "commit.manifest-merge.enabled=false: the current snapshot lists one manifest per append"
    )


# --------------------------------------------------------------------------- registry / API

_BUILDERS: dict[str, tuple[int, Callable[[SparkSession, str], str]]] = {
    "v1_unpart": (1, _build_v1_unpart),
    "v2_part": (2, _build_v2_part),
    "v3_dv": (3, _build_v3_dv),
    "many_snaps": (2, _build_many_snaps),
    "many_appends": (2, _build_many_appends),
}
# Built only when asked for by name (not by iterating over all kinds): slow and specialised.
ON_DEMAND_KINDS = frozenset({"many_appends"})
FIXTURE_KINDS: tuple[str, ...] = tuple(k for k in _BUILDERS if k not in ON_DEMAND_KINDS)

# Spark table name -> the table as built (or cloned) in this process, and the metadata file it had
# then: clone_table() copies these, and refuses a shared fixture that a test has since changed.
_BUILT: dict[str, tuple[FixtureTable, Path]] = {}


def qualify(name: str) -> str:
    """``foo`` -> ``local.db.foo``; already-qualified names pass through."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name):
        raise ValueError(f"bad table name {name!r}")
    return name if "." in name else f"{NAMESPACE}.{name}"


def build_one(spark: SparkSession, kind: str, name: str | None = None) -> FixtureTable:
    """Create fixture ``kind`` as table ``name`` (default ``local.db.<kind>``); prints its build time."""
    if kind not in _BUILDERS:
        raise KeyError(f"unknown fixture kind {kind!r}; known: {', '.join(FIXTURE_KINDS)}")
    table = qualify(name or kind)
    version, builder = _BUILDERS[kind]
    namespace = table.rsplit(".", 1)[0]
    t0 = time.perf_counter()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    notes = builder(spark, table)
    seconds = time.perf_counter() - t0
    print(f"[spark-fixtures] {kind} -> {table}: {seconds:.1f}s", flush=True)
    return _register(FixtureTable(
        name=table,
        kind=kind,
        location=table_location(spark, table),
        format_version=version,
        notes=notes,
        build_seconds=seconds,
    ))


def _register(table: FixtureTable) -> FixtureTable:
    _BUILT[table.name] = (table, latest_metadata_path(table.location))
    return table


def built_table(spark: SparkSession, kind: str) -> FixtureTable:
    """The shared fixture ``local.db.<kind>``, built on first use (once per process)."""
    if kind not in _BUILDERS:
        raise KeyError(f"unknown fixture kind {kind!r}; known: {', '.join(_BUILDERS)}")
    known = _BUILT.get(qualify(kind))
    return known[0] if known else build_one(spark, kind)


def build_fixtures(
    spark: SparkSession, warehouse: str, kinds: tuple[str, ...] = FIXTURE_KINDS
) -> dict[str, FixtureTable]:
    """Build every fixture kind as ``local.db.<kind>`` in the session's ``local`` catalog.

    ``warehouse`` must be the catalog warehouse the session was started with (checked, because
    the metadata written there holds absolute paths).
    """
    configured = spark.conf.get(f"spark.sql.catalog.{CATALOG}.warehouse")
    if configured is None or Path(configured).resolve() != Path(warehouse).resolve():
        raise ValueError(f"session warehouse is {configured!r}, not {warehouse!r}")
    return {kind: build_one(spark, kind) for kind in kinds}


def clone_table(spark: SparkSession, source: str, new_name: str) -> FixtureTable:
    """A private copy of a fixture table for destructive tests, as table ``new_name``.

    ``source`` is a fixture kind (``"v2_part"``: the shared ``local.db.v2_part``, built first if
    needed) or the name of a table built or cloned here.  The table directory is copied beside the
    source (``<warehouse>/<namespace>/<new_name>``; a Hadoop catalog's table is its directory) with
    every absolute path rewritten, so Spark reads it as ``new_name`` with the source's snapshot ids,
    rows and files.  (A test that needs an unrelated table with fresh ids can ``build_one`` it.)
    """
    if source in _BUILDERS:
        kind = source
        name = qualify(source)
    else:
        name = qualify(source)
        if name not in _BUILT:
            raise KeyError(f"{source!r} was not built by tests.support.fixtures")
        kind = _BUILT[name][0].kind
    original = built_table(spark, kind) if source in _BUILDERS else _BUILT[name][0]
    as_built = _BUILT[original.name][1]
    # A clone is private and may have changed (it is copied as it is now); a shared fixture may not.
    if original.name == qualify(kind) and latest_metadata_path(original.location) != as_built:
        # A test changed a shared fixture: a copy would carry that change into an unrelated test.
        raise RuntimeError(f"{original.name} changed since it was built ({as_built.name} -> "
                           f"{latest_metadata_path(original.location).name}); fixtures are read-only")
    target = qualify(new_name)
    if target.rsplit(".", 1)[0] != original.name.rsplit(".", 1)[0]:
        raise ValueError(f"clone {target} must be in the namespace of {original.name}")
    t0 = time.perf_counter()
    location = copy_table_dir(original.location, original.location.parent / target.rsplit(".", 1)[1])
    seconds = time.perf_counter() - t0
    print(f"[spark-fixtures] {original.name} -> {target} (copy): {seconds:.1f}s", flush=True)
    return _register(FixtureTable(name=target, kind=kind, location=location,
                                  format_version=original.format_version, notes=original.notes,
                                  build_seconds=seconds))


class LazyFixtureTables(Mapping[str, FixtureTable]):
    """``build_fixtures`` on demand: each kind is built on first access, then reused.

    A test that only needs ``v1_unpart`` does not pay for ``many_snaps``; iterating over the
    mapping (``dict(...)``, ``.items()``) builds everything.
    """

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._built: dict[str, FixtureTable] = {}

    def __getitem__(self, kind: str) -> FixtureTable:
        if kind not in self._built:
            if kind not in _BUILDERS:
                raise KeyError(kind)
            self._built[kind] = built_table(self._spark, kind)
        return self._built[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(FIXTURE_KINDS)

    def __len__(self) -> int:
        return len(FIXTURE_KINDS)

    def __contains__(self, kind: object) -> bool:  # Mapping's default would build the table
        return kind in _BUILDERS

    @property
    def built(self) -> dict[str, FixtureTable]:
        """The kinds built so far (for timing reports)."""
        return dict(self._built)
