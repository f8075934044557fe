"""`icectl rewrite-data-files` killed at its file operations (issue 30, acceptance "Crash").

On a private copy of a Spark fixture the CLI runs in a child process that SIGKILLs itself before,
after, or half-way through one of its file operations (:mod:`support.crashpoint`: data files
streamed, manifests, manifest list, the metadata temp file, its rename into place, the version
hint). After each kill:

1. Spark reads the same rows at the head and at every ref as before the run (the kill either
   committed the whole rewrite or nothing of it);
2. a rerun of rewrite-data-files completes (exit 0);
3. after ``remove-orphan-files --older-than 0s --allow-recent``, every file the killed run wrote is
   either reachable from the table (its commit happened) or gone, every file the table reaches is
   there, and (after the last kill) Spark still reads the same rows.

The table is restored from a saved copy of its directory before each kill (same paths, so Spark's
table needs only a REFRESH).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import support.reach as reach_module
from support import crashpoint
from support.fixtures import FixtureTable
from support.reach import physical, reach
from support.spark import latest_metadata_json, latest_metadata_path, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app

CASES = {"v3_dv": ["--rewrite-all"], "many_appends": ["--min-input-files", "2"]}
# Which operations to kill at, besides the sampling of kill_points. v3_dv (15 operations: 1 data file,
# 6 manifests, the manifest list, the metadata temp file, its rename, the version hint) at all of
# them; many_appends (217: 7 data files written by parallel groups, 200 manifests rewritten since
# each append left its own) at its data files only: its manifests and commit steps are those of
# v3_dv, and killing there again costs ~5 s a point for no new state (the suite's time).
ONLY: dict[str, Callable[[dict[str, Any]], bool]] = {
    "v3_dv": lambda o: True,
    "many_appends": lambda o: _family(o)[1] == "data",
}


def icectl(*args: str) -> dict[str, Any]:
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, (args, r.exit_code, r.stdout, r.stderr)
    return json.loads(r.stdout)


def rows(spark: Any, t: FixtureTable) -> dict[str, tuple[int, str]]:
    """Spark's rows at the head and at every ref (read once per snapshot: main is the head)."""
    spark.sql(f"REFRESH TABLE {t.name}")
    md = latest_metadata_json(t.location)
    by_snapshot = {md.get("current-snapshot-id"): table_rows_digest(spark, t.name)}
    out = {"current": by_snapshot[md.get("current-snapshot-id")]}
    for ref, r in md.get("refs", {}).items():
        if r["snapshot-id"] not in by_snapshot:
            by_snapshot[r["snapshot-id"]] = table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF '{ref}'")
        out[ref] = by_snapshot[r["snapshot-id"]]
    return out


def restore(saved: Path, t: FixtureTable) -> None:
    """The table directory as saved: files added since removed, files changed or gone copied back."""
    have = {p.relative_to(t.location) for p in t.location.rglob("*") if p.is_file()}
    want = {p.relative_to(saved) for p in saved.rglob("*") if p.is_file()}
    for rel in have - want:
        (t.location / rel).unlink()
    for rel in want:
        src, dst = saved / rel, t.location / rel
        a = src.stat()
        if rel not in have or (dst.stat().st_size, dst.stat().st_mtime_ns) != (a.st_size, a.st_mtime_ns):
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def written_by(ops: list[dict[str, Any]]) -> set[str]:
    """The files a run created (under the names they end up with)."""
    return {physical(o["path"]) for o in ops if o["op"] in ("write", "create", "rename", "replace")}


def _family(o: dict[str, Any]) -> tuple[str, str]:
    """Operations of one family do the same to the table: a data file, a manifest (``...-mN.avro``)."""
    name = os.path.basename(o["path"])
    kind = "data" if name.endswith(".parquet") else "manifest" if re.search(r"-m\d+\.avro$", name) else name
    return o["op"], kind


def kill_points(ops: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """Where to kill: every distinct state the kills can leave, sampled in long runs of alike operations.

    - Of a run of consecutive operations of one family (7 data files, 200 manifests of many_appends)
      the first and the last are kept: the ones between leave a state of the same shape (some more
      files of the same kind, none referenced yet).
    - ``before`` every kept operation; ``torn`` where an operation has a torn state (write, create,
      rename); ``after`` only where it differs from ``before`` the next operation, i.e. when the next
      one is not kept, and after the last (the kill then lands once the run is done, before exit).
    """
    kept = [i for i, o in enumerate(ops)
            if i in (0, len(ops) - 1) or _family(ops[i - 1]) != _family(o) or _family(ops[i + 1]) != _family(o)]
    points: list[tuple[int, str]] = []
    for i in kept:
        points.append((i, "before"))
        if ops[i]["op"] in ("write", "create", "rename"):
            points.append((i, "torn"))
        if i + 1 not in kept:
            points.append((i, "after"))
    return points


@pytest.mark.parametrize("kind", list(CASES))
def test_killed_at_each_file_operation_the_table_reads_the_same_a_rerun_completes_and_nothing_is_left(
        spark: Any, spark_clone: Callable[..., FixtureTable], tmp_path: Path, kind: str,
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    # Manifests and manifest lists never change under their names (a restore copies the same bytes
    # back): read each once, not once per snapshot reaching it (many_appends: 200 x 200 reads a reach).
    monkeypatch.setattr(reach_module, "_avro", functools.lru_cache(maxsize=None)(reach_module._avro))
    t = spark_clone(kind)
    args = ["rewrite-data-files", str(t.location), *CASES[kind]]
    saved = tmp_path / "saved"
    shutil.copytree(t.location, saved, symlinks=True)
    expected = rows(spark, t)
    start_version = latest_metadata_path(t.location).name
    runner = crashpoint.Runner()
    request.addfinalizer(runner.close)
    # A run killed nowhere lists the operations (and checks the run commits at all).
    code = runner.run(tmp_path / "all.jsonl", -1, "before", args)
    ops = crashpoint.logged(tmp_path / "all.jsonl")
    assert code == 0 and any(o["op"] == "create" for o in ops) and any(o["op"] == "rename" for o in ops), ops
    points = [(i, mode) for i, mode in kill_points(ops) if ONLY[kind](ops[i])]
    timings: dict[str, float] = {"kill": 0.0, "spark": 0.0, "rerun": 0.0, "orphans": 0.0, "restore": 0.0}
    t_all = time.perf_counter()
    for i, mode in points:
        where = f"{mode} {ops[i]['op']} #{i} {os.path.basename(ops[i]['path'])}"
        t0 = time.perf_counter()
        restore(saved, t)
        log = tmp_path / f"kill-{i}-{mode}.jsonl"
        t1 = time.perf_counter()
        assert runner.run(log, i, mode, args) == -9, where
        done = crashpoint.logged(log)
        # Killed at operation i; groups write their data files in parallel, so other threads may have
        # begun more of them meanwhile (nothing else).
        assert done[i]["op"] == ops[i]["op"] and all(o["op"] == "create" for o in done[i + 1:]), (where, done[-3:])
        t2 = time.perf_counter()
        assert rows(spark, t) == expected, where
        committed = latest_metadata_path(t.location).name != start_version
        t3 = time.perf_counter()
        rerun = icectl(*args[:2], *CASES[kind])
        # Killed before its commit, the rerun does the rewrite (after it, v3_dv's --rewrite-all rewrites again).
        assert committed or rerun["snapshot_id"] is not None, where
        t4 = time.perf_counter()
        icectl("remove-orphan-files", str(t.location), "--older-than", "0s", "--allow-recent")
        t5 = time.perf_counter()
        # The current version as Java finds it (the hint, then forward): a kill after the rename
        # leaves the hint one behind when the rerun has nothing to commit.
        reached = reach(str(latest_metadata_path(t.location))) | {physical(str(t.location / "metadata" /
                                                                             "version-hint.text"))}
        left = sorted(p for p in written_by(done) if os.path.exists(p) and p not in reached)
        assert not left, (where, left)
        # ... and nothing live went: every file the table reaches is there (Spark reads it below,
        # once, after the last kill: the reach check is as strict and costs no Spark scan).
        assert not [p for p in reached if not os.path.exists(p)], where
        for k, s in (("restore", t1 - t0), ("kill", t2 - t1), ("spark", t3 - t2), ("rerun", t4 - t3),
                     ("orphans", t5 - t4)):
            timings[k] += s
    assert rows(spark, t) == expected
    print(f"[rewrite-crash {kind}] {len(points)} kills of {len(ops)} operations in "
          f"{time.perf_counter() - t_all:.1f}s: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
