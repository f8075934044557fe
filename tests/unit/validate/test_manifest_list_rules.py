"""The rules of icectl/validate/manifest_list_rules.py (manifest lists).

One case per rule (the case id is the rule id): a copy of a Spark-written table broken in exactly
that way (the shared machinery is in breaking.py), then the module's edge cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.corrupt import (
    copy_table,
    current_list,
    current_manifests,
    edit_manifest_list,
    edit_metadata,
    set_manifest_key,
    table_metadata,
)

from icectl.spec.manifest import ManifestContent
from icectl.validate import Severity
from unit.validate.breaking import Case, any_record, check_rule_is_reported, destroy_magic, list_record, run, set_key


def _delete_list(d: Path) -> str:
    path = current_list(d)
    Path(path).unlink()
    return path


def _spanning_summary(r: dict[str, Any]) -> bool:
    p = r.get("partitions") or []
    return r["content"] == 0 and bool(p) and p[0]["lower_bound"] != p[0]["upper_bound"]


def _shrink_summary(r: dict[str, Any]) -> None:
    r["partitions"][0]["upper_bound"] = r["partitions"][0]["lower_bound"]


def _content_key(d: Path) -> str:
    m = next(m for m in current_manifests(d) if m.content == ManifestContent.DELETES)
    set_manifest_key(d, m.manifest_path, "content", "data")
    return current_list(d)


def _overlap_row_ids(d: Path) -> str:
    path = current_list(d)

    def apply(records: list[dict[str, Any]]) -> None:
        # A manifest that hands out ids (Spark's append manifest: files without first_row_id)
        # moved onto id 0, which the table's first data file (still live in v3_dv) carries.
        adding = [r for r in records if r["content"] == 0 and r["added_rows_count"] > 0]
        adding[0]["first_row_id"] = 0
    return edit_manifest_list(path, apply)


def _list_magic(d: Path) -> str:
    return destroy_magic(current_list(d))


CASES: list[Case] = [
    Case("manifest-list.exists", "v2_part", _delete_list),
    Case("manifest-list.manifest-exists", "v2_part",
         list_record(any_record, set_key("manifest_path", "/nonexistent.avro")),
         implied=frozenset({"deletes.position-delete-target-live"})),
    Case("manifest-list.manifest-length", "v2_part",
         list_record(any_record, lambda r: r.__setitem__("manifest_length", r["manifest_length"] + 1))),
    Case("manifest-list.partition-spec-exists", "v2_part", list_record(any_record, set_key("partition_spec_id", 7))),
    Case("manifest-list.counts", "v2_part",
         list_record(any_record, lambda r: r.__setitem__("existing_rows_count", r["existing_rows_count"] + 5))),
    Case("manifest-list.min-sequence-number", "v2_part",
         list_record(lambda r: r["min_sequence_number"] > 1, set_key("min_sequence_number", 1))),
    Case("manifest-list.sequence-number", "v2_part",
         list_record(any_record, set_key("sequence_number", 10**6)),
         implied=frozenset({"manifest.sequence-number-order", "manifest-list.min-sequence-number"})),
    Case("manifest-list.content", "v2_part", _content_key),
    Case("manifest-list.partition-summaries", "v2_part", list_record(_spanning_summary, _shrink_summary)),
    Case("manifest-list.first-row-ids", "v3_dv", _overlap_row_ids),
    Case("manifest-list.readable", "v2_part", _list_magic),
    # metadata/x-m0.avro instead of file:/.../metadata/x-m0.avro: invalid before v4 (issue 27 item 4)
    Case("manifest-list.absolute-paths", "v2_part",
         list_record(any_record, lambda r: r.__setitem__("manifest_path", "metadata/" + r["manifest_path"]
                                                         .rsplit("/", 1)[1])),
         implied=frozenset({"deletes.position-delete-target-live"})),
]


@pytest.mark.parametrize("case", CASES, ids=[c.rule for c in CASES])
def test_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    check_rule_is_reported(case, spark_tables, tmp_path)


def test_unreadable_manifest_list_is_a_finding_and_other_snapshots_are_checked(spark_tables: Any,
                                                                           tmp_path: Path) -> None:
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    md = table_metadata(table)
    parent = md.snapshot_by_id(md.current_snapshot().parent_snapshot_id)  # type: ignore[union-attr]
    assert parent is not None and parent.manifest_list
    destroy_magic(parent.manifest_list)
    result = run(table, all_snapshots=True)
    errors = [(f.rule, f.file) for f in result.findings if f.severity == Severity.ERROR]
    assert errors == [("manifest-list.readable", parent.manifest_list)]
    assert result.snapshots == len(md.snapshots) and result.exit_code == 7


def test_a_relative_manifest_list_path_is_a_finding_and_is_not_read(spark_tables: Any, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Before v4 a snapshot's manifest-list is an absolute path; a relative one is reported at the
    metadata file and never resolved against the working directory (which here holds a decoy)."""
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    listed = current_list(table)
    relative = "metadata/" + listed.rsplit("/", 1)[1]

    def edit(doc: dict[str, Any]) -> None:
        snap = next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])
        snap["manifest-list"] = relative
    metadata_file = str(edit_metadata(table, edit))
    decoy = tmp_path / "cwd"
    (decoy / "metadata").mkdir(parents=True)
    (decoy / relative).write_bytes(b"not a list")
    monkeypatch.chdir(decoy)
    result = run(table)
    hits = [f for f in result.findings if f.rule == "manifest-list.absolute-paths"]
    assert [(f.file, f.values["path"]) for f in hits] == [(metadata_file, relative)]
    assert not [f for f in result.findings if f.rule == "manifest-list.readable"]  # the decoy was not read
    assert result.exit_code == 7
