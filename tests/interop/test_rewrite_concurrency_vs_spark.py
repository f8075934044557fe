"""`icectl rewrite-data-files` while Spark writes (issue 30, acceptance "Concurrency").

A thread runs Spark's INSERT, DELETE and MERGE (merge-on-read: position deletes in v2, deletion
vectors in v3) in a loop on a partitioned table, keeping a ledger of the rows each statement that
committed leaves; meanwhile the CLI, in its own processes, rewrites the table's data files several
times: every other run through the library, held between writing its files and committing them
until Spark has committed a DELETE or MERGE (which then applies to files the run rewrites: the
commit must fail with CommitConflictError and remove what it wrote), the others through the CLI in
a process of its own, interleaving as it happens. Then:

- every CLI rewrite ended with exit 0 or exit 5 (a commit conflict, one line on stderr; with
  --partial-progress the JSON of the groups committed and failed, and a one-line warning), nothing
  else; a held rewrite committed or raised CommitConflictError, at least one of them the latter;
- a Spark statement that failed did so with Iceberg's validation (a rewrite removed a file it was
  deleting from) and committed nothing, and Spark's statements after the rewrites all succeed;
- each ``replace`` snapshot icectl committed reads, in Spark, the rows of its parent (in v3 with
  their ``_row_id`` and ``_last_updated_sequence_number``), and no two rows share a row id;
- Spark's rows at the end are the ledger's: no committed row lost, no deleted row back.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.spark import latest_metadata_json, table_location, table_rows_digest

import icectl.ops.rewrite_data_files as rewrite_module
from icectl.errors import CommitConflictError
from icectl.ops.rewrite_data_files import RewriteOptions, rewrite_data_files
from icectl.table import load_table, snapshot_writer

REPO = Path(__file__).resolve().parents[2]
MOR = ", ".join(f"'write.{op}.mode'='merge-on-read'" for op in ("delete", "update", "merge"))
REWRITES = 6  # icectl runs per table while Spark writes (3 CLI, 3 held)
# What Iceberg raises when a concurrent commit makes Spark's own invalid (it then commits nothing).
SPARK_CONFLICTS = ("ValidationException", "CommitFailedException")


class Ledger:
    """The rows Spark's committed statements leave (id -> v), and Spark's statements driving them."""

    def __init__(self, spark: Any, name: str, seed: int) -> None:
        self.spark, self.name = spark, name
        self.rows: dict[int, int] = {}
        self.next_id = 0
        self.rng = random.Random(seed)
        self.committed: dict[str, int] = {"insert": 0, "delete": 0, "merge": 0}
        self.failed: list[str] = []
        self.changed = threading.Condition()  # notified on each committed DELETE or MERGE

    def _new_rows(self, n: int) -> dict[int, int]:
        out = {self.next_id + i: self.rng.randrange(1_000_000) for i in range(n)}
        self.next_id += n
        return out

    @staticmethod
    def _values(rows: dict[int, int]) -> str:
        return ", ".join(f"({i}, {i % 3}, {v})" for i, v in rows.items())

    def step(self, kind: str, *, tolerate_conflicts: bool) -> None:
        """One statement; the ledger follows it only if it committed."""
        if kind == "delete" and len(self.rows) >= 3:
            gone = self.rng.sample(sorted(self.rows), 3)
            sql = f"DELETE FROM {self.name} WHERE id IN ({', '.join(map(str, gone))})"
            after = {k: v for k, v in self.rows.items() if k not in gone}
        elif kind == "merge" and len(self.rows) >= 3:
            changed = {k: self.rng.randrange(1_000_000) for k in self.rng.sample(sorted(self.rows), 3)}
            changed.update(self._new_rows(2))
            sql = (f"MERGE INTO {self.name} t USING (SELECT * FROM VALUES {self._values(changed)} AS s(id, p, v)) s "
                   "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *")
            after = {**self.rows, **changed}
        else:
            kind = "insert"
            new = self._new_rows(5)
            sql = f"INSERT INTO {self.name} VALUES {self._values(new)}"
            after = {**self.rows, **new}
        try:
            self.spark.sql(sql)
        except Exception as e:
            text = f"{type(e).__name__}: {e}"
            if not tolerate_conflicts or not any(c in text for c in SPARK_CONFLICTS):
                raise
            cause = next(line for line in text.splitlines() if any(c in line for c in SPARK_CONFLICTS))
            self.failed.append(f"{kind}: {cause.strip()[:200]}")
            return
        with self.changed:
            self.rows = after
            self.committed[kind] += 1
            self.changed.notify_all()

    def deletes(self) -> int:
        return self.committed["delete"] + self.committed["merge"]


def spark_rows(spark: Any, name: str, version: int | None = None) -> dict[int, int]:
    spark.sql(f"REFRESH TABLE {name}")
    at = f" VERSION AS OF {version}" if version is not None else ""
    return {r.id: r.v for r in spark.sql(f"SELECT id, v FROM {name}{at}").collect()}


def rewrite(location: Path, *options: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run([sys.executable, "-m", "icectl", "rewrite-data-files", str(location), *options, "--json"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": path})


def held_rewrite(location: Path, meanwhile: Callable[[], None],
                 monkeypatch: pytest.MonkeyPatch) -> tuple[int | None, list[str]]:
    """rewrite_data_files --rewrite-all held between writing its files and committing them while
    ``meanwhile`` runs: ``(snapshot id, or None on a CommitConflictError; the files it wrote)``."""
    real = snapshot_writer.write_snapshot
    # Wherever in the package the commit is called from (a module that imported write_snapshot).
    users = [m for m in (rewrite_module, *(importlib.import_module(f"{rewrite_module.__name__}.{i.name}")
                                           for i in pkgutil.iter_modules(rewrite_module.__path__)))
             if getattr(m, "write_snapshot", None) is real]
    assert users
    written: list[str] = []

    def held(table: Any, branch: str, change: Any, **kwargs: Any) -> Any:
        written.extend(change.written)
        meanwhile()
        return real(table, branch, change, **kwargs)

    with monkeypatch.context() as m:
        for module in users:
            m.setattr(module, "write_snapshot", held)
        try:
            res = rewrite_data_files(load_table(str(location)), RewriteOptions(rewrite_all=True))
        except CommitConflictError:
            return None, written
    return res.snapshot_id, written


def until_spark_deletes(ledger: Ledger) -> Callable[[], None]:
    """Wait for the writer thread's next committed DELETE or MERGE."""
    def wait() -> None:
        with ledger.changed:
            seen = ledger.deletes()
            assert ledger.changed.wait_for(lambda: ledger.deletes() > seen, timeout=90), "Spark deleted nothing"
    return wait


@pytest.mark.parametrize("version", [2, 3])
def test_spark_writing_while_icectl_rewrites_loses_and_resurrects_no_row(spark: Any, version: int,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"local.db.rewrite_race_v{version}_{os.getpid()}"
    spark.sql(f"""CREATE TABLE {name} (id BIGINT, p INT, v BIGINT) USING iceberg PARTITIONED BY (p)
                  TBLPROPERTIES ('format-version'='{version}', {MOR})""")
    location = table_location(spark, name)
    ledger = Ledger(spark, name, seed=version)
    for _ in range(6):  # small files to rewrite from the start, and deletes on them
        ledger.step("insert", tolerate_conflicts=False)
    ledger.step("delete", tolerate_conflicts=False)
    ledger.step("merge", tolerate_conflicts=False)
    assert spark_rows(spark, name) == ledger.rows

    stop = threading.Event()
    errors: list[BaseException] = []

    def spark_loop() -> None:
        try:
            while not stop.is_set():
                kind = ledger.rng.choices(["insert", "delete", "merge"], weights=[2, 1, 1])[0]
                ledger.step(kind, tolerate_conflicts=True)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    t0 = time.perf_counter()
    writer = threading.Thread(target=spark_loop, name="spark-writer", daemon=True)
    writer.start()
    outcomes: list[tuple[int, str]] = []
    committed: list[int] = []  # the replace snapshots icectl reported
    held_conflicts = 0
    try:
        for i in range(REWRITES):
            if i % 2 == 1:
                sid, written = held_rewrite(location, until_spark_deletes(ledger), monkeypatch)
                assert written and any(w.endswith(".parquet") for w in written)
                if sid is None:
                    held_conflicts += 1
                    assert not [w for w in written if os.path.exists(w.removeprefix("file:"))]
                else:
                    committed.append(sid)
                continue
            # Each group of its own commit with --partial-progress: a conflicting one fails alone.
            options = ["--rewrite-all"] if i % 4 == 0 else ["--min-input-files", "2", "--partial-progress",
                                                            "--max-commits", "3"]
            r = rewrite(location, *options)
            outcomes.append((r.returncode, r.stderr.strip()))
            assert r.returncode in (0, 5), (options, r.returncode, r.stderr)
            assert len(r.stderr.strip().splitlines()) <= 1, r.stderr
            if r.returncode == 5 and "--partial-progress" not in options:
                assert r.stdout == "" and r.stderr.strip(), r.stderr  # one line: the conflict
            else:  # the snapshots it committed (none: nothing to rewrite, or every commit failed)
                doc = json.loads(r.stdout)
                if r.returncode == 5:  # partial success, reported: the groups that failed, a warning
                    assert doc["failed_data_files_count"] > 0 and "not rewritten" in r.stderr, (doc, r.stderr)
                committed.extend(doc.get("snapshot_ids") or ([doc["snapshot_id"]] if doc["snapshot_id"] else []))
            if errors:
                break
    finally:
        stop.set()
        writer.join(timeout=120)
    assert not errors, errors
    assert held_conflicts >= 1, "no held rewrite met the conflict it was held for"
    concurrent_seconds = time.perf_counter() - t0

    # Spark's statements after the rewrites succeed, each of them.
    for kind in ("insert", "delete", "merge"):
        ledger.step(kind, tolerate_conflicts=False)
    # One more rewrite with Spark quiet commits.
    final = rewrite(location, "--rewrite-all")
    assert final.returncode == 0, final.stderr
    committed.append(json.loads(final.stdout)["snapshot_id"])

    assert spark_rows(spark, name) == ledger.rows
    md = latest_metadata_json(location)
    replaces = [s for s in md["snapshots"] if s["summary"]["operation"] == "replace"]
    assert sorted(s["snapshot-id"] for s in replaces) == sorted(committed)  # a conflict committed nothing
    # Each rewrite kept its parent's rows, in v3 with their row ids and last-updated sequence numbers.
    columns = "*, _row_id, _last_updated_sequence_number" if version >= 3 else "*"
    for s in replaces:
        parent = s["parent-snapshot-id"]
        assert (table_rows_digest(spark, f"SELECT {columns} FROM {name} VERSION AS OF {s['snapshot-id']}")
                == table_rows_digest(spark, f"SELECT {columns} FROM {name} VERSION AS OF {parent}")), s["snapshot-id"]
    if version >= 3:  # and no row id is spent twice
        n, ids = spark.sql(f"SELECT count(*), count(DISTINCT _row_id) FROM {name}").collect()[0]
        assert n == ids == len(ledger.rows)
    print(f"[rewrite-race v{version}] {concurrent_seconds:.1f}s concurrent: rewrites exited "
          f"{[code for code, _ in outcomes]}, {held_conflicts} of {REWRITES // 2} held ones conflicted "
          f"({len(committed) - 1} committed in all), Spark committed {ledger.committed}, "
          f"{len(ledger.failed)} Spark statements refused {ledger.failed[:3]}, {len(ledger.rows)} rows")


def test_a_copy_on_write_delete_meanwhile_fails_the_rewrite(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copy-on-write: Spark's DELETE replaces the data files the rewrite read (no delete file): the
    rewrite's commit must fail (its files still live check), or the deleted rows would come back."""
    name = f"local.db.rewrite_race_cow_{os.getpid()}"
    cow = ", ".join(f"'write.{op}.mode'='copy-on-write'" for op in ("delete", "update", "merge"))
    spark.sql(f"""CREATE TABLE {name} (id BIGINT, p INT, v BIGINT) USING iceberg PARTITIONED BY (p)
                  TBLPROPERTIES ('format-version'='2', {cow})""")
    location = table_location(spark, name)
    ledger = Ledger(spark, name, seed=7)
    for _ in range(4):
        ledger.step("insert", tolerate_conflicts=False)
    sid, written = held_rewrite(location, lambda: ledger.step("delete", tolerate_conflicts=False), monkeypatch)
    assert sid is None and ledger.committed["delete"] == 1
    assert written and not [w for w in written if os.path.exists(w.removeprefix("file:"))]
    assert spark_rows(spark, name) == ledger.rows
    ledger.step("merge", tolerate_conflicts=False)
    assert spark_rows(spark, name) == ledger.rows
