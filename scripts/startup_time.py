#!/usr/bin/env python3
"""Start-up time of icectl's light commands against a bare ``python -c "import json"`` (issue 15).

``python scripts/startup_time.py [--runs 10] [--table DIR] [--json]`` runs each command (the icectl
of this checkout, whatever the working folder) in a fresh interpreter ``--runs`` times and prints
the median wall and CPU time (user + system of the child), and each command's excess over the
baseline; the issue's target is an excess under 0.1 s (wall; on a busy machine read the CPU). Without
``--table`` it builds a small file-system table (one snapshot, one data file) in a temporary folder.

Bytecode is cached (an installed icectl has its .pyc files): when ``PYTHONDONTWRITEBYTECODE`` is set
the runs use a private ``PYTHONPYCACHEPREFIX`` instead, warmed by one untimed run per command.

From Python (benchmarks/): ``measure_startup(runs=10)`` returns the same figures as a list of dicts
(``name``, ``argv``, ``wall_s``, ``cpu_s``, ``excess_wall_s``, ``excess_cpu_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET_EXCESS_S = 0.1


def _env(pycache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        env["PYTHONPYCACHEPREFIX"] = pycache
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.pop("ICECTL_CONFIG", None)  # a config given would be parsed: measure the plain start
    return env


def _time(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``argv`` in a fresh process (after one untimed warm-up run)."""
    # cwd: `python -m` puts the working folder first on sys.path; measure this checkout's icectl.
    subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return statistics.median(walls), statistics.median(cpus)


def build_small_table(folder: Path) -> Path:
    """A file-system table with one snapshot of one Parquet file, made through the icectl CLI."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = folder / "part-0.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]}), data)
    env = {**_env(str(folder / "pycache")), "ICECTL_WAREHOUSE": str(folder / "wh")}
    for args in (["create", "db.t", "--schema", "id long, name string"], ["add-files", "db.t", str(data)]):
        subprocess.run([sys.executable, "-m", "icectl", *args], env=env, cwd=ROOT, check=True, capture_output=True)
    return folder / "wh" / "db" / "t"


def measure_startup(runs: int = 10, table: Path | None = None) -> list[dict[str, Any]]:
    """The figures of the module doc, baseline first."""
    with tempfile.TemporaryDirectory(prefix="icectl-startup-") as tmp:
        table = table or build_small_table(Path(tmp))
        env = _env(str(Path(tmp) / "pycache"))
        icectl = [sys.executable, "-m", "icectl"]
        commands = [
            ('python -c "import json"', [sys.executable, "-c", "import json"]),
            ("icectl --help", [*icectl, "--help"]),
            ("icectl --version", [*icectl, "--version"]),
            ("icectl inspect table TABLE", [*icectl, "inspect", "table", str(table)]),
            ("icectl inspect table --json TABLE", [*icectl, "inspect", "table", "--json", str(table)]),
        ]
        rows: list[dict[str, Any]] = []
        for name, argv in commands:
            wall, cpu = _time(argv, env, runs)
            rows.append({"name": name, "argv": argv, "wall_s": wall, "cpu_s": cpu})
    base = rows[0]
    for r in rows:
        r["excess_wall_s"] = r["wall_s"] - base["wall_s"]
        r["excess_cpu_s"] = r["cpu_s"] - base["cpu_s"]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--table", type=Path, default=None, help="a table directory (default: build a small one)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    args = parser.parse_args()
    rows = measure_startup(args.runs, args.table)
    load = os.getloadavg()
    if args.json:
        print(json.dumps({"runs": args.runs, "load_average": load, "target_excess_s": TARGET_EXCESS_S,
                          "commands": rows}, indent=1))
        return 0
    print(f"median of {args.runs} runs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'command':38} {'wall':>8} {'cpu':>8} {'+wall':>8} {'+cpu':>8}")
    for r in rows:
        flag = "" if r is rows[0] or r["excess_wall_s"] <= TARGET_EXCESS_S else "  over target"
        print(f"{r['name']:38} {r['wall_s'] * 1000:6.0f}ms {r['cpu_s'] * 1000:6.0f}ms "
              f"{r['excess_wall_s'] * 1000:6.0f}ms {r['excess_cpu_s'] * 1000:6.0f}ms{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
