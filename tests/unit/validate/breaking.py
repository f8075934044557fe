"""Shared by the per-module rule tests (test_metadata_rules.py, test_manifest_list_rules.py, ...).

Each case copies a fixture table (tests/support/corrupt.py), changes one thing in its metadata
JSON, a manifest list, a manifest or a Puffin file, and checks that ``icectl validate`` reports
the rule, at the file the case names, and no error finding of any rule the break does not imply.
Findings the pristine copy already has (Java-written warnings) are subtracted first.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from support.corrupt import (
    copy_table,
    current_list,
    current_manifests,
    edit_entry,
    edit_manifest_list,
    edit_metadata,
    entry_records,
    find_entry,
)

from icectl.config import Config
from icectl.spec.manifest import ManifestContent, ManifestFile
from icectl.storage import FileIO
from icectl.validate import CATALOGUE, Severity, ValidationResult, validate_address

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


def meta(edit: Callable[[dict[str, Any]], None]) -> Break:
    return lambda d: str(edit_metadata(d, edit))


def snapshot(doc: dict[str, Any], snapshot_id: int) -> dict[str, Any]:
    return next(s for s in doc["snapshots"] if s["snapshot-id"] == snapshot_id)


def list_record(pick: Callable[[dict[str, Any]], bool], edit: Callable[[dict[str, Any]], None]) -> Break:
    def breaks(d: Path) -> str:
        path = current_list(d)

        def apply(records: list[dict[str, Any]]) -> None:
            target = next(r for r in records if pick(r))
            edit(target)
        return edit_manifest_list(path, apply)
    return breaks


def any_record(_r: dict[str, Any]) -> bool:
    return True


def first_manifest(d: Path, content: ManifestContent = ManifestContent.DATA,
                    spec_id: int | None = None) -> ManifestFile:
    return next(m for m in current_manifests(d) if m.content == content
                and (spec_id is None or m.partition_spec_id == spec_id))


def entry(pick: Callable[[ManifestFile, dict[str, Any]], bool], edit: Callable[[dict[str, Any]], None]) -> Break:
    def breaks(d: Path) -> str:
        path, i = find_entry(d, pick)
        return edit_entry(d, path, i, edit)
    return breaks


def data_entry(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DATA


def added_data(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DATA and r["status"] == 1


def set_key(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(rec: dict[str, Any]) -> None:
        rec[key] = value
    return edit


def set_file(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(rec: dict[str, Any]) -> None:
        rec["data_file"][key] = value(rec["data_file"][key]) if callable(value) else value
    return edit


def live_dv(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DELETES and r["status"] != 2 and r["data_file"]["file_format"] == "PUFFIN"


def added_dv(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DELETES and r["status"] == 1 and r["data_file"]["file_format"] == "PUFFIN"


def live_position_file(m: ManifestFile, r: dict[str, Any]) -> bool:
    return m.content == ManifestContent.DELETES and r["status"] != 2 and r["data_file"]["content"] == 1


def puffin_of_live_dv(d: Path) -> tuple[str, dict[str, Any]]:
    path, i = find_entry(d, live_dv)
    return path, entry_records(path)[i]["data_file"]


def destroy_magic(path: str) -> str:
    """Overwrite a file's first 4 bytes (Avro's 'Obj\\x01'), its length unchanged: Spark fails on it
    with 'Not an Avro data file'."""
    data = bytearray(Path(path).read_bytes())
    data[:4] = b"\0\0\0\0"
    Path(path).write_bytes(bytes(data))
    return path


def finding_keys(result: ValidationResult) -> set[tuple[str, str | None, str | None, str]]:
    return {(f.rule, f.file, f.entry, f.message) for f in result.findings}



def check_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    """Break a private copy of the case's fixture table; the case's rule (and only it and the rules
    the break implies) is reported, at the file the break names."""
    table = copy_table(spark_tables[case.kind].location, tmp_path / "t")
    pristine = run(table, deep=case.deep, all_snapshots=case.all_snapshots)
    assert pristine.errors == 0, [f for f in pristine.findings if f.severity == Severity.ERROR]
    expected_file = case.breaks(table)
    result = run(table, deep=case.deep, all_snapshots=case.all_snapshots)
    new = [f for f in result.findings if (f.rule, f.file, f.entry, f.message) not in finding_keys(pristine)]
    hits = [f for f in new if f.rule == case.rule]
    assert hits, f"{case.rule} not reported; new findings: {new}"
    assert any(f.file == expected_file for f in hits), (expected_file, hits)
    assert all(f.values or f.entry for f in hits)  # a finding says where and what disagrees
    others = {f.rule for f in new} - {case.rule} - case.implied
    assert not others, f"breaking {case.rule} also reported {others}: {new}"
    if CATALOGUE[case.rule].severity == Severity.ERROR:
        assert result.errors > 0 and result.exit_code == 7


def declared_rules(module: ModuleType) -> set[str]:
    """The ids of the rules a validate module declares itself (``rule("<id>", ...)``; not those it imports)."""
    return set(re.findall(r'\brule\(\s*"([^"]+)"', inspect.getsource(module)))
