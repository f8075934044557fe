"""One test per validate rule: a copy of a real Spark-written table broken in exactly that way.

Each case copies a fixture table (tests/support/corrupt.py), changes one thing in its metadata
JSON, a manifest list, a manifest or a Puffin file, and checks that ``icectl validate`` reports
the rule, at the file the case names, and no error finding of any rule the break does not imply.
Findings the pristine copy already has (Java-written warnings) are subtracted first.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
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
    edit_metadata,
    entry_records,
    find_entry,
    metadata_path,
    set_bounds,
    set_manifest_key,
    table_metadata,
)
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.codec.puffin import read_puffin_footer
from icectl.config import Config
from icectl.spec.manifest import ManifestContent, ManifestFile
from icectl.spec.schema import LONG
from icectl.spec.transforms import BucketTransform
from icectl.storage import FileIO
from icectl.validate import CATALOGUE, Severity, ValidationResult, validate_address
from unit.validate.test_v4_rules import CASES as V4_CASES

Break = Callable[[Path], str]  # breaks the table in place; returns the file the finding must name


@dataclass(frozen=True)
class Case:
    rule: str
    kind: str
    breaks: Break
    implied: frozenset[str] = frozenset()  # other rules the same break necessarily trips
    deep: bool = False
    all_snapshots: bool = False


def run(table_dir: Path, *, deep: bool = False, all_snapshots: bool = False) -> ValidationResult:
    return validate_address(str(table_dir), Config({}), FileIO(), deep=deep, all_snapshots=all_snapshots)


# --------------------------------------------------------------------------- metadata breaks


def _meta(edit: Callable[[dict[str, Any]], None]) -> Break:
    return lambda d: str(edit_metadata(d, edit))


def _current_schema(doc: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in doc["schemas"] if s["schema-id"] == doc["current-schema-id"])


def _snapshot(doc: dict[str, Any], snapshot_id: int) -> dict[str, Any]:
    return next(s for s in doc["snapshots"] if s["snapshot-id"] == snapshot_id)


def _dup_snapshot(doc: dict[str, Any]) -> None:
    doc["snapshots"].append(dict(doc["snapshots"][0]))


def _seq_after_parent(doc: dict[str, Any]) -> None:
    # A snapshot that is not current: only the metadata rule can see it in the default mode.
    child = next(s for s in doc["snapshots"] if s.get("parent-snapshot-id") is not None
                 and s["snapshot-id"] != doc["current-snapshot-id"])
    child["sequence-number"] = _snapshot(doc, child["parent-snapshot-id"])["sequence-number"]


def _parent_cycle(doc: dict[str, Any]) -> None:
    oldest = min(doc["snapshots"], key=lambda s: s["sequence-number"])
    oldest["parent-snapshot-id"] = doc["current-snapshot-id"]


def _negative_timestamp(doc: dict[str, Any]) -> None:
    old = next(s for s in doc["snapshots"] if s["snapshot-id"] != doc["current-snapshot-id"])
    old["timestamp-ms"] = -1


def _main_elsewhere(doc: dict[str, Any]) -> None:
    current = _snapshot(doc, doc["current-snapshot-id"])
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


def _statistics(doc: dict[str, Any]) -> None:
    doc["statistics"] = [{"snapshot-id": doc["current-snapshot-id"], "statistics-path": "/nonexistent/stats.puffin",
                          "file-size-in-bytes": 100, "file-footer-size-in-bytes": 50, "blob-metadata": []}]


# --------------------------------------------------------------------------- manifest list breaks


def _list_record(pick: Callable[[dict[str, Any]], bool], edit: Callable[[dict[str, Any]], None]) -> Break:
    def breaks(d: Path) -> str:
        path = current_list(d)

        def apply(records: list[dict[str, Any]]) -> None:
            target = next(r for r in records if pick(r))
            edit(target)
        return edit_manifest_list(path, apply)
    return breaks


def _any(_r: dict[str, Any]) -> bool:
    return True


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


# --------------------------------------------------------------------------- manifest breaks


def _first_manifest(d: Path, content: ManifestContent = ManifestContent.DATA,
                    spec_id: int | None = None) -> ManifestFile:
    return next(m for m in current_manifests(d) if m.content == content
                and (spec_id is None or m.partition_spec_id == spec_id))


def _manifest_key(key: str, value: str | None, spec_id: int | None = None) -> Break:
    return lambda d: set_manifest_key(d, _first_manifest(d, spec_id=spec_id).manifest_path, key, value)


def _entry(pick: Callable[[ManifestFile, dict[str, Any]], bool], edit: Callable[[dict[str, Any]], None]) -> Break:
    def breaks(d: Path) -> str:
        path, i = find_entry(d, pick)
        return edit_entry(d, path, i, edit)
    return breaks


def _data(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DATA


def _added_data(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DATA and r["status"] == 1


def _not_added(m: ManifestFile, r: dict[str, Any]) -> bool:
    return r["status"] != 1


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(rec: dict[str, Any]) -> None:
        rec[key] = value
    return edit


def _set_file(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(rec: dict[str, Any]) -> None:
        rec["data_file"][key] = value(rec["data_file"][key]) if callable(value) else value
    return edit


def _partition_as_string(d: Path) -> str:
    """Re-type the manifest's first partition field (a date) as a string, with string values."""
    m = _first_manifest(d, spec_id=0)

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
    return _entry(pick, edit)


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


def _dup_dv(d: Path) -> str:
    m = _first_manifest(d, ManifestContent.DELETES)

    def apply(_schema: dict[str, Any], _meta: dict[str, bytes], records: list[dict[str, Any]]) -> None:
        live = next(r for r in records if r["status"] != 2)
        records.append(dict(live))
    return edit_manifest(d, m.manifest_path, apply)


def _live_dv(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DELETES and r["status"] != 2 and r["data_file"]["file_format"] == "PUFFIN"


def _added_dv(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DELETES and r["status"] == 1 and r["data_file"]["file_format"] == "PUFFIN"


def _live_position_file(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DELETES and r["status"] != 2 and r["data_file"]["content"] == 1


def _puffin_of_live_dv(d: Path) -> tuple[str, dict[str, Any]]:
    path, i = find_entry(d, _live_dv)
    return path, entry_records(path)[i]["data_file"]


def _corrupt_dv_crc(d: Path) -> str:
    _manifest, df = _puffin_of_live_dv(d)
    puffin = Path(df["file_path"])
    data = bytearray(puffin.read_bytes())
    data[df["content_offset"] + df["content_size_in_bytes"] - 1] ^= 0xFF  # last byte of the CRC
    puffin.write_bytes(bytes(data))
    return df["file_path"]


def _cardinality_property(d: Path) -> str:
    manifest, df = _puffin_of_live_dv(d)
    puffin = Path(df["file_path"])
    data = puffin.read_bytes()
    footer = read_puffin_footer(data)
    start = len(data) - footer.footer_size
    blob = next(b for b in footer.blobs if b.offset == df["content_offset"])
    old = f'"cardinality":"{blob.properties["cardinality"]}"'.encode()
    digit = blob.properties["cardinality"][-1]
    new = old[:-2] + (b"9" if digit != "9" else b"8") + b'"'  # same length: offsets and size stay
    tail = data[start:]
    # Java writes a blob's properties after its offset: replace the first match after it.
    after = tail.index(b'"offset":' + str(blob.offset).encode())
    pos = tail.index(old, after)
    puffin.write_bytes(data[:start] + tail[:pos] + new + tail[pos + len(old):])
    return manifest


def _position_file_beside_dv(d: Path) -> str:
    """Turn one live DV into a Parquet position delete file naming the data file of another live DV."""
    dvs = [(m.manifest_path, i, r) for m in current_manifests(d) if m.content == ManifestContent.DELETES
           for i, r in enumerate(entry_records(m.manifest_path)) if _live_dv(m, r)]
    (_, _, first), (path, i, _) = dvs[0], dvs[1]
    target = first["data_file"]["referenced_data_file"]

    def edit(rec: dict[str, Any]) -> None:
        rec["data_file"].update(file_format="PARQUET", referenced_data_file=target, content_offset=None,
                                content_size_in_bytes=None)
    return edit_entry(d, path, i, edit)


def _equality_delete(rec: dict[str, Any]) -> None:
    rec["data_file"]["content"] = 2
    rec["data_file"]["equality_ids"] = [999]


def _delete_data_file(d: Path) -> str:
    path, i = find_entry(d, _data)
    Path(entry_records(path)[i]["data_file"]["file_path"]).unlink()
    return path


def _v3_position_file(rec: dict[str, Any]) -> None:
    rec["data_file"]["file_format"] = "PARQUET"


def destroy_magic(path: str) -> str:
    """Overwrite a file's first 4 bytes (Avro's 'Obj\\x01'), its length unchanged: Spark fails on it
    with 'Not an Avro data file'."""
    data = bytearray(Path(path).read_bytes())
    data[:4] = b"\0\0\0\0"
    Path(path).write_bytes(bytes(data))
    return path


def _list_magic(d: Path) -> str:
    return destroy_magic(current_list(d))


def _manifest_magic(d: Path) -> str:
    return destroy_magic(_first_manifest(d).manifest_path)


def _cut_puffin(d: Path) -> str:
    """Cut the last bytes of a live DV's Puffin file: its footer (magic, length) is gone."""
    _manifest, df = _puffin_of_live_dv(d)
    puffin = Path(df["file_path"])
    puffin.write_bytes(puffin.read_bytes()[:-8])
    return df["file_path"]


CASES: list[Case] = [
    # metadata
    Case("metadata.format-version", "v2_part", _meta(lambda d: d.__setitem__("format-version", 9))),
    Case("metadata.required-fields", "v2_part", _meta(lambda d: d.pop("last-partition-id"))),
    Case("metadata.snapshot-ids-unique", "v2_part", _meta(_dup_snapshot)),
    Case("metadata.sequence-number-bound", "v2_part",
         _meta(lambda d: d.__setitem__("last-sequence-number", d["last-sequence-number"] - 1))),
    Case("metadata.sequence-number-after-parent", "v2_part", _meta(_seq_after_parent)),
    Case("metadata.current-snapshot-is-main", "v2_part", _meta(_main_elsewhere)),
    Case("metadata.refs-exist", "v2_part", _meta(lambda d: d["refs"]["after_merge"].__setitem__("snapshot-id", 42))),
    Case("metadata.snapshot-parent-cycle", "v2_part", _meta(_parent_cycle),
         implied=frozenset({"metadata.sequence-number-after-parent"})),  # a cycle must step back somewhere
    Case("metadata.number-range", "v2_part", _meta(_negative_timestamp)),
    Case("metadata.snapshot-log-ordered", "v2_part", _meta(_log_disorder("snapshot-log"))),
    Case("metadata.metadata-log-ordered", "v2_part", _meta(_log_disorder("metadata-log"))),
    Case("metadata.last-column-id", "v2_part", _meta(lambda d: d.__setitem__("last-column-id", 5))),
    Case("metadata.field-ids-unique", "v2_part", _meta(_dup_field_id)),
    Case("metadata.reserved-field-ids", "v2_part", _meta(_reserved_id)),
    Case("metadata.identifier-fields", "v2_part", _meta(_identifier_optional)),
    Case("metadata.ids-unique", "v2_part", _meta(_dup_sort_order)),
    Case("metadata.snapshot-schema-exists", "v2_part", _meta(lambda d: d["snapshots"][0].__setitem__("schema-id", 77))),
    Case("metadata.partition-field-ids", "v2_part",
         _meta(_add_spec([{"name": "c", "transform": "identity", "source-id": 3, "field-id": 1001}]))),
    Case("metadata.last-partition-id", "v2_part", _meta(lambda d: d.__setitem__("last-partition-id", 1000))),
    Case("metadata.partition-transforms", "v2_part",
         _meta(_add_spec([{"name": "n_day", "transform": "day", "source-id": 2, "field-id": 1003}], 1003))),
    Case("metadata.sort-orders", "v2_part", _meta(_bad_sort_order)),
    Case("metadata.default-values", "v3_dv", _meta(_bad_default)),
    Case("metadata.snapshot-row-id-ranges", "v3_dv", _meta(lambda d: d["snapshots"][1].__setitem__("first-row-id", 0))),
    Case("metadata.next-row-id", "v3_dv", _meta(lambda d: d.__setitem__("next-row-id", 1))),
    # manifest lists
    Case("manifest-list.exists", "v2_part", _delete_list),
    Case("manifest-list.manifest-exists", "v2_part", _list_record(_any, _set("manifest_path", "/nonexistent.avro")),
         implied=frozenset({"deletes.position-delete-target-live"})),
    Case("manifest-list.manifest-length", "v2_part",
         _list_record(_any, lambda r: r.__setitem__("manifest_length", r["manifest_length"] + 1))),
    Case("manifest-list.partition-spec-exists", "v2_part", _list_record(_any, _set("partition_spec_id", 7))),
    Case("manifest-list.counts", "v2_part",
         _list_record(_any, lambda r: r.__setitem__("existing_rows_count", r["existing_rows_count"] + 5))),
    Case("manifest-list.min-sequence-number", "v2_part",
         _list_record(lambda r: r["min_sequence_number"] > 1, _set("min_sequence_number", 1))),
    Case("manifest-list.sequence-number", "v2_part",
         _list_record(_any, _set("sequence_number", 10**6)),
         implied=frozenset({"manifest.sequence-number-order", "manifest-list.min-sequence-number"})),
    Case("manifest-list.content", "v2_part", _content_key),
    Case("manifest-list.partition-summaries", "v2_part", _list_record(_spanning_summary, _shrink_summary)),
    Case("manifest-list.first-row-ids", "v3_dv", _overlap_row_ids),
    Case("manifest-list.readable", "v2_part", _list_magic),
    # manifests
    Case("manifest.readable", "v2_part", _manifest_magic),
    Case("manifest.entry-values", "v2_part", _entry(_data, _set_file("file_size_in_bytes", -1))),
    Case("manifest.metadata-keys", "v2_part", _manifest_key("partition-spec", None)),
    Case("manifest.partition-spec-id", "v2_part", _manifest_key("partition-spec-id", "1", spec_id=0)),
    Case("manifest.content", "v2_part", _entry(_data, _set_file("content", 1)),
         implied=frozenset({"deletes.position-delete-target-live"})),
    Case("manifest.partition-tuple", "v2_part", _partition_as_string),
    Case("manifest.explicit-sequence-numbers", "v2_part", _entry(_not_added, _set("sequence_number", None)),
         implied=frozenset({"manifest-list.min-sequence-number"})),
    Case("manifest.sequence-number-order", "v2_part", _entry(_added_data, _set("sequence_number", 10**6)),
         implied=frozenset({"manifest-list.min-sequence-number"})),
    Case("manifest.added-by-snapshot", "v2_part", _entry(_added_data, _set("snapshot_id", 1))),
    Case("manifest.bounds-decode", "v2_part", _bound_of(1, _short_bound)),
    Case("manifest.bounds-order", "v2_part", _bound_of(1, _swap_bounds)),
    Case("manifest.identity-partition-bounds", "v3_dv", _identity_mismatch,
         implied=frozenset({"manifest-list.partition-summaries"})),
    Case("manifest.bucket-partition-bounds", "v2_part", _bound_of(1, _wrong_bucket, spec_ids=(0, 1))),
    # deletes
    Case("deletes.no-v3-position-delete-files", "v3_dv", _entry(_added_dv, _v3_position_file)),
    Case("deletes.dv-blob-matches", "v3_dv", _entry(_live_dv, _set_file("content_offset", lambda v: v + 1))),
    Case("deletes.dv-blob-valid", "v3_dv", _corrupt_dv_crc),
    Case("deletes.dv-cardinality", "v3_dv", _cardinality_property),
    Case("deletes.one-dv-per-data-file", "v3_dv", _dup_dv, implied=frozenset({"manifest-list.counts"})),
    Case("deletes.dv-target-live", "v3_dv", _entry(_live_dv, _set_file("referenced_data_file", "/gone.parquet")),
         implied=frozenset({"deletes.dv-blob-matches"})),
    Case("deletes.position-delete-target-live", "v2_part",
         _entry(_live_position_file, _set_file("referenced_data_file", "/gone.parquet"))),
    Case("deletes.dv-format-version", "v2_part", _entry(_live_position_file, _set_file("file_format", "PUFFIN")),
         implied=frozenset({"deletes.dv-blob-matches"})),
    Case("deletes.dv-replaces-position-deletes", "v3_dv", _position_file_beside_dv,
         implied=frozenset({"deletes.no-v3-position-delete-files"})),
    Case("deletes.equality-ids", "v2_part", _entry(_live_position_file, _equality_delete)),
    Case("deletes.puffin-readable", "v3_dv", _cut_puffin),
    # files (--deep)
    Case("files.exist", "v2_part", _delete_data_file, deep=True),
    Case("files.size", "v2_part", _entry(_data, _set_file("file_size_in_bytes", lambda v: v + 1)), deep=True),
    Case("files.parquet-record-count", "v2_part", _entry(_data, _set_file("record_count", lambda v: v + 1)),
         implied=frozenset({"manifest-list.counts"}), deep=True),
    Case("files.statistics-exist", "v2_part", _meta(_statistics), deep=True),
]
# Rules whose finding every Spark-written table already has: checked on the pristine copy instead.
PRESENT_IN_FIXTURES = {"manifest.schema-id-key": "v2_part"}


def test_every_rule_has_a_breaking_case() -> None:
    # the v4 rules' cases break upgraded v4 copies (tests/unit/validate/test_v4_rules.py)
    covered = {c.rule for c in CASES} | set(PRESENT_IN_FIXTURES) | {c.rule for c in V4_CASES}
    assert sorted(set(CATALOGUE) - covered) == []
    assert len([c.rule for c in CASES]) == len({c.rule for c in CASES})


def _keys(result: ValidationResult) -> set[tuple[str, str | None, str | None, str]]:
    return {(f.rule, f.file, f.entry, f.message) for f in result.findings}


@pytest.mark.parametrize("case", CASES, ids=[c.rule for c in CASES])
def test_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables[case.kind].location, tmp_path / "t")
    pristine = run(table, deep=case.deep, all_snapshots=case.all_snapshots)
    assert pristine.errors == 0, [f for f in pristine.findings if f.severity == Severity.ERROR]
    expected_file = case.breaks(table)
    result = run(table, deep=case.deep, all_snapshots=case.all_snapshots)
    new = [f for f in result.findings if (f.rule, f.file, f.entry, f.message) not in _keys(pristine)]
    hits = [f for f in new if f.rule == case.rule]
    assert hits, f"{case.rule} not reported; new findings: {new}"
    assert any(f.file == expected_file for f in hits), (expected_file, hits)
    assert all(f.values or f.entry for f in hits)  # a finding says where and what disagrees
    others = {f.rule for f in new} - {case.rule} - case.implied
    assert not others, f"breaking {case.rule} also reported {others}: {new}"
    if CATALOGUE[case.rule].severity == Severity.ERROR:
        assert result.errors > 0 and result.exit_code == 7


@pytest.mark.parametrize("rule", sorted(PRESENT_IN_FIXTURES))
def test_java_written_warning_is_reported_on_every_manifest(rule: str, spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables[PRESENT_IN_FIXTURES[rule]].location, tmp_path / "t")
    result = run(table)
    manifests = {m.manifest_path for m in current_manifests(table)}
    assert {f.file for f in result.findings if f.rule == rule} == manifests
    assert CATALOGUE[rule].severity == Severity.WARNING and result.exit_code == 0


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


def test_unsupported_version_with_its_rule_skipped_is_exit_4(spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables["v1_unpart"].location, tmp_path / "t")
    edit_metadata(table, lambda d: d.__setitem__("format-version", 9))
    assert CliRunner().invoke(app, ["validate", str(table), "--json"]).exit_code == 7
    out = CliRunner().invoke(app, ["validate", str(table), "--skip", "metadata.format-version"])
    assert out.exit_code == 4 and "format-version 9" in out.stderr, out.output


def test_v3_snapshot_after_the_first_with_row_lineage_needs_first_row_id(spark_tables: Any, tmp_path: Path) -> None:
    table = copy_table(spark_tables["v3_dv"].location, tmp_path / "t")

    def drop(doc: dict[str, Any]) -> None:
        _snapshot(doc, doc["current-snapshot-id"]).pop("first-row-id")
    edit_metadata(table, drop)
    result = run(table)
    assert {(f.rule, f.values.get("field")) for f in result.findings if f.severity == Severity.ERROR} == {
        ("metadata.required-fields", "first-row-id")}
