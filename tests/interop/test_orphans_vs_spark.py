"""`icectl remove-orphan-files` judged against Spark's `remove_orphan_files` procedure on twin tables.

Two private copies of a Spark fixture (same snapshot ids, same files) get the same planted
files: copies of data files under new names in the data and partition folders (what a Spark
write killed before its commit leaves), a stale manifest and manifest list, an old metadata
file not in the log, files in hidden ``_x``/``.x`` folders and in a partition-like folder, files
newer than the cutoff. Every file is made ten days old (the young ones stay new), the cutoff is
three days ago. Spark's dry run on one twin and icectl's on the other must name the same files
(relative to their tables). Then icectl deletes them on its twin: Spark reads every snapshot and
ref of it with the rows it had before, every file a snapshot reaches (Spark's ``all_files``,
``all_manifests``) still exists, and ``icectl validate --deep`` finds nothing.

A statistics file the metadata names on another file system (``hdfs://``) is a prefix mismatch:
Spark's procedure and icectl both refuse, and neither deletes a file.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import FixtureTable
from support.forge import forge_commit
from support.spark import metadata_table
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode
from icectl.spec.snapshots import StatisticsFile
from icectl.storage import local_path
from icectl.table import load_table

DAY = 86400.0
NOW = time.time()
OLD = NOW - 10 * DAY
CUTOFF_MS = int((NOW - 3 * DAY) * 1000)


def icectl(*args: str, expect: int = 0) -> tuple[dict[str, Any], str]:
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == expect, (r.stdout, r.stderr)
    return (json.loads(r.stdout) if r.stdout.strip() else {}), r.stderr


def on_disk(d: Path) -> set[str]:
    return {os.path.join(r, n) for r, _ds, ns in os.walk(d) for n in ns}


def age(path: str | Path, when: float) -> None:
    ns = round(when * 1000) * 1_000_000
    os.utime(path, ns=(ns, ns))


def plant(d: Path) -> set[str]:
    """Plant the same orphans in table ``d``; return the relative paths of those older than the cutoff."""
    for f in on_disk(d):
        age(f, OLD)
    data = sorted(p for p in on_disk(d / "data") if p.endswith(".parquet") and "/." not in p)
    manifests = sorted(p for p in on_disk(d / "metadata") if p.endswith("-m0.avro"))
    lists = sorted(p for p in on_disk(d / "metadata") if os.path.basename(p).startswith("snap-"))
    planted: dict[str, float] = {}

    def copy(src: str, rel: str, when: float = OLD) -> None:
        dst = d / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        age(dst, when)
        planted[rel] = when

    # A Spark write killed before its commit: its task files next to the live ones.
    for i, src in enumerate(data[:3]):
        rel = os.path.relpath(src, d)
        copy(src, os.path.join(os.path.dirname(rel), f"00000-{900 + i}-killed-0000{i}.parquet"))
    copy(data[0], "data/bucket_like=7/00001-killed.parquet")  # a partition-like folder of its own
    copy(manifests[0], "metadata/0d9c8b7a-stale-m0.avro")
    copy(lists[0], "metadata/snap-1234567890-1-stale.avro")
    copy(str(d / "metadata" / "v1.metadata.json"), "metadata/00000-not-in-log.metadata.json")
    copy(data[0], "stray-at-the-top.parquet")
    # Never orphans: younger than the cutoff, or hidden.
    copy(data[1], "data/00002-in-flight.parquet", when=NOW)
    copy(data[1], "data/_temporary/0/_temporary/attempt_1/part-0.parquet")
    copy(data[1], "data/.spark-staging/part-1.parquet")
    copy(data[1], "data/_SUCCESS")
    return {rel for rel, when in planted.items() if when == OLD and not any(
        part.startswith(("_", ".")) for part in Path(rel).parts)}


def spark_orphans(spark: Any, t: FixtureTable, *, dry_run: bool) -> set[str]:
    when = datetime.datetime.fromtimestamp(CUTOFF_MS / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    rows = spark.sql(f"CALL local.system.remove_orphan_files(table => '{t.name.split('.', 1)[1]}', "
                     f"older_than => TIMESTAMP '{when}', dry_run => {str(dry_run).lower()})").collect()
    return {os.path.relpath(local_path(r["orphan_file_location"]), t.location) for r in rows}


def reads(spark: Any, *tables: FixtureTable) -> list[dict[str, tuple[int, int, int]]]:
    """Spark's rows of every snapshot and every ref of each table: (count, order-independent
    digest) per version, all in one query (each Spark job costs more than these tiny scans)."""
    parts, keys = [], []
    for i, t in enumerate(tables):
        spark.sql(f"REFRESH TABLE {t.name}")
        versions = {f"s{s['snapshot_id']}": str(s["snapshot_id"]) for s in metadata_table(spark, t.name, "snapshots")}
        versions |= {r["name"]: f"'{r['name']}'" for r in metadata_table(spark, t.name, "refs")}
        keys.append(set(versions))
        parts += [f"SELECT {i} AS t, '{k}' AS k, sha2(to_json(struct(*)), 256) AS h "
                  f"FROM {t.name} VERSION AS OF {v}" for k, v in versions.items()]
    rows = spark.sql(f"""SELECT t, k, count(h) AS n,
                         coalesce(sum(CAST(conv(substr(h, 1, 15), 16, 10) AS DECIMAL(38, 0))), 0) AS a,
                         coalesce(sum(CAST(conv(substr(h, 16, 15), 16, 10) AS DECIMAL(38, 0))), 0) AS b
                         FROM ({" UNION ALL ".join(parts)}) GROUP BY t, k""").collect()
    out: list[dict[str, tuple[int, int, int]]] = [{} for _ in tables]
    for r in rows:
        out[r["t"]][r["k"]] = (int(r["n"]), int(r["a"]), int(r["b"]))
    # An empty snapshot has no row to group: count it as (0, 0, 0).
    return [{k: got.get(k, (0, 0, 0)) for k in want} for got, want in zip(out, keys, strict=True)]


def reached(spark: Any, t: FixtureTable) -> set[str]:
    spark.sql(f"REFRESH TABLE {t.name}")
    files = {local_path(r["file_path"]) for r in metadata_table(spark, t.name, "all_files")}
    files |= {local_path(r["file_path"]) for r in metadata_table(spark, t.name, "all_delete_files")}
    files |= {local_path(r["path"]) for r in metadata_table(spark, t.name, "all_manifests")}
    return files


@pytest.mark.parametrize("kind", ["v2_part", "v3_dv"])
def test_dry_run_lists_what_spark_lists_and_the_real_run_keeps_the_table(
        spark: Any, spark_clone: Callable[..., FixtureTable], kind: str) -> None:
    theirs, ours = spark_clone(kind), spark_clone(kind)
    expected = plant(theirs.location)
    assert plant(ours.location) == expected

    by_spark = spark_orphans(spark, theirs, dry_run=True)
    doc, _ = icectl("remove-orphan-files", str(ours.location), "--older-than", str(CUTOFF_MS), "--dry-run")
    by_icectl = {os.path.relpath(local_path(p), ours.location) for p in doc["orphan_file_locations"]}
    assert by_icectl == by_spark
    assert expected <= by_icectl  # and the check judged something: every planted orphan is named

    before = on_disk(ours.location)
    doc, _ = icectl("remove-orphan-files", str(ours.location), "--older-than", str(CUTOFF_MS))
    assert doc["deleted_count"] == len(by_spark) and doc["failures"] == []
    gone = {os.path.relpath(p, ours.location) for p in before - on_disk(ours.location)}
    assert {g for g in gone if not os.path.basename(g).startswith(".")} == by_spark  # (and checksums)
    live = reached(spark, ours)
    assert live and all(os.path.exists(p) for p in live)
    # Spark reads every snapshot and ref of icectl's twin as of the untouched twin (same ids).
    untouched, cleaned = reads(spark, theirs, ours)
    assert cleaned == untouched and any(n for n, _a, _b in cleaned.values())
    report, _ = icectl("validate", str(ours.location), "--deep")
    twin, _ = icectl("validate", str(theirs.location), "--deep")  # what the fixture itself gets
    assert report["errors"] == 0 and report["warnings"] == twin["warnings"], report["rows"]


def test_prefix_mismatch_deletes_nothing_and_says_why(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    theirs, ours = spark_clone("v2_part"), spark_clone("v2_part")
    for t in (theirs, ours):
        plant(t.location)
        named = t.location / "metadata" / "stats-elsewhere.puffin"
        named.write_bytes(b"stats")
        age(named, OLD)
        table = load_table(str(t.location))
        sid = table.metadata.current_snapshot_id
        assert sid is not None
        forge_commit(table, lambda base, sid=sid, named=named: base.replace(statistics=(
            *base.statistics, StatisticsFile(sid, f"hdfs://namenode:8020{named}", 5, 8))))
        for f in t.location.glob("metadata/*"):
            age(f, OLD)
    before = on_disk(theirs.location)
    with pytest.raises(Exception, match=r"authorit|scheme"):
        spark_orphans(spark, theirs, dry_run=False)
    assert on_disk(theirs.location) == before
    before = on_disk(ours.location)
    _, err = icectl("remove-orphan-files", str(ours.location), "--older-than", str(CUTOFF_MS),
                    expect=ExitCode.REFUSED)
    assert "hdfs" in err and "nothing deleted" in err and len(err.strip().splitlines()) == 1
    assert on_disk(ours.location) == before
