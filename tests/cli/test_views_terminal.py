"""A real terminal 120 columns wide (``script`` gives the command a pseudo-terminal): ``inspect
snapshots`` of a 200-snapshot table takes one line per snapshot plus the header lines, every id
whole on its line; long output goes through the pager ($ICECTL_PAGER) only on a terminal and
without --no-pager; piped output is plain text."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.appends import build_appends

ROOT = Path(__file__).resolve().parents[2]
N = 200
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[=>]")

pytestmark = pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux script")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """200 one-file appends written with icectl's core (support.appends), well under a second."""
    path = tmp_path_factory.mktemp("views") / "t"
    build_appends(path, N, step_ms=60_000)
    return path


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ICECTL_") and k not in ("PAGER", "COLUMNS",
                                                                                           "LINES")}
    return {**base, "PYTHONPATH": str(ROOT), "ICECTL_CONFIG": "", "TERM": "xterm", **extra}


def on_terminal(args: list[str], cols: int, rows: int, **extra: str) -> list[str]:
    """``icectl ARGS`` on a pseudo-terminal of ``cols`` x ``rows``: the lines it shows, escapes removed."""
    cmd = f"stty cols {cols} rows {rows}; {shlex.quote(sys.executable)} -m icectl " + " ".join(map(shlex.quote, args))
    run = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True, text=True, timeout=120,
                         env=env(**extra), stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout + run.stderr
    return [ANSI.sub("", line).rstrip("\r") for line in run.stdout.replace("\r\n", "\n").split("\n")]


def snapshot_ids(table: Path) -> list[int]:
    run = subprocess.run([sys.executable, "-m", "icectl", "inspect", "snapshots", str(table), "--json"],
                         capture_output=True, text=True, env=env(), check=True)
    return [r["snapshot_id"] for r in json.loads(run.stdout)["rows"]]


def test_snapshots_one_line_each_at_120_columns(table: Path) -> None:
    ids = snapshot_ids(table)
    assert len(ids) == N
    lines = [line for line in on_terminal(["inspect", "snapshots", str(table), "--no-pager"], 120, 50) if line]
    assert max(len(line) for line in lines) <= 120
    rows = [line for line in lines if re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert len(rows) == N
    for snapshot_id, line in zip(ids, rows, strict=True):  # in order, each id whole on its own line
        assert re.search(rf"(?<!\d){snapshot_id}(?!\d)", line), (snapshot_id, line)
    # the rest is the header: title, headings (wrapped), the rule, the count
    assert len(lines) - N <= 6, lines[:8]


def test_pager_only_on_a_tall_terminal(table: Path, tmp_path: Path) -> None:
    seen = tmp_path / "paged.txt"
    pager = f"cat > {shlex.quote(str(seen))}"
    on_terminal(["inspect", "snapshots", str(table)], 120, 40, ICECTL_PAGER=pager, PAGER="false")
    text = seen.read_text()
    assert all(str(i) in text for i in snapshot_ids(table)[:3])  # the pager got the view
    seen.unlink()
    on_terminal(["inspect", "snapshots", str(table), "--no-pager"], 120, 40, ICECTL_PAGER=pager)
    on_terminal(["inspect", "refs", str(table)], 120, 40, ICECTL_PAGER=pager)  # fits: no pager
    assert not seen.exists()
    piped = subprocess.run([sys.executable, "-m", "icectl", "inspect", "snapshots", str(table)], capture_output=True,
                           text=True, env=env(ICECTL_PAGER=pager, COLUMNS="80"), check=True)
    assert not seen.exists()
    lines = piped.stdout.splitlines()
    assert len(lines) == N + 1 and not any(c in piped.stdout for c in "│┃━─")  # a header row, no box
    chosen = subprocess.run([sys.executable, "-m", "icectl", "inspect", "snapshots", str(table), "--columns",
                             "snapshot_id,manifest_list", "--limit", "2"], capture_output=True, text=True,
                            env=env(COLUMNS="40"), check=True).stdout.splitlines()
    assert len(chosen) == 3 and all(str(table) + "/metadata/snap-" in line for line in chosen[1:])  # absolute, whole



def test_spark_200_appends_one_line_per_snapshot_at_120_columns(spark_tables: Any) -> None:
    # The table: Spark's 200 single-row INSERTs (built once per session; the compaction
    # interop test works on a clone of the same fixture).
    location = spark_tables["many_appends"].location
    ids = snapshot_ids(location)
    assert len(ids) == 200
    lines = [line for line in on_terminal(["inspect", "snapshots", str(location), "--no-pager"], 120, 50) if line]
    assert max(len(line) for line in lines) <= 120
    rows = [line for line in lines if re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert len(rows) == len(ids)
    for snapshot_id, line in zip(ids, rows, strict=True):
        assert re.search(rf"(?<!\d){snapshot_id}(?!\d)", line), (snapshot_id, line)
    assert len(lines) - len(ids) <= 6, lines[:8]
