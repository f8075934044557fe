"""Acceptance of issue 17 across the commands: ``--engine spark`` seen from outside.

1. One ``icectl inspect files --engine spark`` process with a Spark of its own (``local[2]``, a
   fresh JVM) and Spark's event log on: the log shows tasks in jobs of icectl's job group (the
   description ``icectl: ...`` the Spark engine sets), no job of the run outside that group, and
   the ``engine`` key of the JSON counts exactly those tasks; the rows equal the local engine's
   and Spark's own ``files`` metadata table.
2. Spark INSERTs in a loop (commit retries on) while icectl expires the same table again and again
   with the Spark engine on the session's Spark: no commit is lost (every inserted row reads back),
   no file a retained snapshot reaches is gone, and Spark reads the table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.fixtures import FixtureTable, LazyFixtureTables
from support.spark import latest_metadata_json, metadata_table
from typer.testing import CliRunner

from icectl import engine as engines
from icectl.cli.app import app
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.expire.result import ExpireResult
from icectl.table import load_table

ROOT = Path(__file__).resolve().parents[2]
GROUP_PREFIX, DESCRIPTION_PREFIX = "icectl-", "icectl: "


def _local(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


# --------------------------------------------------------------------------- Spark's event log


def event_log_tasks(folder: Path) -> tuple[dict[int, dict[str, str]], dict[int, int]]:
    """Jobs of the one application logged in ``folder``: ``{job id: its properties}`` and
    ``{job id: tasks that ended successfully}``, read from the JSON-lines event log
    (``SparkListenerJobStart`` names each job's stages, ``SparkListenerTaskEnd`` each task's stage)."""
    logs = [p for p in folder.iterdir() if p.is_file()]
    assert len(logs) == 1, f"expected one application's event log in {folder}: {logs}"
    jobs: dict[int, dict[str, str]] = {}
    job_of_stage: dict[int, int] = {}
    tasks: dict[int, int] = {}
    with logs[0].open() as fh:
        for line in fh:
            ev = json.loads(line)
            if ev["Event"] == "SparkListenerJobStart":
                jobs[ev["Job ID"]] = ev.get("Properties") or {}
                tasks.setdefault(ev["Job ID"], 0)
                for stage in ev["Stage IDs"]:
                    job_of_stage[stage] = ev["Job ID"]
            elif ev["Event"] == "SparkListenerTaskEnd" and ev["Task End Reason"]["Reason"] == "Success":
                job = job_of_stage[ev["Stage ID"]]  # a task ends after its job started
                tasks[job] += 1
    return jobs, tasks


def test_spark_tasks_in_event_log_match_json(spark: Any, spark_tables: LazyFixtureTables, tmp_path: Path) -> None:
    t: FixtureTable = spark_tables["v2_part"]
    events = tmp_path / "events"
    events.mkdir()  # Spark refuses to start without it
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "icectl", "inspect", "files", str(t.location), "--engine", "spark",
         "--spark-master", "local[2]", "--spark-conf", "spark.eventLog.enabled=true",
         "--spark-conf", f"spark.eventLog.dir=file:{events}", "--spark-conf", "spark.ui.enabled=false",
         "--spark-conf", "spark.driver.host=127.0.0.1", "--spark-conf", "spark.driver.bindAddress=127.0.0.1",
         "--json"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    doc = json.loads(proc.stdout)
    assert doc["engine"]["name"] == "spark" and doc["engine"]["master"] == "local[2]", doc["engine"]

    jobs, tasks = event_log_tasks(events)
    ours = {j for j, props in jobs.items() if props.get("spark.jobGroup.id", "").startswith(GROUP_PREFIX)}
    assert ours, f"no job of icectl's group in the event log: {jobs}"
    groups = {jobs[j]["spark.jobGroup.id"] for j in ours}
    assert len(groups) == 1, f"one engine, one job group: {groups}"
    for j in ours:
        assert jobs[j].get("spark.job.description", "").startswith(DESCRIPTION_PREFIX), jobs[j]
    # Every Spark job of the run is icectl's: none escapes the count the JSON reports.
    assert set(jobs) == ours, {j: jobs[j].get("spark.job.description") for j in set(jobs) - ours}
    ran = sum(tasks[j] for j in ours)
    assert ran > 0, "the manifests were not read by Spark tasks"
    assert doc["engine"]["spark_tasks"] == ran, (doc["engine"], tasks)
    assert doc["engine"]["spark_jobs"] == len(ours), (doc["engine"], sorted(ours))

    # The same rows as the local engine (in-process, no JVM), and as Spark's own metadata table.
    local = CliRunner().invoke(app, ["inspect", "files", str(t.location), "--json"])
    assert local.exit_code == 0, local.stderr
    expected = json.loads(local.stdout)
    assert expected.pop("engine") == {"name": "local"}
    doc.pop("engine")
    assert doc == expected
    spark_paths = sorted(_local(r["file_path"]) for r in metadata_table(spark, t.name, "files"))
    assert sorted(_local(r["file_path"]) for r in doc["rows"]) == spark_paths


# --------------------------------------------------------------------------- Spark commits meanwhile

INSERTS = 6
ROWS_PER_INSERT = 3
FIRST_ID = 10_000


def test_expire_with_spark_engine_while_spark_inserts(spark: Any, spark_engine: Any,
                                                      spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v1_unpart")
    spark.sql(f"ALTER TABLE {t.name} SET TBLPROPERTIES ('commit.retry.num-retries'='40', "
              "'commit.retry.min-wait-ms'='10', 'commit.retry.max-wait-ms'='200')")
    before = {int(r[0]) for r in spark.sql(f"SELECT id FROM {t.name}").collect()}
    inserted: set[int] = set()
    errors: list[BaseException] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(INSERTS):
                lo = FIRST_ID + i * ROWS_PER_INSERT
                spark.sql(f"INSERT INTO {t.name} SELECT id, concat('name-', id), id * 1.25, DATE'2024-01-01', "
                          f"TIMESTAMP'2024-01-01 00:00:00', CAST(id AS DECIMAL(10, 2)), true, X'00' "
                          f"FROM range({lo}, {lo + ROWS_PER_INSERT})")
                inserted.update(range(lo, lo + ROWS_PER_INSERT))
        except BaseException as e:  # reported by the main thread
            errors.append(e)
        finally:
            done.set()

    mark = spark_engine.mark()
    results: list[ExpireResult] = []
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while not done.is_set() or len(results) < 3:
            with engines.using(spark_engine):
                policy = ExpirePolicy(older_than_ms=int(time.time() * 1000), retain_last=1)
                results.append(expire_snapshots(load_table(str(t.location)), policy))
    finally:
        thread.join()
    assert not errors, errors
    assert all(r.exit_code == 0 and not r.data.get("failures") for r in results), [r.data for r in results]
    assert sum(r.data["expired_snapshot_count"] for r in results) > 0
    assert (spark_engine.report_since(mark).spark_tasks or 0) > 0, "expire-snapshots ran no Spark task"

    # No commit lost: every row Spark inserted reads back, besides the fixture's.
    got = [int(r[0]) for r in spark.sql(f"SELECT id FROM {t.name}").collect()]
    assert len(got) == len(set(got)) and set(got) == before | inserted
    assert len(inserted) == INSERTS * ROWS_PER_INSERT
    # No live file deleted: everything a retained snapshot reaches exists, per Spark's metadata tables.
    md = latest_metadata_json(t.location)
    reachable = {_local(s["manifest-list"]) for s in md["snapshots"]}
    reachable |= {_local(m["path"]) for m in metadata_table(spark, t.name, "all_manifests")}
    reachable |= {_local(r[0]) for r in spark.sql(f"SELECT file_path FROM {t.name}.all_files").collect()}
    missing = sorted(p for p in reachable if not os.path.exists(p))
    assert not missing, f"{len(missing)} reachable files deleted, e.g. {missing[:3]}"
    # Expired snapshots read no more; the current one reads through Spark with every row.
    assert len(md["snapshots"]) <= 1 + INSERTS
    assert spark.sql(f"SELECT count(*) FROM {t.name}").collect()[0][0] == len(before | inserted)
