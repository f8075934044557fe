"""`icectl health` as a user and a cron job run it: a table made unhealthy on purpose (2,000 one-file
appends spread over two weeks, never maintained) and a fresh one, in one warehouse.

The judges are independent of health's code: the metadata JSON read with ``json`` (snapshots,
timestamps), the files on disk, `icectl compact --dry-run` for the manifests it would merge, and
prometheus_client's own parser for the --prometheus file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.appends import build_appends
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode
from icectl.table import load_table

N = 2000
STEP_MS = 10 * 60 * 1000  # one append every 10 minutes: about 14 days
FIVE_DAYS_MS = 5 * 24 * 3600 * 1000  # history.expire.max-snapshot-age-ms' default


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse with db.appends (2,000 appends) and db.fresh (one small append)."""
    root = tmp_path_factory.mktemp("health-wh")
    build_appends(root / "db" / "appends", N, step_ms=STEP_MS)
    build_appends(root / "db" / "fresh", 1)
    return root


def run(wh: Path, *args: str, config: Path | None = None) -> tuple[int, str, str]:
    env = {"ICECTL_WAREHOUSE": str(wh), "ICECTL_CONFIG": str(config) if config else ""}
    r = CliRunner().invoke(app, list(args), env=env)
    return r.exit_code, r.stdout, r.stderr


def current_metadata(table_dir: Path) -> dict[str, Any]:
    return json.loads(Path(load_table(str(table_dir)).metadata_location).read_text())


def crossed(doc: dict[str, Any]) -> set[str]:
    return {c["id"] for c in doc["checks"] if c["crossed"]}


def test_a_table_of_2000_appends_needs_expiry_and_compaction(wh: Path, tmp_path: Path) -> None:
    table = str(wh / "db" / "appends")
    prom = tmp_path / "health.prom"
    code, out, err = run(wh, "health", table, "--json", "--prometheus", str(prom))
    assert code == ExitCode.FINDINGS, err
    doc = json.loads(out)
    md = current_metadata(wh / "db" / "appends")
    # The figures, judged from the metadata JSON and the disk.
    times = sorted(s["timestamp-ms"] for s in md["snapshots"])
    assert doc["snapshots"]["count"] == len(times) == N
    assert (doc["snapshots"]["oldest_ms"], doc["snapshots"]["newest_ms"]) == (times[0], times[-1])
    cutoff = doc["checked_at_ms"] - FIVE_DAYS_MS  # main's ancestors older than the cutoff, the head kept
    assert doc["snapshots"]["expirable_count"] == sum(t < cutoff for t in times[:-1]) > 1000
    data = sorted((wh / "db" / "appends" / "data").iterdir())
    assert doc["data_files"]["count"] == len(data) == N
    assert doc["data_files"]["total_bytes"] == sum(p.stat().st_size for p in data)
    assert doc["data_files"]["small_file_count"] == N and doc["data_files"]["small_file_ratio"] == 1.0
    assert sum(b["count"] for b in doc["data_files"]["size_histogram"]) == N
    assert doc["manifests"]["count"] == N and doc["manifests"]["delete_count"] == 0
    code, out, _ = run(wh, "compact", table, "--dry-run", "--json")
    assert code == 0 and doc["manifests"]["mergeable_count"] == json.loads(out)["manifests_replaced"] == N
    assert sum(b["snapshots"] for b in doc["timeline"]) == N and len(doc["timeline"]) <= 30
    # The checks and what to run.
    assert crossed(doc) == {"snapshots.expirable", "snapshots.count", "manifests.count", "manifests.small",
                            "data_files.small"}
    assert doc["healthy"] is False
    assert doc["recommendations"][:2] == [f"icectl expire-snapshots {table}", f"icectl compact {table}"]
    assert f"icectl rewrite-data-files {table}" in doc["recommendations"]
    # The Prometheus file parses and says what the document says.
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    def value(name: str, **labels: str) -> float:
        found = [s.value for s in families[name].samples if s.labels == {"table": table, **labels}]
        assert len(found) == 1, (name, labels)
        return found[0]
    assert value("icectl_table_healthy") == 0 and value("icectl_table_health_up") == 1
    assert value("icectl_table_snapshots") == doc["snapshots"]["count"]
    assert value("icectl_table_expirable_snapshots") == doc["snapshots"]["expirable_count"]
    assert value("icectl_table_manifests", content="data") == doc["manifests"]["data_count"]
    assert value("icectl_table_data_files_bytes") == doc["data_files"]["total_bytes"]
    assert value("icectl_table_oldest_snapshot_age_seconds") == doc["snapshots"]["oldest_age_ms"] / 1000
    for c in doc["checks"]:
        assert value("icectl_table_check_crossed", check=c["id"]) == c["crossed"]
        if c["value"] is not None:  # a figure the table does not have (no partition statistics): no sample
            assert value("icectl_table_check_value", check=c["id"]) == c["value"]
        assert value("icectl_table_check_threshold", check=c["id"]) == c["threshold"]
    assert not [p for p in tmp_path.iterdir() if p.name != "health.prom"]  # no temp file left behind


def test_a_fresh_table_is_healthy(wh: Path) -> None:
    code, out, err = run(wh, "health", "db.fresh", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["healthy"] is True and doc["recommendations"] == [] and doc["table"] == "db.fresh"
    assert doc["snapshots"]["count"] == 1 and doc["data_files"]["count"] == 1 and not crossed(doc)


def test_an_output_file_in_a_missing_folder_or_a_folder_is_refused_before_any_work(wh: Path, tmp_path: Path) -> None:
    code, out, err = run(wh, "health", "db.fresh", "--prometheus", str(tmp_path / "nope" / "icectl.prom"))
    assert code == ExitCode.NOT_FOUND and out == "" and err.count("\n") == 1 and "does not exist" in err
    assert not (tmp_path / "nope").exists()  # not made: a mistyped textfile folder must not look fine
    code, out, err = run(wh, "health", "db.fresh", "--html", str(tmp_path))
    assert code == ExitCode.USAGE and out == "" and "is a folder" in err


def test_all_tables_one_line_each_and_the_worst_exit_code(wh: Path, tmp_path: Path) -> None:
    prom = tmp_path / "all.prom"
    code, out, err = run(wh, "health", "--all", "--json", "--prometheus", str(prom))
    assert code == ExitCode.FINDINGS, err
    docs = {d["table"]: d for d in map(json.loads, out.splitlines())}
    assert set(docs) == {"db.appends", "db.fresh"}
    assert docs["db.fresh"]["healthy"] and not docs["db.appends"]["healthy"]
    assert docs["db.appends"]["recommendations"][:2] == ["icectl expire-snapshots db.appends",
                                                        "icectl compact db.appends"]
    healthy = {s.labels["table"]: s.value for f in text_string_to_metric_families(prom.read_text())
               if f.name == "icectl_table_healthy" for s in f.samples}
    assert healthy == {"db.appends": 0, "db.fresh": 1}
    # On a terminal: one line per table, then the count.
    code, out, _ = run(wh, "health", "--all", "db")
    lines = out.splitlines()
    assert code == ExitCode.FINDINGS
    assert lines[0].startswith("db.appends  needs attention: 5 check(s) (expire-snapshots, compact, rewrite-data-files")
    assert lines[1] == "db.fresh  healthy" and lines[2] == "health: 2 table(s), 1 with problems"
    assert run(wh, "health")[0] == ExitCode.USAGE


def test_thresholds_from_the_config_and_the_table(wh: Path, tmp_path: Path) -> None:
    config = tmp_path / "icectl.toml"
    config.write_text("[health]\nsmall-file-count = 1\nsmall-file-ratio = 0.5\n")
    code, out, _ = run(wh, "health", "db.fresh", "--json", config=config)
    doc = json.loads(out)
    assert code == ExitCode.FINDINGS and crossed(doc) == {"data_files.small"}
    assert doc["thresholds"]["small-file-count"] == 1
    assert doc["recommendations"] == ["icectl rewrite-data-files db.fresh"]
    assert run(wh, "rewrite-data-files", "db.fresh", "--dry-run", "--json", config=config)[0] == 0
    # The table's own property wins over the config.
    assert run(wh, "properties", "set", "db.fresh", "icectl.health.small-file-count=2", config=config)[0] == 0
    try:
        code, out, _ = run(wh, "health", "db.fresh", "--json", config=config)
        assert code == 0 and json.loads(out)["thresholds"]["small-file-count"] == 2
        assert run(wh, "properties", "set", "db.fresh", "icectl.health.small-file-count=many")[0] == 0
        code, _, err = run(wh, "health", "db.fresh")
        assert code == ExitCode.CORRUPT and len(err.splitlines()) == 1 and "small-file-count" in err
    finally:
        assert run(wh, "properties", "unset", "db.fresh", "icectl.health.small-file-count")[0] == 0
    for bad in ("manifest-count = -1\n", "manifests = 5\n", "manifest-count = \"lots\"\n"):
        config.write_text("[health]\n" + bad)
        code, _, err = run(wh, "health", "db.fresh", config=config)
        assert code == ExitCode.CORRUPT and len(err.splitlines()) == 1, (bad, err)


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_damaged_manifest_fails_with_one_line_and_writes_nothing(tmp_path: Path, damage: str) -> None:
    table_dir = tmp_path / "db" / "t"
    build_appends(table_dir, 3)
    manifest = sorted((table_dir / "metadata").glob("*-m0.avro"), key=os.path.getmtime)[1]
    if damage == "missing":
        manifest.unlink()
    else:
        manifest.write_bytes(b"Obj\x01" + b"\x00" * 40)
    old = tmp_path / "old.prom"
    old.write_text("# the previous run's file\n")
    page = tmp_path / "health.html"
    code, out, err = run(tmp_path, "health", str(table_dir), "--prometheus", str(old), "--html", str(page))
    assert code == ExitCode.CORRUPT, err
    assert out == "" and len(err.splitlines()) == 1 and manifest.name in err
    assert old.read_text() == "# the previous run's file\n" and not page.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "old.prom"]
    # --all goes on past the broken table; the file says which table is down.
    build_appends(tmp_path / "db" / "ok", 1)
    code, out, err = run(tmp_path, "health", "--all", "--json", "--prometheus", str(old))
    lines = {d["table"]: d for d in map(json.loads, out.splitlines())}
    assert code == ExitCode.CORRUPT and manifest.name in lines["db.t"]["error"] and lines["db.ok"]["healthy"]
    up = {s.labels["table"]: s.value for f in text_string_to_metric_families(old.read_text())
          if f.name == "icectl_table_health_up" for s in f.samples}
    assert up == {"db.ok": 1, "db.t": 0}
