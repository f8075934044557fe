"""The rules of icectl/validate/metadata_rules.py (the table metadata JSON).

One case per rule (the case id is the rule id): a copy of a Spark-written table broken in exactly
that way (the shared machinery is in breaking.py), then the module's edge cases.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.corrupt import copy_table, edit_metadata, metadata_path
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.validate import Severity
from unit.validate.breaking import Case, check_rule_is_reported, meta, run, snapshot


def _current_schema(doc: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in doc["schemas"] if s["schema-id"] == doc["current-schema-id"])


def _dup_snapshot(doc: dict[str, Any]) -> None:
    doc["snapshots"].append(dict(doc["snapshots"][0]))


def _seq_after_parent(doc: dict[str, Any]) -> None:
    # A snapshot that is not current: only the metadata rule can see it in the default mode.
    child = next(s for s in doc["snapshots"] if s.get("parent-snapshot-id") is not None
                 and s["snapshot-id"] != doc["current-snapshot-id"])
    child["sequence-number"] = snapshot(doc, child["parent-snapshot-id"])["sequence-number"]


def _parent_cycle(doc: dict[str, Any]) -> None:
    oldest = min(doc["snapshots"], key=lambda s: s["sequence-number"])
    oldest["parent-snapshot-id"] = doc["current-snapshot-id"]


def _negative_timestamp(doc: dict[str, Any]) -> None:
    old = next(s for s in doc["snapshots"] if s["snapshot-id"] != doc["current-snapshot-id"])
    old["timestamp-ms"] = -1


def _main_elsewhere(doc: dict[str, Any]) -> None:
    current = snapshot(doc, doc["current-snapshot-id"])
    doc["refs"]["main"]["snapshot-id"] = current["parent-snapshot-id"]


def _log_disorder(key: str) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc[key][1]["timestamp-ms"] = doc[key][0]["timestamp-ms"] - 3_600_000
    return edit


def _dup_field_id(doc: dict[str, Any]) -> None:
    _current_schema(doc)["fields"][1]["id"] = 1  # 'name' takes the id of 'id'


def _reserved_id(doc: dict[str, Any]) -> None:
    _current_schema(doc)["fields"].append({"id": 2147483600, "name": "meta", "required": False, "type": "int"})
    doc["last-column-id"] = 2147483600


def _identifier_optional(doc: dict[str, Any]) -> None:
    _current_schema(doc)["identifier-field-ids"] = [3]  # 'category' is optional


def _dup_sort_order(doc: dict[str, Any]) -> None:
    doc["sort-orders"].append({"order-id": 1, "fields": [
        {"transform": "identity", "source-id": 1, "direction": "asc", "null-order": "nulls-first"}]})
    doc["sort-orders"].append(dict(doc["sort-orders"][-1]))


def _add_spec(fields: list[dict[str, Any]], last_partition_id: int | None = None) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        doc["partition-specs"].append({"spec-id": 9, "fields": fields})
        if last_partition_id is not None:
            doc["last-partition-id"] = last_partition_id
    return edit


def _bad_sort_order(doc: dict[str, Any]) -> None:
    doc["sort-orders"].append({"order-id": 1, "fields": [
        {"transform": "identity", "source-id": 999, "direction": "asc", "null-order": "nulls-first"}]})


def _bad_default(doc: dict[str, Any]) -> None:
    _current_schema(doc)["fields"][0]["initial-default"] = "not a long"


CASES: list[Case] = [
    Case("metadata.format-version", "v2_part", meta(lambda d: d.__setitem__("format-version", 9))),
    Case("metadata.required-fields", "v2_part", meta(lambda d: d.pop("last-partition-id"))),
    Case("metadata.snapshot-ids-unique", "v2_part", meta(_dup_snapshot)),
    Case("metadata.sequence-number-bound", "v2_part",
         meta(lambda d: d.__setitem__("last-sequence-number", d["last-sequence-number"] - 1))),
    Case("metadata.sequence-number-after-parent", "v2_part", meta(_seq_after_parent)),
    Case("metadata.current-snapshot-is-main", "v2_part", meta(_main_elsewhere)),
    Case("metadata.refs-exist", "v2_part", meta(lambda d: d["refs"]["after_merge"].__setitem__("snapshot-id", 42))),
    Case("metadata.snapshot-parent-cycle", "v2_part", meta(_parent_cycle),
         implied=frozenset({"metadata.sequence-number-after-parent"})),  # a cycle must step back somewhere
    Case("metadata.number-range", "v2_part", meta(_negative_timestamp)),
    Case("metadata.snapshot-log-ordered", "v2_part", meta(_log_disorder("snapshot-log"))),
    Case("metadata.metadata-log-ordered", "v2_part", meta(_log_disorder("metadata-log"))),
    Case("metadata.last-column-id", "v2_part", meta(lambda d: d.__setitem__("last-column-id", 5))),
    Case("metadata.field-ids-unique", "v2_part", meta(_dup_field_id)),
    Case("metadata.reserved-field-ids", "v2_part", meta(_reserved_id)),
    Case("metadata.identifier-fields", "v2_part", meta(_identifier_optional)),
    Case("metadata.ids-unique", "v2_part", meta(_dup_sort_order)),
    Case("metadata.snapshot-schema-exists", "v2_part", meta(lambda d: d["snapshots"][0].__setitem__("schema-id", 77))),
    Case("metadata.partition-field-ids", "v2_part",
         meta(_add_spec([{"name": "c", "transform": "identity", "source-id": 3, "field-id": 1001}]))),
    Case("metadata.last-partition-id", "v2_part", meta(lambda d: d.__setitem__("last-partition-id", 1000))),
    Case("metadata.partition-transforms", "v2_part",
         meta(_add_spec([{"name": "n_day", "transform": "day", "source-id": 2, "field-id": 1003}], 1003))),
    Case("metadata.sort-orders", "v2_part", meta(_bad_sort_order)),
    Case("metadata.default-values", "v3_dv", meta(_bad_default)),
    Case("metadata.snapshot-row-id-ranges", "v3_dv", meta(lambda d: d["snapshots"][1].__setitem__("first-row-id", 0))),
    Case("metadata.next-row-id", "v3_dv", meta(lambda d: d.__setitem__("next-row-id", 1))),
]


@pytest.mark.parametrize("case", CASES, ids=[c.rule for c in CASES])
def test_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    check_rule_is_reported(case, spark_tables, tmp_path)


def test_unloadable_metadata_is_a_finding_not_a_crash(spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables["v3_dv"].location, tmp_path / "t")
    edit_metadata(table, lambda d: d.pop("next-row-id"))
    result = run(table)
    assert [(f.rule, f.entry) for f in result.findings] == [("metadata.required-fields", "next-row-id")]
    assert result.findings[0].file == str(metadata_path(table))


def test_number_beyond_int64_is_a_finding_not_a_crash(spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")

    def overflow(doc: dict[str, Any]) -> None:
        doc["snapshots"][0]["sequence-number"] = 2**63
    edit_metadata(table, overflow)
    result = run(table)
    assert [(f.rule, f.entry) for f in result.findings if f.severity == Severity.ERROR] == [
        ("metadata.number-range", "snapshots[0].sequence-number")]
    assert result.exit_code == 7


def test_unsupported_version_with_its_rule_skipped_is_exit_4(spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables["v1_unpart"].location, tmp_path / "t")
    edit_metadata(table, lambda d: d.__setitem__("format-version", 9))
    assert CliRunner().invoke(app, ["validate", str(table), "--json"]).exit_code == 7
    out = CliRunner().invoke(app, ["validate", str(table), "--skip", "metadata.format-version"])
    assert out.exit_code == 4 and "format-version 9" in out.stderr, out.output


def test_v3_snapshot_after_the_first_with_row_lineage_needs_first_row_id(spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables["v3_dv"].location, tmp_path / "t")

    def drop(doc: dict[str, Any]) -> None:
        snapshot(doc, doc["current-snapshot-id"]).pop("first-row-id")
    edit_metadata(table, drop)
    result = run(table)
    assert {(f.rule, f.values.get("field")) for f in result.findings if f.severity == Severity.ERROR} == {
        ("metadata.required-fields", "first-row-id")}
