"""Commits racing other writers, judged by Spark: two icectl processes, icectl interleaved with and
concurrent to Spark, a writer killed mid-commit. Every snapshot icectl adds must read, ``VERSION AS
OF``, the same rows as its parent.

The worker processes run tests/unit/table/test_commit.py as a script (``start_worker``).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from unit.table.test_commit import (
    RACE_PROPS,
    assert_linear_history,
    empty_append,
    register,
    sha256,
    spark_table,
    start_worker,
    version_files,
)

from icectl.catalog.hadoop import is_version_file, version_of
from icectl.catalog.operations import (
    metastore_version,
)
from icectl.spec.snapshots import ancestors_of
from icectl.storage import local_path
from icectl.table import load_table
from icectl.table.commit import (
    commit,
)

# ---------------------------------------------------------------------------------------------
# Two icectl processes racing


@pytest.mark.parametrize("kind", ["fs", "sql"])
def test_two_processes_lose_no_commit(kind: str, spark: Any, tmp_path: Path) -> None:
    name, table_dir = spark_table(spark, props=RACE_PROPS)
    address, config, env = register(kind, table_dir, tmp_path)
    before = load_table(address, config=config)
    n_before = len(before.metadata.snapshots)
    per_worker = 30
    start_at = str(time.time() + 1.5)  # both start together once the interpreters are up
    outs = [tmp_path / f"w{i}.json" for i in range(2)]
    t0 = time.perf_counter()
    procs = [start_worker("loop", address, str(per_worker), start_at, "0", str(o), env=env) for o in outs]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    elapsed = time.perf_counter() - t0
    reports = [json.loads(o.read_text()) for o in outs]
    md = load_table(address, config=config).metadata
    mine = [r["snapshot_id"] for rep in reports for r in rep]
    assert len(set(mine)) == 2 * per_worker
    assert set(mine) <= set(md.snapshots_by_id)  # no commit lost ...
    chain = {s.snapshot_id for s in ancestors_of(md.current_snapshot_id, md.snapshots_by_id)}
    assert set(mine) <= chain and len(md.snapshots) == n_before + 2 * per_worker  # ... and one line of history
    # Every committed file still holds what its writer wrote: nothing was overwritten.
    for r in (r for rep in reports for r in rep):
        assert sha256(Path(local_path(r["location"])).read_bytes()) == r["sha256"], r["location"]
    names = sorted(Path(local_path(r["location"])).name for rep in reports for r in rep)
    if kind == "fs":
        first = version_of(before.metadata_location) + 1
        assert names == sorted(f"v{v}.metadata.json" for v in range(first, first + 2 * per_worker))
        assert sorted(version_files(table_dir)) == list(range(1, first + 2 * per_worker))  # no gaps, no extras
        assert_linear_history(table_dir)
    else:
        # Java's parseVersion: a base named vN.metadata.json has no version (-1), so ours start at 00000.
        first = metastore_version(before.metadata_location) + 1
        assert sorted(int(n[:5]) for n in names) == list(range(first, first + 2 * per_worker))  # once each
    retries = sum(r["attempts"] - 1 for rep in reports for r in rep)
    print(f"[commit-race {kind}] {2 * per_worker} commits in {elapsed:.1f}s, {retries} conflicts retried")
    if kind == "fs":  # Spark reads the result (its catalog here is the Hadoop one)
        assert spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0]["n"] == 2


# ---------------------------------------------------------------------------------------------
# Spark


def snapshot_digests(spark: Any, name: str, snapshot_ids: list[int],
                     columns: str = "*") -> dict[int, tuple[int, str]]:
    """``table_rows_digest`` of ``VERSION AS OF`` each snapshot, in one Spark job (a UNION ALL)."""
    scans = " UNION ALL ".join(f"SELECT CAST({sid} AS BIGINT) AS sid, sha2(to_json(struct({columns})), 256) AS h "
                               f"FROM {name} VERSION AS OF {sid}" for sid in snapshot_ids)
    rows = spark.sql(f"""
        SELECT sid, count(*) AS n,
               coalesce(sum(CAST(conv(substr(h, 1, 15), 16, 10) AS DECIMAL(38, 0))), 0) AS a,
               coalesce(sum(CAST(conv(substr(h, 16, 15), 16, 10) AS DECIMAL(38, 0))), 0) AS b
        FROM ({scans}) GROUP BY sid""").collect()
    found = {int(r["sid"]): (int(r["n"]), f"{int(r['a']):x}-{int(r['b']):x}") for r in rows}
    return {sid: found.get(sid, (0, "0-0")) for sid in snapshot_ids}  # an empty snapshot has no rows


def test_interleaved_with_spark(spark: Any, spark_clone: Any) -> None:
    from support.spark import metadata_table, table_rows_digest

    t = spark_clone("v2_part")
    name, table_dir = t.name, str(t.location)
    ours: list[int] = []
    steps = [f"INSERT INTO {name} SELECT * FROM {name} WHERE id < 5",
             f"DELETE FROM {name} WHERE id % 3 = 1",
             f"UPDATE {name} SET note = 'icectl-was-here' WHERE id % 4 = 0",
             f"MERGE INTO {name} AS tgt USING (SELECT DISTINCT id FROM {name} WHERE id < 20) AS src ON tgt.id = src.id "
             "WHEN MATCHED AND src.id % 2 = 0 THEN DELETE"]
    for sql in steps:
        ours.append(commit(load_table(table_dir), empty_append).metadata.current_snapshot_id)
        spark.sql(sql)  # Spark builds on our snapshot
        current = load_table(table_dir).metadata.current_snapshot()
        assert current is not None and current.parent_snapshot_id == ours[-1], sql
    ours.append(commit(load_table(table_dir), empty_append).metadata.current_snapshot_id)
    assert table_rows_digest(spark, name) == snapshot_digests(spark, name, [ours[-1]])[ours[-1]]

    # A commit to the dev branch: main, current snapshot and snapshot-log stay as they were.
    before = load_table(table_dir).metadata
    dev_head = before.refs["dev"].snapshot_id
    on_dev = commit(load_table(table_dir), lambda b: empty_append(b, branch="dev")).metadata
    dev_snapshot = on_dev.refs["dev"].snapshot_id
    ours.append(dev_snapshot)
    assert (on_dev.current_snapshot_id, on_dev.snapshot_log) == (before.current_snapshot_id, before.snapshot_log)
    assert on_dev.snapshot_by_id(dev_snapshot).parent_snapshot_id == dev_head
    spark.sql(f"DELETE FROM {name}.branch_dev WHERE id = 101")
    after_dev = load_table(table_dir).metadata
    assert after_dev.snapshot_for_ref("dev").parent_snapshot_id == dev_snapshot  # Spark built on ours
    assert after_dev.current_snapshot_id == before.current_snapshot_id

    md = after_dev
    # Every snapshot, Spark's and ours, reads with Spark; ours read exactly as their parents.
    digests = snapshot_digests(spark, name, [s.snapshot_id for s in md.snapshots])
    for sid in ours:
        parent = md.snapshot_by_id(sid).parent_snapshot_id
        assert parent is not None and digests[sid][0] > 0
        if sid == dev_snapshot:
            # As Java, a new snapshot carries the table's current schema; dev's head predates
            # ADD COLUMN / RENAME, so compare the columns both schemas share.
            both = snapshot_digests(spark, name, [sid, parent], columns="id, name, price, ts, payload")
            assert both[sid] == both[parent]
        else:
            assert digests[sid] == digests[parent]
    history = {r["snapshot_id"] for r in metadata_table(spark, name, "history")}
    assert set(ours) - {dev_snapshot} <= history  # history = main's snapshot-log
    assert {r["snapshot_id"] for r in metadata_table(spark, name, "snapshots")} == set(md.snapshots_by_id)
    assert {s.snapshot_id for s in ancestors_of(md.current_snapshot_id, md.snapshots_by_id)} >= \
        set(ours) - {dev_snapshot}
    logged = [e.metadata_file for e in md.metadata_log]
    assert len(logged) == len(set(logged)) and all(Path(local_path(f)).exists() for f in logged)


def test_v3_empty_append_keeps_row_lineage(spark: Any) -> None:
    from support.spark import table_rows_digest

    name, table_dir = spark_table(spark, version=3)
    before = load_table(str(table_dir)).metadata
    result = commit(load_table(str(table_dir)), empty_append)
    snap = result.metadata.current_snapshot()
    assert snap is not None and (snap.first_row_id, snap.added_rows) == (before.next_row_id, 0)
    assert result.metadata.next_row_id == before.next_row_id
    spark.sql(f"INSERT INTO {name} VALUES (3, 'c')")
    after = load_table(str(table_dir)).metadata
    assert after.next_row_id == before.next_row_id + 1
    rows = spark.sql(f"SELECT id, _row_id FROM {name} ORDER BY id").collect()
    assert [(r["id"], r["_row_id"]) for r in rows] == [(1, 0), (2, 1), (3, before.next_row_id)]
    assert table_rows_digest(spark, f"SELECT * FROM {name} VERSION AS OF {snap.snapshot_id}")[0] == 2


def test_icectl_and_spark_commit_concurrently(spark: Any, tmp_path: Path) -> None:
    """Spark INSERTs in a loop while an icectl process commits continuously to the same table.

    Spark's HadoopTableOperations checks that v<N+1> is absent and then renames over it (its lock
    is per JVM): it never loses to us (our file exists first, or our link fails), but its rename can
    replace a file we created in between; icectl re-reads its file after committing and re-applies
    its change when that happened. Either way every commit of both sides must be in the history.
    """
    name, table_dir = spark_table(spark, props=RACE_PROPS)
    n_before = len(load_table(str(table_dir)).metadata.snapshots)
    spark_inserts = 12
    out, stop = tmp_path / "icectl.json", tmp_path / "stop"
    start_at = time.time() + 2.0
    worker = start_worker("loop", str(table_dir), "1000", str(start_at), "0.05", str(out), str(stop))
    spark_errors: list[BaseException] = []

    def spark_loop() -> None:
        time.sleep(max(0.0, start_at - time.time() + 0.2))  # icectl is already committing
        try:
            for i in range(spark_inserts):
                spark.sql(f"INSERT INTO {name} VALUES ({100 + i}, 'spark')")
        except BaseException as e:  # surfaced below
            spark_errors.append(e)
        finally:
            stop.touch()

    thread = threading.Thread(target=spark_loop)
    t0 = time.perf_counter()
    thread.start()
    _, err = worker.communicate(timeout=300)
    thread.join(timeout=300)
    elapsed = time.perf_counter() - t0
    assert worker.returncode == 0, err
    assert not spark_errors, spark_errors
    report = json.loads(out.read_text())
    md = load_table(str(table_dir)).metadata
    chain = [s.snapshot_id for s in ancestors_of(md.current_snapshot_id, md.snapshots_by_id)][::-1]
    mine = {r["snapshot_id"] for r in report}
    spark_snaps = {s.snapshot_id for s in md.snapshots if s.summary.get("added-records") == "1"}
    assert len(mine) == len(report) and mine <= set(chain)
    assert len(spark_snaps) == spark_inserts and spark_snaps <= set(chain)
    assert len(md.snapshots) == len(chain) == n_before + len(report) + spark_inserts
    ids = sorted(r["id"] for r in spark.sql(f"SELECT id FROM {name}").collect())
    assert ids == [1, 2, *range(100, 100 + spark_inserts)]
    # They really ran at the same time: the history alternates between the two writers.
    labels = ["i" if sid in mine else "s" for sid in chain if sid in mine or sid in spark_snaps]
    switches = sum(a != b for a, b in itertools.pairwise(labels))
    assert switches >= spark_inserts, "".join(labels)
    assert_linear_history(table_dir)
    for r in report:
        assert sha256(Path(r["location"]).read_bytes()) == r["sha256"]
    retries = sum(r["attempts"] - 1 for r in report)
    replaced = sum("replaced by another writer" in c for r in report for c in r["conflicts"])
    print(f"[icectl-vs-spark] {len(report)} icectl + {spark_inserts} Spark commits in {elapsed:.1f}s, "
          f"{switches} alternations; icectl retried {retries} times, {replaced} after Spark replaced its file")


# ---------------------------------------------------------------------------------------------
# A writer killed between writing its metadata file and committing it


@pytest.mark.parametrize("kind", ["fs", "sql"])
def test_killed_writer_leaves_table_unchanged(kind: str, spark: Any, tmp_path: Path) -> None:
    from support.spark import latest_metadata_path, table_rows_digest

    name, table_dir = spark_table(spark)
    address, config, env = register(kind, table_dir, tmp_path)
    before_location = load_table(address, config=config).metadata_location
    before_files = set((table_dir / "metadata").iterdir())
    digest = table_rows_digest(spark, name)
    killed = start_worker("kill", address, env=env)
    assert killed.wait(timeout=120) == 9, killed.communicate()[1]
    new_files = set((table_dir / "metadata").iterdir()) - before_files
    # Exactly the dead writer's metadata file is left over (an orphan), and it is not current.
    assert len(new_files) == 1 and not is_version_file(next(iter(new_files)).name)
    after = load_table(address, config=config)
    assert after.metadata_location == before_location
    assert table_rows_digest(spark, name) == digest
    if kind == "fs":
        assert latest_metadata_path(table_dir) == Path(before_location)
    result = commit(after, empty_append)
    assert result.committed and result.attempts == 1
    if kind == "fs":
        assert table_rows_digest(spark, name) == digest  # Spark reads the following commit's snapshot
        assert load_table(str(table_dir)).metadata.current_snapshot_id == result.metadata.current_snapshot_id
