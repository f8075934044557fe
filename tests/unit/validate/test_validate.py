"""`icectl validate` on real Spark-written tables: clean at error severity, CLI behaviour, the rule docs.

Per-rule breaking tests are in tests/unit/validate/test_<module>.py, one per rule module.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.corrupt import copy_table, current_list, edit_manifest_list
from support.s3 import create_bucket, relocate_table, s3_filesystem, s3_put
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.config import Config
from icectl.ops.lifecycle.upgrade import upgrade
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.manifest_cache import set_cache_enabled
from icectl.validate import CATALOGUE, Severity, catalogue_markdown, validate_address, validate_table

ROOT = Path(__file__).resolve().parents[3]
KINDS = ["v1_unpart", "v2_part", "v3_dv", "many_snaps"]
# Warnings Iceberg Java itself causes, each justified in the rule's summary: Java's ManifestWriter
# never writes a 'schema-id' key; Java leaves file-scoped position delete files whose data file
# was removed until a rewrite drops them.
JAVA_WARNINGS = {"manifest.schema-id-key", "deletes.position-delete-target-live"}


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["validate", *args])


class CountingIO(FileIO):
    """A FileIO that counts whole-file reads per path."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: Counter[str] = Counter()

    def read(self, path: str) -> bytes:
        self.reads[path] += 1
        return super().read(path)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("deep", "all_snapshots"), [(False, False), (True, False), (False, True), (True, True)],
                         ids=["current", "deep", "all-snapshots", "deep-all-snapshots"])
def test_spark_fixtures_have_no_error_findings(kind: str, deep: bool, all_snapshots: bool, spark_tables: Any) -> None:
    table = load_table(str(spark_tables[kind].location))
    result = validate_table(table, deep=deep, all_snapshots=all_snapshots)
    errors = [f for f in result.findings if f.severity == Severity.ERROR]
    assert errors == [], errors
    warnings = Counter(f.rule for f in result.findings if f.severity == Severity.WARNING)
    print(f"{kind} deep={deep} all={all_snapshots}: {result.summary}; warnings {dict(warnings)}")
    assert set(warnings) <= JAVA_WARNINGS
    md = table.metadata
    assert result.snapshots == (len(md.snapshots) if all_snapshots else 1)
    assert result.entries > 0 and result.exit_code == 0


@pytest.mark.parametrize("cache", [False, True])
def test_all_snapshots_reads_each_manifest_once(cache: bool, spark_tables: Any) -> None:
    io = CountingIO()
    table = load_table(str(spark_tables["many_snaps"].location), io=io)
    set_cache_enabled(cache)
    try:
        result = validate_table(table, all_snapshots=True)
    finally:
        set_cache_enabled(True)
    assert result.snapshots == len(table.metadata.snapshots) >= 250
    manifests = [p for p in io.reads if p.endswith(".avro") and "/snap-" not in p]
    lists = [p for p in io.reads if "/snap-" in p]
    # each snapshot adds one manifest and every later snapshot lists it again: still one read each
    # (with the cache, outcomes and lists kept by an earlier run are not read at all)
    assert result.manifests >= 250
    assert len(manifests) == result.manifests or cache
    assert all(io.reads[p] == 1 for p in manifests + lists), io.reads.most_common(3)


def test_cli_json_is_one_document_and_exit_0(spark_tables: Any) -> None:
    out = cli(str(spark_tables["v3_dv"].location), "--all-snapshots", "--deep", "--json")
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["view"] == "validate" and doc["errors"] == 0 and doc["snapshots"] >= 8
    assert doc["summary"].startswith("0 error(s)")
    for row in doc["rows"]:
        assert set(row) == {"severity", "rule", "file", "entry", "message", "values"}


def test_cli_terminal_output_has_a_summary_line(spark_tables: Any) -> None:
    out = cli(str(spark_tables["v2_part"].location))
    assert out.exit_code == 0, out.stderr
    assert "0 error(s)" in out.stdout and "warning(s)" in out.stdout


def test_cli_rule_and_skip_select_rules(spark_tables: Any) -> None:
    location = str(spark_tables["v2_part"].location)
    only = json.loads(cli(location, "--rule", "manifest.schema-id-key", "--json").stdout)
    assert only["rows"] and {r["rule"] for r in only["rows"]} == {"manifest.schema-id-key"}
    skipped = json.loads(cli(location, "--skip", "manifest.schema-id-key", "--skip", "deletes", "--json").stdout)
    assert not any(r["rule"] == "manifest.schema-id-key" for r in skipped["rows"])
    metadata_only = json.loads(cli(location, "--rule", "metadata", "--json").stdout)
    assert metadata_only["rows"] == []
    bad = cli(location, "--rule", "no.such-rule")
    assert bad.exit_code == 2 and "no.such-rule" in bad.stderr


def test_cli_exit_7_names_rule_file_and_entry(spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    path = current_list(table)

    def shift(records: list[dict[str, Any]]) -> None:
        records[0]["added_files_count"] += 1
    edit_manifest_list(path, shift)
    out = cli(str(table), "--json")
    assert out.exit_code == 7, out.output
    doc = json.loads(out.stdout)
    [row] = [r for r in doc["rows"] if r["severity"] == "error"]
    assert row["rule"] == "manifest-list.counts" and row["file"] == path and row["entry"] == f"{path}#0"
    assert row["values"]["field"] == "added_files_count" and row["values"]["listed"] == row["values"]["actual"] + 1


def test_cli_list_rules() -> None:
    out = cli("--list-rules", "--json")
    assert out.exit_code == 0
    doc = json.loads(out.stdout)
    assert len(doc["rows"]) == doc["rules"] == len(CATALOGUE)
    assert {r["rule"] for r in doc["rows"]} == set(CATALOGUE)
    assert {r["severity"] for r in doc["rows"]} == {"error", "warning"}


def test_missing_table_is_exit_3(tmp_path: Path) -> None:
    assert cli(str(tmp_path / "nope")).exit_code == 3


def test_validate_address_matches_validate_table(spark_tables: Any) -> None:
    location = str(spark_tables["v3_dv"].location)
    a = validate_address(location, Config({}), FileIO(), all_snapshots=True)
    b = validate_table(load_table(location), all_snapshots=True)
    assert a.findings == b.findings and a.entries == b.entries


def test_rule_docs_are_generated_from_the_catalogue() -> None:
    text = (ROOT / "docs" / "validate-rules.md").read_text()
    assert text == catalogue_markdown(), "stale: regenerate docs/validate-rules.md (see its header)"
    for rule in CATALOGUE.values():
        assert f"`{rule.id}`" in text and rule.summary and rule.spec_section


def test_validate_on_s3_deep(spark_tables: Any, s3_env: str) -> None:
    """A table on S3 (moto): every manifest, size and Parquet footer is read through s3fs."""
    create_bucket(s3_env, "icectl-test-validate")
    location = relocate_table(spark_tables["v2_part"].location, "s3://icectl-test-validate/wh/db/v2_part",
                              s3_put(s3_filesystem(s3_env)))
    remote = validate_table(load_table(location), deep=True, all_snapshots=True)
    local = validate_table(load_table(str(spark_tables["v2_part"].location)), deep=True, all_snapshots=True)
    assert remote.errors == 0, [f for f in remote.findings if f.severity == Severity.ERROR]
    assert (remote.snapshots, remote.manifests, remote.entries) == (local.snapshots, local.manifests, local.entries)
    assert all(f.file.startswith("s3://") for f in remote.findings if f.file)


@pytest.mark.parametrize("to", [3, 4])
def test_upgraded_copies_validate_clean(to: int, spark_tables: Any, tmp_path: Path) -> None:
    """A v2 table upgraded by icectl (v3: row lineage starts; v4: a root manifest, checked by the v4 rules)."""
    table_dir = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    upgrade(load_table(str(table_dir)), to)
    result = validate_table(load_table(str(table_dir)), all_snapshots=True, deep=True)
    assert result.errors == 0, [f for f in result.findings if f.severity == Severity.ERROR]
    assert not result.notes and result.snapshots == len(load_table(str(table_dir)).metadata.snapshots)
