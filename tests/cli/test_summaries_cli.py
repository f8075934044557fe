"""Summaries that fit their job (issue 16): validate grouped by rule, expire's cutoff and ref policies,
one line per table of an ``--all`` run (one JSON line each with --json).

Small tables written by icectl itself (a few add-files appends), run in process through the real app.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from icectl.cli.app import app

APPENDS = 6
DAY = 86_400_000


def icectl(wh: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"ICECTL_WAREHOUSE": str(wh), "ICECTL_CONFIG": "",
                                                 "COLUMNS": "120"})
    return r.exit_code, r.stdout, r.stderr


def ok(wh: Path, *args: str) -> str:
    code, out, err = icectl(wh, *args)
    assert code == 0, (args, out, err)
    return out


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """db.t: APPENDS one-file appends, a branch with its own retention, a table-wide max snapshot age;
    db.u: empty; db.bad: unreadable metadata. Only dry runs and reads use it."""
    root = tmp_path_factory.mktemp("summaries")
    wh = root / "wh"
    ok(wh, "namespace", "create", "db")
    ok(wh, "create", "db.t", "--schema", "id long")
    ok(wh, "create", "db.u", "--schema", "id long")
    for i in range(APPENDS):
        f = root / f"f{i}.parquet"
        pq.write_table(pa.table({"id": pa.array([i], pa.int64())}), f)
        ok(wh, "add-files", "db.t", str(f))
    ok(wh, "branch", "create", "db.t", "keep3", "--retain-last", "3", "--max-ref-age", "30d")
    ok(wh, "properties", "set", "db.t", f"history.expire.max-snapshot-age-ms={2 * DAY}")
    ok(wh, "create", "db.bad", "--schema", "id long")
    for meta in (wh / "db" / "bad" / "metadata").glob("*.metadata.json"):
        meta.write_text("{")  # a table --all runs must report and pass by
    return wh


# --------------------------------------------------------------------------- validate


def test_validate_prints_one_row_per_rule_and_verbose_every_finding(warehouse: Path) -> None:
    _, out, _ = icectl(warehouse, "validate", "db.t", "--all-snapshots", "--json")
    doc = json.loads(out)
    rows_per_rule: dict[str, int] = {}
    for row in doc["rows"]:
        rows_per_rule[row["rule"]] = rows_per_rule.get(row["rule"], 0) + 1
    repeated = [r for r, n in rows_per_rule.items() if n >= APPENDS]
    assert repeated, "the scenario needs a rule that every append breaks (a warning Java writes too)"
    # by_rule: every rule once, its count that of the rows, its first example the first row of the rule
    assert {g["rule"]: g["count"] for g in doc["by_rule"]} == rows_per_rule
    for g in doc["by_rule"]:
        first = next(r for r in doc["rows"] if r["rule"] == g["rule"])
        assert g["first"] == {"file": first["file"], "entry": first["entry"], "message": first["message"]}

    _, text, _ = icectl(warehouse, "validate", "db.t", "--all-snapshots")
    lines = text.splitlines()
    for rule, n in rows_per_rule.items():
        hits = [ln for ln in lines if f" {rule} " in ln]
        assert len(hits) == 1 and f" {n} " in hits[0], (rule, text)
        first = next(r for r in doc["rows"] if r["rule"] == rule)
        where = first["entry"] or first["file"]
        if where:  # shown relative to the table location, which is the same on every row
            assert where.startswith(str(warehouse / "db" / "t")) and str(warehouse) not in hits[0]
            assert where[len(str(warehouse / "db" / "t")) + 1:] in hits[0]
    assert lines[-1].startswith(doc["summary"]) and "--verbose" in lines[-1]
    assert len(lines) <= len(rows_per_rule) + 4

    _, verbose, _ = icectl(warehouse, "validate", "db.t", "--all-snapshots", "--verbose")
    assert sum(rule in ln for ln in verbose.splitlines() for rule in repeated) >= APPENDS


def test_validate_lists_errors_first(warehouse: Path, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    ok(wh, "namespace", "create", "db")
    ok(wh, "create", "db.t", "--schema", "id long")
    for i in range(2):
        f = tmp_path / f"f{i}.parquet"
        pq.write_table(pa.table({"id": pa.array([i], pa.int64())}), f)
        ok(wh, "add-files", "db.t", str(f))
    manifests = sorted((wh / "db" / "t" / "metadata").glob("*-m0.avro"))
    manifests[0].unlink()  # a manifest the current snapshot lists is gone: an error
    code, out, _ = icectl(wh, "validate", "db.t")
    assert code == 7
    doc = json.loads(icectl(wh, "validate", "db.t", "--json")[1])
    severities = [g["severity"] for g in doc["by_rule"]]
    assert severities[0] == "error" and severities == sorted(severities)  # "error" < "warning"
    body = [ln for ln in out.splitlines() if ln.startswith(("error", "warning"))]
    assert [ln.split()[1] for ln in body] == [g["rule"] for g in doc["by_rule"]]
    assert manifests[0].name in out


# --------------------------------------------------------------------------- expire-snapshots


def test_expire_states_cutoff_and_ref_policies(warehouse: Path) -> None:
    t0 = int(time.time() * 1000)
    doc = json.loads(ok(warehouse, "expire-snapshots", "db.t", "--dry-run", "--json"))
    t1 = int(time.time() * 1000)
    c = doc["cutoff"]
    assert c["source"] == "history.expire.max-snapshot-age-ms" and c["max_snapshot_age_ms"] == 2 * DAY
    assert t0 - 2 * DAY <= c["expire_older_than_ms"] <= t1 - 2 * DAY
    assert c["expire_older_than"].endswith("Z") and c["expire_older_than"][:10] == time.strftime(
        "%Y-%m-%d", time.gmtime(c["expire_older_than_ms"] / 1000))
    assert (c["min_snapshots_to_keep"], c["min_snapshots_to_keep_source"]) == (1, "default")
    assert (c["max_ref_age_ms"], c["max_ref_age_source"]) == ((1 << 63) - 1, "default")
    policies = {p["name"]: p for p in doc["ref_policies"]}
    assert set(policies) == {"main", "keep3"}
    main, keep3 = policies["main"], policies["keep3"]
    assert (main["max_ref_age_ms"], main["removed"], main["min_snapshots_to_keep_source"]) == (None, False, "default")
    assert main["max_snapshot_age_source"] == "history.expire.max-snapshot-age-ms"
    assert (keep3["min_snapshots_to_keep"], keep3["min_snapshots_to_keep_source"]) == (3, "ref")
    assert (keep3["max_ref_age_ms"], keep3["max_ref_age_source"]) == (30 * DAY, "ref")

    doc = json.loads(ok(warehouse, "expire-snapshots", "db.t", "--dry-run", "--json", "--older-than", "1h",
                        "--retain-last", "2"))
    c = doc["cutoff"]
    assert (c["source"], c["max_snapshot_age_ms"]) == ("--older-than", 3_600_000)
    assert (c["min_snapshots_to_keep"], c["min_snapshots_to_keep_source"]) == (2, "--retain-last")
    keep3 = next(p for p in doc["ref_policies"] if p["name"] == "keep3")
    assert keep3["min_snapshots_to_keep_source"] == "ref" and keep3["max_snapshot_age_source"] == "--older-than"

    text = ok(warehouse, "expire-snapshots", "db.t", "--dry-run")
    assert len(text.splitlines()) <= 12  # the old tree listed every key and path: 30+ lines
    for words in ("cutoff", "2d", "history.expire.max-snapshot-age-ms", "ref keep3", "min-snapshots-to-keep 3",
                  "max-ref-age 30d", "never removed (main)", "would delete"):
        assert words in text, (words, text)


def test_expire_reports_what_was_deleted_by_category(warehouse: Path, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    ok(wh, "namespace", "create", "db")
    ok(wh, "create", "db.t", "--schema", "id long")
    for i in range(3):
        f = tmp_path / f"f{i}.parquet"
        pq.write_table(pa.table({"id": pa.array([i], pa.int64())}), f)
        ok(wh, "add-files", "db.t", str(f))
    lists = set((wh / "db" / "t" / "metadata").glob("snap-*.avro"))
    text = ok(wh, "expire-snapshots", "db.t", "--older-than", "0s")
    gone = lists - set((wh / "db" / "t" / "metadata").glob("snap-*.avro"))
    assert len(gone) == 2  # appends keep every manifest: only the expired manifest lists go
    assert "expired 2 snapshots" in text and "2 files: 2 manifest lists" in text and "0ms before now" in text


# --------------------------------------------------------------------------- --all


def _all_lines(out: str) -> tuple[list[str], str]:
    lines = out.splitlines()
    return lines[:-1], lines[-1]


@pytest.mark.parametrize(("command", "extra"), [
    ("expire-snapshots", ("--older-than", "0s", "--dry-run")),
    ("compact", ("--dry-run",)),
    ("remove-orphan-files", ("--dry-run", "--older-than", "1d")),
])
def test_all_runs_print_one_line_per_table(warehouse: Path, command: str, extra: tuple[str, ...]) -> None:
    wh = warehouse
    code, out, _ = icectl(wh, command, "--all", *extra)
    per_table, closing = _all_lines(out)
    assert [ln.split()[0].rstrip(":") for ln in per_table] == ["db.bad", "db.t", "db.u"]
    assert per_table[0].startswith("db.bad: failed: ")
    assert closing.endswith("3 table(s), 1 with problems")
    assert code != 0

    code_j, out_j, _ = icectl(wh, command, "--all", *extra, "--json")
    docs: list[dict[str, Any]] = [json.loads(line) for line in out_j.splitlines()]  # one JSON document per line
    assert [d["table"] for d in docs] == ["db.bad", "db.t", "db.u"] and code_j == code
    assert "error" in docs[0] and all("error" not in d for d in docs[1:])


def test_expire_all_lines_say_what_and_under_which_policy(warehouse: Path) -> None:
    out = icectl(warehouse, "expire-snapshots", "--all", "--dry-run", "--older-than", "0s")[1]
    docs = {d["table"]: d for d in map(json.loads, icectl(warehouse, "expire-snapshots", "--all", "--dry-run",
                                                             "--older-than", "0s", "--json")[1].splitlines())}
    lines = {ln.split()[0]: ln for ln in out.splitlines()[:-1]}
    t = docs["db.t"]
    files = sum(v for k, v in t.items() if k.startswith("deleted_") and k.endswith("_count"))
    assert lines["db.t"].startswith(f"db.t  would expire {t['expired_snapshot_count']} snapshots, "
                                    f"would delete {files} files (cutoff ")
    assert "retain last 1)" in lines["db.t"]
    assert lines["db.u"].startswith("db.u  nothing to expire (0 snapshots kept; cutoff ")


def test_validate_all_snapshots_of_a_healthy_spark_table_fits_a_screen(spark_tables: Any, spark: Any) -> None:
    """The 250 one-row Spark appends once printed one identical warning row per snapshot."""
    t = spark_tables["many_snaps"]
    snapshots = spark.sql(f"SELECT count(*) AS n FROM {t.name}.snapshots").collect()[0]["n"]
    r = CliRunner().invoke(app, ["validate", str(t.location), "--all-snapshots", "--json"], env={"ICECTL_CONFIG": ""})
    doc = json.loads(r.stdout)
    assert r.exit_code == 0 and doc["errors"] == 0 and doc["snapshots"] == snapshots
    assert len(doc["rows"]) >= snapshots  # a warning per snapshot: what Spark writes, and the view must sum up
    assert sum(g["count"] for g in doc["by_rule"]) == len(doc["rows"])
    text = CliRunner().invoke(app, ["validate", str(t.location), "--all-snapshots"], env={"ICECTL_CONFIG": ""})
    assert text.exit_code == 0
    assert len(text.stdout.splitlines()) <= len(doc["by_rule"]) + 4, text.stdout
