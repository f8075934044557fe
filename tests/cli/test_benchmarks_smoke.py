"""``benchmarks/run_all.py --quick`` runs end to end and prints every section's figures with a ratio
and a target (issue 15): the harness the integrator's benchmark run depends on stays working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_run_reports_every_section(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--quick", "--dir",
                           str(tmp_path / "tables"), "--json", str(out)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    header = doc["header"]
    assert header["cpus"] == os.cpu_count() and header["mode"] == "quick"
    assert len(header["load_before"]) == 3 and len(header["load_after"]) == 3
    assert header["commit"] not in ("", "?")
    figures = doc["figures"]
    assert {f["section"] for f in figures} == {"inspect", "expire", "compact", "validate", "startup", "memory"}
    assert all(f["value"] > 0 for f in figures), [f for f in figures if f["value"] <= 0]
    by_name = {f["name"]: f for f in figures}
    inspect = [f for f in figures if f["section"] == "inspect"]
    assert len(inspect) == 4 and all(f["reference"] == "PyIceberg inspect.files()" for f in inspect)
    assert {f["target"] for f in inspect} == {">= 5x", ">= 2x", ">= 50x", ""}
    for f in inspect:
        assert f["ratio"] == f["reference_value"] / f["value"]
    startup = [f for f in figures if f["section"] == "startup"]
    assert [f["target"] for f in startup].count("<= +0.1 s") == 2  # --help and inspect table
    memory = [f for f in figures if f["section"] == "memory" and f["target"]]
    assert memory and all(f["unit"] == " MB" and f["value"] > 10 for f in memory)  # an interpreter's RSS at least
    assert any(f["target"] == "< 3 s" for f in figures if f["section"] == "validate")
    # The cache folders were the run's own temporary ones, removed after it: never the user's cache.
    cache_root = Path(header["cache_root"])
    assert cache_root.name.startswith("icectl-bench-cache-") and not cache_root.exists()
    # The printed report: the header line and one Markdown row per figure.
    assert "load average (1, 5, 15 min) before:" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and not line.startswith("| section")
            and not line.startswith("| ---")]
    assert len(rows) == len(figures) == len(by_name)
