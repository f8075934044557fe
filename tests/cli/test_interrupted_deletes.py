"""Ctrl-C in the middle of a delete run (issue 27, item 5): a real SIGINT to the CLI process while
expire-snapshots, remove-orphan-files or drop --purge deletes files of a Spark-written table.

The process exits 130 with one line saying how many of the planned files it deleted (checked
against the files that are really gone) and how to finish; a rerun of expire and of
remove-orphan-files finishes the job (the table ends up as an uninterrupted run leaves it) and
Spark reads the same rows. To interrupt in the middle every time, the process runs the real CLI
with each file delete slowed down (:data:`SLOW_CLI`); the signal is sent once the first file is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.spark import table_rows_digest

from cli.test_errors import ROOT, run_cli
from icectl.errors import ExitCode

SLOW_CLI = """
import sys, time
from icectl.storage import FileIO
real_delete = FileIO.delete
def slow_delete(self, path):
    time.sleep(0.1)
    return real_delete(self, path)
FileIO.delete = slow_delete
from icectl.cli.app import main
sys.argv = ["icectl", *sys.argv[1:]]
main()
"""


def files_of(root: Path) -> set[str]:
    """The table's files, without Hadoop's .crc sidecars and the metadata JSON and hint the runs write."""
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and not p.name.endswith(".crc") and not p.name.endswith(".metadata.json")
            and p.name != "version-hint.text"}


def interrupt_when_deleting(args: list[str], watched: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run the CLI with slow deletes; send SIGINT as soon as a file of ``watched`` is gone."""
    script = tmp_path / "slow_cli.py"
    script.write_text(SLOW_CLI)
    before = files_of(watched)
    env = {k: v for k, v in os.environ.items() if k != "ICECTL_DEBUG"}
    proc = subprocess.Popen([sys.executable, str(script), *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while files_of(watched) == before:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no file was deleted"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def deleted_count(err: str) -> tuple[int, int]:
    """(N, M) of 'deleted N of M ...' in the one stderr line."""
    words = err.split("deleted ", 1)[1].split()
    assert words[1] == "of", err
    return int(words[0]), int(words[2])


def assert_interrupted(p: subprocess.CompletedProcess[str], *must_mention: str) -> tuple[int, int]:
    assert p.returncode == 130, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("icectl: interrupted: deleted "), p.stderr
    assert "Traceback" not in p.stderr
    for text in must_mention:
        assert text in lines[0], (text, lines[0])
    n, m = deleted_count(lines[0])
    assert 0 < n < m, lines[0]  # in the middle: some deleted, some left
    return n, m


EXPIRE = ["expire-snapshots", "{t}", "--retain-last", "1", "--older-than", "0s", "--max-concurrent-deletes", "2"]


def test_interrupted_expire_says_how_far_it_got_and_a_rerun_finishes(spark: Any, spark_clone: Any,
                                                                     tmp_path: Path) -> None:
    table, reference = spark_clone("v2_part"), spark_clone("v2_part")
    rows = table_rows_digest(spark, f"{table.name} VERSION AS OF 'main'")
    assert run_cli(*(a.replace("{t}", str(reference.location)) for a in EXPIRE)).returncode == 0
    before = files_of(table.location)

    p = interrupt_when_deleting([a.replace("{t}", str(table.location)) for a in EXPIRE], table.location, tmp_path)
    n, m = assert_interrupted(p, "files of the expired snapshots", "run the same command again")
    assert len(before - files_of(table.location)) == n  # the count is what is really gone
    assert m == len(before) - len(files_of(reference.location))  # of all an uninterrupted run deletes
    assert table_rows_digest(spark, f"{table.name} VERSION AS OF 'main'") == rows  # readable meanwhile

    again = run_cli(*(a.replace("{t}", str(table.location)) for a in EXPIRE), "--json")
    assert again.returncode == 0, again.stderr
    assert files_of(table.location) == files_of(reference.location)  # as if never interrupted
    assert table_rows_digest(spark, f"{table.name} VERSION AS OF 'main'") == rows
    assert run_cli("validate", str(table.location)).returncode == 0


def test_interrupted_orphan_removal_says_how_far_it_got_and_a_rerun_finishes(spark: Any, spark_clone: Any,
                                                                             tmp_path: Path) -> None:
    table = spark_clone("v2_part")
    rows = table_rows_digest(spark, table.name)
    live = files_of(table.location)
    old = time.time() - 10 * 86_400
    for i in range(40):
        orphan = table.location / "data" / f"orphan-{i:02d}.parquet"
        orphan.write_bytes(b"not referenced")
        os.utime(orphan, (old, old))
    args = ["remove-orphan-files", str(table.location), "--max-concurrent-deletes", "2"]

    p = interrupt_when_deleting(args, table.location, tmp_path)
    n, m = assert_interrupted(p, "orphan files", "run the same command again")
    assert m == 40 and len(files_of(table.location) - live) == 40 - n

    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    assert files_of(table.location) == live
    assert table_rows_digest(spark, table.name) == rows


def test_interrupted_purge_says_how_far_it_got(spark_clone: Any, tmp_path: Path) -> None:
    table = spark_clone("v2_part")
    every = {p for p in table.location.rglob("*") if p.is_file() and not p.name.endswith(".crc")}
    p = interrupt_when_deleting(["drop", str(table.location), "--purge", "--max-concurrent-deletes", "2"],
                                table.location, tmp_path)
    n, m = assert_interrupted(p, f"files of {table.location}", "is dropped already")
    assert m == len(every)  # the purge plans every file of the table (a fresh clone has no orphans)
    assert n == len({p for p in every if not p.exists()})  # its own version files included
    assert run_cli("inspect", "table", str(table.location)).returncode == ExitCode.NOT_FOUND


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ICECTL_DEBUG", raising=False)
