"""The README's nightly maintenance script, run as cron would run it, on a warehouse of three tables.

The script is taken from README.md as it is (only its folders are pointed at a temporary place),
so the recipe users copy is the one tested. The warehouse is built with icectl itself: two
healthy tables with several appends (their retention set with `icectl properties set`), old
orphan files planted in them, and one table whose current metadata file is damaged. After one
night:

* the healthy tables kept their rows' files (validate --deep is clean) and their current state,
  lost the snapshots their retention expires, lost every planted orphan, and had their manifests
  compacted;
* the broken table was reported in each job's JSON lines and left as it was, the other tables
  were maintained all the same, and the script's exit status is not 0, so cron reports it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]
OLD = 1_500_000_000  # 2017: far older than every cutoff


def nightly_script() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Nightly maintenance", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "no script in README's Nightly maintenance section"
    return block.group(1)


def icectl_on_path(tmp: Path) -> dict[str, str]:
    """PATH with an `icectl` that runs this checkout's icectl under this interpreter."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "icectl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m icectl "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("ICECTL_CONFIG", None)
    env.pop("ICECTL_DEBUG", None)
    return env


def ok(*args: str) -> str:
    """Set-up and checks run in this process (the working folder is the lake): only the script
    itself runs as cron would, in processes of its own."""
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, (args, r.output)
    return r.stdout


def live_files(table: str) -> set[str]:
    rows = json.loads(ok("inspect", "files", table, "--json"))["rows"]
    return {r["file_path"] for r in rows}


@pytest.mark.cli
def test_readme_nightly_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lake, logs = tmp_path / "lake", tmp_path / "log"
    lake.mkdir()
    logs.mkdir()
    env = icectl_on_path(tmp_path)
    monkeypatch.delenv("ICECTL_CONFIG", raising=False)
    monkeypatch.chdir(lake)
    ok("namespace", "create", "db")
    for name in ("a", "b", "broken"):
        ok("create", f"db.{name}", "--schema", "id long, name string")
        ok("properties", "set", f"db.{name}", "history.expire.max-snapshot-age-ms=1")
        for i in range(2):
            f = tmp_path / "in" / name / f"{i}.parquet"
            f.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "name": [f"{name}{i}"]}), f)
            ok("add-files", f"db.{name}", str(f))
    tables = {n: lake / "warehouse" / "db" / n for n in ("a", "b", "broken")}
    before = {n: json.loads(ok("inspect", "table", f"db.{n}", "--json")) for n in ("a", "b")}
    live = {n: live_files(f"db.{n}") for n in ("a", "b")}
    orphans = []
    for n in ("a", "b"):
        for rel in ("data/00000-killed-job.parquet", "metadata/snap-1-stale.avro", "leftover.txt"):
            f = tables[n] / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"orphan")
            os.utime(f, (OLD, OLD))
            orphans.append(f)
    # The broken table: its current metadata file is cut in half.
    current = max((tables["broken"] / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:-14]))
    current.write_bytes(current.read_bytes()[: current.stat().st_size // 2])
    broken_files = sorted(str(p) for p in tables["broken"].rglob("*"))

    script = nightly_script().replace("/srv/lake", str(lake)).replace("/var/log/icectl", str(logs))
    p = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=600)

    assert p.returncode == ExitCode.CORRUPT, (p.returncode, p.stderr)  # the broken table's exit code
    for job in ("expire", "orphans", "rewrite", "compact"):
        lines = [json.loads(line) for line in (logs / f"{job}.jsonl").read_text().splitlines()]
        by_table = {d["table"]: d for d in lines}
        assert set(by_table) == {"db.a", "db.b", "db.broken"}, job
        assert "error" in by_table["db.broken"], by_table["db.broken"]
        assert "error" not in by_table["db.a"] and "error" not in by_table["db.b"]
    assert sorted(str(p) for p in tables["broken"].rglob("*")) == broken_files

    for n in ("a", "b"):
        after = json.loads(ok("inspect", "table", f"db.{n}", "--json"))
        snapshots = json.loads(ok("inspect", "snapshots", f"db.{n}", "--json"))["rows"]
        # Expired down to the head, then compaction's replace on it.
        assert [s["operation"] for s in snapshots] == ["append", "replace"], snapshots
        assert after["current_snapshot_id"] != before[n]["current_snapshot_id"]
        assert live_files(f"db.{n}") == live[n]  # two files a table: under Spark's min-input-files (5)
        assert all(Path(f).exists() for f in live[n])
        manifests = json.loads(ok("inspect", "manifests", f"db.{n}", "--json"))["rows"]
        assert len(manifests) == 1
        ok("validate", f"db.{n}", "--deep")
    assert not [f for f in orphans if f.exists()]
    shutil.rmtree(tmp_path / "in")
