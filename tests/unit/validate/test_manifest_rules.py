"""The rules of icectl/validate/manifest_rules.py (manifests).

One case per rule (the case id is the rule id): a copy of a Spark-written table broken in exactly
that way (the shared machinery is in breaking.py), then the module's edge cases.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.corrupt import (
    bounds,
    copy_table,
    current_list,
    current_manifests,
    edit_entry,
    edit_manifest,
    edit_manifest_list,
    find_entry,
    set_bounds,
    set_manifest_key,
)
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.spec.manifest import ManifestContent, ManifestFile
from icectl.spec.schema import LONG
from icectl.spec.transforms import BucketTransform
from icectl.validate import CATALOGUE, Severity
from unit.validate.breaking import (
    Break,
    Case,
    added_data,
    check_rule_is_reported,
    data_entry,
    destroy_magic,
    entry,
    first_manifest,
    run,
    set_file,
    set_key,
)


def _manifest_key(key: str, value: str | None, spec_id: int | None = None) -> Break:
    return lambda d: set_manifest_key(d, first_manifest(d, spec_id=spec_id).manifest_path, key, value)


def _not_added(m: ManifestFile, r: dict[str, Any]) -> bool:
    return r["status"] != 1


def _partition_as_string(d: Path) -> str:
    """Re-type the manifest's first partition field (a date) as a string, with string values."""
    m = first_manifest(d, spec_id=0)

    def apply(schema: dict[str, Any], _meta: dict[str, bytes], records: list[dict[str, Any]]) -> None:
        df = next(f for f in schema["fields"] if f["name"] == "data_file")
        df_type = df["type"]
        part = next(f for f in df_type["fields"] if f["name"] == "partition")
        first = part["type"]["fields"][0]
        first["type"] = ["null", "string"]
        for r in records:
            p = r["data_file"]["partition"]
            p[first["name"]] = None if p[first["name"]] is None else str(p[first["name"]])
    return edit_manifest(d, m.manifest_path, apply)


def _bound_of(column: int, transform: Callable[[dict[int, bytes], dict[int, bytes]], None],
              spec_ids: tuple[int, ...] = (0, 1, 2)) -> Break:
    def pick(m: ManifestFile, r: dict[str, Any]) -> bool:
        lo, hi = bounds(r, "lower_bounds"), bounds(r, "upper_bounds")
        return (m.content == ManifestContent.DATA and m.partition_spec_id in spec_ids and column in lo
                and column in hi and lo[column] != hi[column])

    def edit(rec: dict[str, Any]) -> None:
        lo, hi = bounds(rec, "lower_bounds"), bounds(rec, "upper_bounds")
        transform(lo, hi)
        set_bounds(rec, "lower_bounds", lo)
        set_bounds(rec, "upper_bounds", hi)
    return entry(pick, edit)


def _short_bound(lo: dict[int, bytes], hi: dict[int, bytes]) -> None:
    lo[1] = lo[1][:3]


def _swap_bounds(lo: dict[int, bytes], hi: dict[int, bytes]) -> None:
    lo[1], hi[1] = hi[1], lo[1]


def _wrong_bucket(lo: dict[int, bytes], hi: dict[int, bytes]) -> None:
    # Make the id bounds exact at a value whose bucket(4) differs from the entry's (its own ids' bucket).
    value = struct.unpack("<q", lo[1])[0]
    own = BucketTransform(4).apply(value, LONG)
    other = next(v for v in range(1000) if BucketTransform(4).apply(v, LONG) != own)
    lo[1] = hi[1] = struct.pack("<q", other)


def _identity_mismatch(d: Path) -> str:
    def pick(m: ManifestFile, r: dict[str, Any]) -> bool:
        lo, hi = bounds(r, "lower_bounds"), bounds(r, "upper_bounds")
        return (m.content == ManifestContent.DATA and m.partition_spec_id == 0 and 2 in lo
                and lo.get(2) == hi.get(2) and r["data_file"]["partition"].get("region") == "us")
    path, i = find_entry(d, pick)
    return edit_entry(d, path, i, lambda r: r["data_file"]["partition"].__setitem__("region", "eu"))


def _manifest_magic(d: Path) -> str:
    return destroy_magic(first_manifest(d).manifest_path)


CASES: list[Case] = [
    Case("manifest.readable", "v2_part", _manifest_magic),
    Case("manifest.entry-values", "v2_part", entry(data_entry, set_file("file_size_in_bytes", -1))),
    Case("manifest.metadata-keys", "v2_part", _manifest_key("partition-spec", None)),
    Case("manifest.partition-spec-id", "v2_part", _manifest_key("partition-spec-id", "1", spec_id=0)),
    Case("manifest.content", "v2_part", entry(data_entry, set_file("content", 1)),
         implied=frozenset({"deletes.position-delete-target-live"})),
    Case("manifest.partition-tuple", "v2_part", _partition_as_string),
    Case("manifest.explicit-sequence-numbers", "v2_part", entry(_not_added, set_key("sequence_number", None)),
         implied=frozenset({"manifest-list.min-sequence-number"})),
    Case("manifest.sequence-number-order", "v2_part", entry(added_data, set_key("sequence_number", 10**6)),
         implied=frozenset({"manifest-list.min-sequence-number"})),
    Case("manifest.added-by-snapshot", "v2_part", entry(added_data, set_key("snapshot_id", 1))),
    Case("manifest.bounds-decode", "v2_part", _bound_of(1, _short_bound)),
    Case("manifest.bounds-order", "v2_part", _bound_of(1, _swap_bounds)),
    Case("manifest.identity-partition-bounds", "v3_dv", _identity_mismatch,
         implied=frozenset({"manifest-list.partition-summaries"})),
    Case("manifest.bucket-partition-bounds", "v2_part", _bound_of(1, _wrong_bucket, spec_ids=(0, 1))),
    # data/x.parquet instead of file:/.../data/x.parquet: invalid before v4 (issue 27 item 4)
    Case("manifest.absolute-paths", "v2_part",
         entry(data_entry, set_file("file_path", lambda p: "data/" + p.split("/data/", 1)[1]))),
]
# Rules whose finding every Spark-written table already has: checked on the pristine copy instead.
PRESENT_IN_FIXTURES = {"manifest.schema-id-key": "v2_part"}


@pytest.mark.parametrize("case", CASES, ids=[c.rule for c in CASES])
def test_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    check_rule_is_reported(case, spark_tables, tmp_path)


@pytest.mark.parametrize("rule", sorted(PRESENT_IN_FIXTURES))
def test_java_written_warning_is_reported_on_every_manifest(rule: str, spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables[PRESENT_IN_FIXTURES[rule]].location, tmp_path / "t")
    result = run(table)
    manifests = {m.manifest_path for m in current_manifests(table)}
    assert {f.file for f in result.findings if f.rule == rule} == manifests
    assert CATALOGUE[rule].severity == Severity.WARNING and result.exit_code == 0


def test_unreadable_files_are_findings_and_validation_goes_on(spark_tables: Any, tmp_path: Path) -> None:
    """Destroyed magic, a truncated and a missing manifest, each a finding naming the file; the other
    manifests are still checked (a broken list row elsewhere is still reported), exit 7."""
    table = copy_table(spark_tables["v2_part"].location, tmp_path / "t")
    listed = current_manifests(table)
    magic, cut, gone, other = (m.manifest_path for m in listed[:4])
    destroy_magic(magic)
    Path(cut).write_bytes(Path(cut).read_bytes()[:-40])
    Path(gone).unlink()
    size = Path(cut).stat().st_size  # only the truncation itself, not a length mismatch

    def edit(records: list[dict[str, Any]]) -> None:
        for r in records:
            if r["manifest_path"] == cut:
                r["manifest_length"] = size
            if r["manifest_path"] == other:
                r["existing_rows_count"] += 5
    edit_manifest_list(current_list(table), edit)
    result = run(table)
    errors = {(f.rule, f.file) for f in result.findings if f.severity == Severity.ERROR}
    assert ("manifest.readable", magic) in errors and ("manifest.readable", cut) in errors, errors
    assert ("manifest-list.manifest-exists", current_list(table)) in errors
    assert ("manifest-list.counts", current_list(table)) in errors  # checking went on past the damage
    assert result.manifests == len(listed) - 3  # every readable manifest was read
    out = CliRunner().invoke(app, ["validate", str(table), "--json"])
    assert out.exit_code == 7, out.output
    rows = json.loads(out.stdout)["rows"]
    assert {(r["rule"], r["file"]) for r in rows if r["severity"] == "error"} == errors
