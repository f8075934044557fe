"""``benchmarks/run_all.py --quick`` runs end to end and prints every section's figures with a ratio
and a target (issue 15): the harness the integrator's benchmark run depends on stays working. The
Spark engine benchmark (issue 17) is too slow for a smoke run: its table builder is checked."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from icectl.table import load_table
from icectl.table.scan import manifests_of
from icectl.validate import validate_table

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
    assert {f["section"] for f in figures} == {"inspect", "expire", "compact", "validate", "startup", "memory",
                                               "scale"}
    assert all(f["value"] > 0 for f in figures), [f for f in figures if f["value"] <= 0]
    by_name = {f["name"]: f for f in figures}
    inspect = [f for f in figures if f["section"] == "inspect"]
    duck = [f for f in inspect if f["reference"].startswith("DuckDB")]  # with the bench extra only
    assert len(duck) <= 1 and all(f["target"] == ">= 1x" for f in duck)
    assert len(inspect) == 6 + len(duck)
    assert all(f["reference"] == "PyIceberg inspect.files()" for f in inspect if f not in duck)
    assert {f["target"] for f in inspect if f not in duck} == {">= 10x", ">= 2x", ">= 50x", ""}
    warm = [f for f in inspect if "replayed" in f["name"]]
    assert len(warm) == 2
    for f in inspect:
        assert f["ratio"] == f["reference_value"] / f["value"]
    startup = [f for f in figures if f["section"] == "startup"]
    assert [f["target"] for f in startup].count("<= +0.1 s") == 2  # --help and inspect table
    memory = [f for f in figures if f["section"] == "memory" and f["target"]]
    assert memory and all(f["unit"] == " MB" and f["value"] > 10 for f in memory)  # an interpreter's RSS at least
    assert any(f["target"] == "< 3 s" for f in figures if f["section"] == "validate")
    scale = [f for f in figures if f["section"] == "scale"]
    decode = [f for f in scale if f["unit"] == " us"]
    assert len(decode) == 1 and decode[0]["target"] == "<= 3x" and decode[0]["reference"].startswith("DataFusion")
    assert [f["target"] for f in scale if f["unit"] == " MB"] == ["<= 2x", "<= 2x"]  # validate, inspect files
    # The cache folders were the run's own temporary ones, removed after it: never the user's cache.
    cache_root = Path(header["cache_root"])
    assert cache_root.name.startswith("icectl-bench-cache-") and not cache_root.exists()
    # The printed report: the header line and one Markdown row per figure.
    assert "load average (1, 5, 15 min) before:" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and not line.startswith("| section")
            and not line.startswith("| ---")]
    assert len(rows) == len(figures) == len(by_name)


def _bench_module(name: str) -> Any:
    """A module of benchmarks/ (not a package), imported from its file."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_spark_engine_bench_builds_a_valid_table(tmp_path: Path) -> None:
    """bench_spark_engine.py's big-table builder, tiny and in this process (its run starts JVMs: too slow
    for a smoke test): the snapshot lists every manifest and entry, validate finds no error, and the
    orphans are old enough for Spark's remove_orphan_files (24 hours at least)."""
    bench = _bench_module("bench_spark_engine")
    table_dir = tmp_path / "big"
    bench.build_big(table_dir, bench.Sizes(manifests=3, entries=7, snapshots=0), workers=1)
    table = load_table(str(table_dir))
    manifests = manifests_of(table.metadata, table.metadata.current_snapshot(), table.io)
    assert len(manifests) == 3 and sum(m.added_files_count or 0 for m in manifests) == 21
    assert table.metadata.current_snapshot().summary["total-data-files"] == "21"
    result = validate_table(table)
    assert result.errors == 0, [f for f in result.findings if f.severity.name == "ERROR"][:3]
    orphans = list((table_dir / "data" / "orphans").iterdir())
    assert len(orphans) == bench.ORPHANS
    assert all(time.time() - p.stat().st_mtime > 48 * 3600 for p in orphans)


def test_rewrite_bench_gives_icectl_the_options_spark_gets() -> None:
    """bench_rewrite_data_files.py times every contender with the same options: each Spark option it
    accepts maps to a flag `icectl rewrite-data-files` has, with the value Spark gets (its Spark runs
    are too slow for a smoke test)."""
    bench = _bench_module("bench_rewrite_data_files")
    proc = subprocess.run([sys.executable, "-m", "icectl", "rewrite-data-files", "--help"], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    flags = {*(f for f in bench.FLAGS.values() if f), *bench.BOOLEAN_FLAGS.values()}
    assert flags and all(f in proc.stdout for f in flags), sorted(f for f in flags if f not in proc.stdout)
    options = bench.parse_options(["min-input-files=2", "rewrite-all=true", "partial-progress.max-commits=3"])
    assert bench.icectl_flags(options) == ["--min-input-files", "2", "--rewrite-all", "--max-commits", "3"]
    assert bench.spark_options(options) == (", options => map('min-input-files', '2', 'rewrite-all', 'true', "
                                            "'partial-progress.max-commits', '3')")
    assert bench.spark_options({}) == ""
    assert bench.icectl_flags(bench.parse_options(["rewrite-all=false"])) == []
    # --engine-spark-masters: the same command on Spark's engine, with flags the command has.
    cmd = bench.icectl_cmd(Path("t"), options, "local[2]")
    assert cmd[-4:] == ["--engine", "spark", "--spark-master", "local[2]"] and "--engine" in proc.stdout
    assert "--engine" not in bench.icectl_cmd(Path("t"), options) and "--spark-master" in proc.stdout
    # --engine-min-items-per-task: the same CLI, its argv intact, behind the one-line patch.
    packed = bench.icectl_cmd(Path("/nonexistent-table"), options, "local[1]", 1)
    plain = bench.icectl_cmd(Path("/nonexistent-table"), options, "local[1]")
    assert plain[1:3] == ["-m", "icectl"] and packed[1:4] == ["-c", bench.PACKED_CLI, "1"] and packed[4:] == plain[3:]
    run = subprocess.run(packed, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         timeout=60)
    assert run.returncode == 3 and "table directory not found: /nonexistent-table" in run.stderr, run.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's prctl")
def test_rewrite_bench_counts_the_cpu_of_what_the_cli_leaves_running() -> None:
    """The CLI with --engine spark exits before its JVM (nobody waits for it): the benchmark is the
    subreaper of the run and waits for what is left, so that process's CPU is counted. Here a child
    leaves a grandchild that burns ~0.3 s of CPU after the child exited."""
    bench = _bench_module("bench_rewrite_data_files")
    burn = "import time; t = time.process_time(); exec('while time.process_time() - t < 0.3: pass')"
    leave = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {burn!r}])"
    before = bench._own_children()
    cpu = bench._children_cpu()
    with bench._subreaper(True):
        subprocess.run([sys.executable, "-c", leave], check=True, timeout=60)
        bench._reap_left(before, timeout_s=30)
    assert bench._own_children() - before == set()
    assert bench._children_cpu() - cpu >= 0.3
