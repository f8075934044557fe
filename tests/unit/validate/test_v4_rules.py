"""`icectl validate` on v4 tables: upgraded Spark fixtures are clean, and each v4 rule is reported.

The v4 tables are private copies of the real Spark fixtures (v1_unpart, v2_part, v3_dv),
upgraded by icectl to v4 and then changed by icectl commits that make every v4 structure: two
root-level data files (ADDED, then EXISTING), a new v4 leaf, a DELETED root entry, manifest DVs
on upgraded data and delete leaves and on the v4 leaf (a union DV with the old one DELETED), and
one manifest DV moved into a Puffin file. Each rule case then edits one thing in a copy (the
metadata JSON, the root, a leaf, a DV) and checks that validate reports that rule at the file
the case names, and no other error rule the break does not imply.
"""

from __future__ import annotations

import itertools
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.corrupt import copy_table, edit_avro, edit_metadata, read_avro, read_metadata
from support.forge import property_change

from icectl.codec.puffin import decode_deletion_vector, deletion_vector_blob, write_puffin
from icectl.config import Config
from icectl.ops.add_files import add_files
from icectl.ops.inspect.views import file_rows
from icectl.ops.remove_files import remove_files
from icectl.ops.upgrade import upgrade
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.validate import CATALOGUE, Severity, ValidationResult, v4_rules, validate_address, validate_table
from unit.validate.breaking import declared_rules
from unit.validate.test_validate import JAVA_WARNINGS, CountingIO

KINDS = ["v1_unpart", "v2_part", "v3_dv"]
DATA, DATA_MANIFEST, DELETE_MANIFEST, MANIFEST_DV = 0, 3, 4, 5
EXISTING, ADDED, DELETED = 0, 1, 2
Records = list[dict[str, Any]]
_copies = itertools.count()


# --------------------------------------------------------------------------- building the v4 tables


@dataclass(frozen=True)
class V4Table:
    path: Path
    root_files: tuple[str, ...]  # data files added at the root (the first removed again)
    leaf_files: tuple[str, ...]  # data files added in one new v4 leaf (both removed by manifest DVs)
    removed: tuple[str, ...]  # files of upgraded leaves removed by a manifest DV


def _copy_of(d: Path, source: str) -> str:
    dst = d / "data" / f"v4-copy-{next(_copies)}.parquet"
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dst)
    return str(dst)


def build_v4(src: Path, dst: Path) -> V4Table:
    """A private v4 copy of a Spark fixture with every v4 structure (see the module docstring)."""
    d = copy_table(src, dst)
    upgrade(load_table(str(d)), 4)
    rows = list(file_rows(load_table(str(d))).rows)
    data = [r["file_path"] for r in rows if r["content"] == 0]
    dv_targets = [r["referenced_data_file"] for r in rows
                  if r["content"] == 1 and str(r["file_format"]).lower() == "puffin"]
    # Upgraded leaves lose a file each (for v3_dv, one whose DV goes too: a DV on a delete leaf).
    removed = [*dv_targets[:1], *[p for p in data if p not in dv_targets[:1]]][:2]
    # add-files partitions a file by the current spec: copy files written with it
    spec = load_table(str(d)).metadata.default_spec_id
    current = [r["file_path"] for r in rows if r["content"] == 0 and r["spec_id"] == spec]
    first, second = _copy_of(d, current[-1]), _copy_of(d, current[-1])
    add_files(load_table(str(d)), [first])
    add_files(load_table(str(d)), [second])
    t = load_table(str(d))
    commit(t, lambda md: property_change({V4_ROOT_MAX_ADDED_FILES.name: "1"}))
    leaf = [_copy_of(d, current[0]), _copy_of(d, current[0])]
    add_files(load_table(str(d)), leaf)
    remove_files(load_table(str(d)), [first, removed[0]])
    remove_files(load_table(str(d)), [leaf[0], removed[1]])
    remove_files(load_table(str(d)), [leaf[1]])  # the v4 leaf's DV becomes the union, the old one DELETED
    _manifest_dv_to_puffin(d, leaf_dv(d))
    return V4Table(d, (first, second), tuple(leaf), tuple(removed))


def current_root(d: Path) -> str:
    doc = read_metadata(d)
    snap = next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])
    return str(snap["root-manifest"])


def root_records(d: Path) -> Records:
    return read_avro(current_root(d))[2]


def edit_root(d: Path, edit: Callable[[Records, dict[str, bytes]], None]) -> str:
    root = current_root(d)
    edit_avro(root, lambda _schema, meta, records: edit(records, meta))
    return root


def edit_leaf(d: Path, leaf: str, edit: Callable[[Records, dict[str, bytes]], None]) -> str:
    """Edit a leaf, then set its new size in every root entry naming it (inline DVs' sizes too)."""
    size = edit_avro(leaf, lambda _schema, meta, records: edit(records, meta))
    for root in (d / "metadata").glob("root-*.avro"):
        def fix(_schema: dict[str, Any], _meta: dict[str, bytes], records: Records) -> None:
            for r in records:
                if r["location"] == leaf:
                    r["file_size_in_bytes"] = size
        edit_avro(root, fix)
    return leaf


def _live(r: dict[str, Any]) -> bool:
    return r["version_info"]["status"] != DELETED


def v4_leaf(d: Path) -> str:
    """The leaf the test's add-files wrote (format-version 4)."""
    for r in root_records(d):
        if r["content_type"] == DATA_MANIFEST and _live(r) and read_avro(r["location"])[1].get(
                "format-version") == b"4":
            return str(r["location"])
    raise AssertionError("no v4 leaf in the current root")


def leaf_dv(d: Path) -> int:
    """Ordinal in the current root of the live manifest DV on the v4 leaf."""
    leaf = v4_leaf(d)
    return next(i for i, r in enumerate(root_records(d))
                if r["content_type"] == MANIFEST_DV and _live(r) and r["referenced_file"] == leaf)


def inline_dv(d: Path, leaf_type: int = DATA_MANIFEST) -> int:
    """Ordinal of a live inline manifest DV on an upgraded leaf of ``leaf_type``."""
    records = root_records(d)
    types = {r["location"]: r["content_type"] for r in records if _live(r) and r["content_type"] in (3, 4)}
    return next(i for i, r in enumerate(records)
                if r["content_type"] == MANIFEST_DV and _live(r) and r["deletion_vector"]["inline_content"]
                and types.get(r["referenced_file"]) == leaf_type)


def _manifest_dv_to_puffin(d: Path, ordinal: int) -> str:
    """Move one inline manifest DV into a Puffin file of its own (the layout's other encoding)."""
    rec = root_records(d)[ordinal]
    positions = decode_deletion_vector(rec["deletion_vector"]["inline_content"])
    puffin = write_puffin([deletion_vector_blob(rec["referenced_file"], positions)])
    path = d / "metadata" / f"manifest-dv-{next(_copies)}.puffin"
    path.write_bytes(puffin.data)
    blob = puffin.metadata.blobs[0]

    def edit(records: Records, _meta: dict[str, bytes]) -> None:
        records[ordinal].update(location=str(path), file_size_in_bytes=len(puffin.data), deletion_vector={
            "offset": blob.offset, "size_in_bytes": blob.length, "inline_content": None})
    edit_root(d, edit)
    return str(path)


# --------------------------------------------------------------------------- clean tables


@pytest.fixture(scope="module")
def v4_tables(spark_tables: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, V4Table]:
    base = tmp_path_factory.mktemp("v4-validate")
    return {kind: build_v4(spark_tables[kind].location, base / kind) for kind in KINDS}


def _errors(result: ValidationResult) -> list[Any]:
    return [f for f in result.findings if f.severity == Severity.ERROR]


@pytest.mark.parametrize("kind", KINDS)
def test_upgraded_fixtures_have_no_error_findings(kind: str, v4_tables: dict[str, V4Table]) -> None:
    t = v4_tables[kind]
    table = load_table(str(t.path))
    md = table.metadata
    assert md.format_version == 4
    roots = sum(1 for s in md.snapshots if s.root_manifest)
    assert roots >= 6  # upgrade (one per branch head) and the test's six commits
    tree = Counter((r["content_type"], r["version_info"]["status"]) for r in root_records(t.path))
    assert tree[(DATA, EXISTING)] == 1 and tree[(MANIFEST_DV, DELETED)] >= 1 and tree[(MANIFEST_DV, EXISTING)] >= 1
    assert any(not r["deletion_vector"]["inline_content"] for r in root_records(t.path)
               if r["content_type"] == MANIFEST_DV and _live(r))  # one DV in a Puffin file
    live = {r["file_path"] for r in file_rows(table).rows}
    assert t.root_files[1] in live and not {t.root_files[0], *t.leaf_files, *t.removed} & live
    for deep, all_snapshots in ((False, False), (True, False), (False, True), (True, True)):
        result = validate_table(table, deep=deep, all_snapshots=all_snapshots)
        assert _errors(result) == [], (deep, all_snapshots, _errors(result))
        warnings = {f.rule for f in result.findings if f.severity == Severity.WARNING}
        assert warnings <= JAVA_WARNINGS, warnings
        assert result.snapshots == (len(md.snapshots) if all_snapshots else 1) and not result.notes
        print(f"v4 {kind} deep={deep} all={all_snapshots}: {result.summary}")


@pytest.mark.parametrize("kind", ["v2_part", "many_snaps"])
def test_all_snapshots_reads_each_root_and_leaf_once(kind: str, v4_tables: dict[str, V4Table], spark_tables: Any,
                                                     tmp_path: Path) -> None:
    """Leaves shared by manifest lists (older snapshots) and roots, and by many roots: one read each."""
    path = v4_tables[kind].path if kind in v4_tables else build_v4(spark_tables[kind].location, tmp_path / "t").path
    io = CountingIO()
    table = load_table(str(path), io=io)
    result = validate_table(table, all_snapshots=True)
    print(f"v4 {kind} --all-snapshots: {result.summary} in {result.seconds:.2f}s")
    assert result.errors == 0 and result.snapshots == len(table.metadata.snapshots)
    roots = [p for p in io.reads if "/root-" in p]
    assert len(roots) == sum(1 for s in table.metadata.snapshots if s.root_manifest)
    avro = [p for p in io.reads if p.endswith(".avro")]
    assert all(io.reads[p] == 1 for p in avro), io.reads.most_common(3)
    leaves = {r["location"] for p in roots for r in read_avro(p)[2] if r["content_type"] in (3, 4)}
    assert leaves <= set(io.reads)  # every leaf of every root was read (once)


def test_deep_skips_files_manifest_dvs_removed(spark_tables: Any, tmp_path: Path) -> None:
    """A file a manifest DV removed is still a row of its leaf; once the file is gone (as expire
    would delete it), --deep on the current snapshot has nothing to say, on an older one it does."""
    t = build_v4(spark_tables["v1_unpart"].location, tmp_path / "t")
    gone = [*t.removed, *t.leaf_files]
    for f in gone:
        Path(f).unlink()
    assert _errors(validate_address(str(t.path), Config({}), FileIO(), deep=True)) == []
    older = validate_address(str(t.path), Config({}), FileIO(), deep=True, all_snapshots=True)
    assert {f.values.get("file_path") for f in older.findings if f.rule == "files.exist"} == set(gone)


# --------------------------------------------------------------------------- rule cases

Break = Callable[[V4Table], str]  # breaks the table in place; returns the file the finding must name


@dataclass(frozen=True)
class Case:
    rule: str
    breaks: Break
    kind: str = "v3_dv"
    implied: frozenset[str] = frozenset()
    all_snapshots: bool = False
    label: str = ""


def _in_root(pick: Callable[[dict[str, Any]], bool], edit: Callable[[dict[str, Any]], None]) -> Break:
    def breaks(t: V4Table) -> str:
        def apply(records: Records, _meta: dict[str, bytes]) -> None:
            edit(next(r for r in records if pick(r)))
        return edit_root(t.path, apply)
    return breaks


def at_root_entry(ordinal_of: Callable[[Path], int], edit: Callable[[dict[str, Any]], None]) -> Break:
    def breaks(t: V4Table) -> str:
        i = ordinal_of(t.path)

        def apply(records: Records, _meta: dict[str, bytes]) -> None:
            edit(records[i])
        return edit_root(t.path, apply)
    return breaks


def _root_file(status: int) -> Callable[[dict[str, Any]], bool]:
    return lambda r: r["content_type"] == DATA and r["version_info"]["status"] == status


def _upgraded_manifest(r: dict[str, Any]) -> bool:
    return r["content_type"] == DATA_MANIFEST and r["version_info"]["status"] == EXISTING and \
        r["version_info"]["sequence_number"] >= 2


def _both_keys(t: V4Table) -> str:
    def edit(doc: dict[str, Any]) -> None:
        old = next(s for s in doc["snapshots"] if s.get("manifest-list"))
        snap = next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])
        snap["manifest-list"] = old["manifest-list"]
    return str(edit_metadata(t.path, edit))


def _back_to_a_list(t: V4Table) -> str:
    """The head (whose parent has a root) trades its root for an older snapshot's manifest list."""
    def edit(doc: dict[str, Any]) -> None:
        old = next(s for s in doc["snapshots"] if s.get("manifest-list"))
        snap = next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])
        snap["manifest-list"] = old["manifest-list"]
        snap.pop("root-manifest")
    return str(edit_metadata(t.path, edit))


def _delete_root(t: V4Table) -> str:
    root = current_root(t.path)
    Path(root).unlink()
    return root


def _root_key(key: str, value: bytes) -> Break:
    def breaks(t: V4Table) -> str:
        return edit_root(t.path, lambda _records, meta: meta.__setitem__(key, value))
    return breaks


def _leaf_says_deletes(t: V4Table) -> str:
    return edit_leaf(t.path, v4_leaf(t.path), lambda _records, meta: meta.__setitem__("content", b"deletes"))


def _stats(r: dict[str, Any]) -> None:
    r["manifest_stats"] = {"added_files_count": 1, "existing_files_count": 0, "deleted_files_count": 0,
                           "added_rows_count": r["record_count"], "existing_rows_count": 0,
                           "deleted_rows_count": 0, "min_sequence_number": r["version_info"]["sequence_number"]}


def _stats_plus(r: dict[str, Any]) -> None:
    r["manifest_stats"]["existing_rows_count"] += 5


def _no_parent(t: V4Table) -> str:
    def edit(doc: dict[str, Any]) -> None:
        snap = next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])
        snap.pop("parent-snapshot-id")
    edit_metadata(t.path, edit)
    return edit_root(t.path, lambda _records, meta: meta.__setitem__("parent-snapshot-id", b"null"))


def _version(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda r: r["version_info"].__setitem__(key, value(r["version_info"]) if callable(value) else value)


def _overlap_root_file(t: V4Table) -> str:
    """The root-level file takes the row ids of a live file in an upgraded leaf."""
    taken = next(r["first_row_id"] for r in file_rows(load_table(str(t.path))).rows
                 if r["content"] == 0 and r["file_path"] not in t.root_files and r["first_row_id"] is not None)

    def apply(records: Records, _meta: dict[str, bytes]) -> None:
        next(r for r in records if _root_file(EXISTING)(r))["first_row_id"] = taken
    return edit_root(t.path, apply)


def _data_dv_crc(t: V4Table) -> str:
    """A live data DV (in an upgraded delete leaf): its blob's CRC broken, as for v3."""
    dv = next(r for r in file_rows(load_table(str(t.path))).rows
              if r["content"] == 1 and str(r["file_format"]).lower() == "puffin")
    data = bytearray(Path(dv["file_path"]).read_bytes())
    data[dv["content_offset"] + dv["content_size_in_bytes"] - 1] ^= 0xFF
    Path(dv["file_path"]).write_bytes(bytes(data))
    return str(dv["file_path"])


def _root_as_leaf(t: V4Table) -> str:
    """An upgraded manifest entry of the current root pointed at the upgrade's root (depth 3)."""
    doc = read_metadata(t.path)
    first = min((s for s in doc["snapshots"] if s.get("root-manifest")), key=lambda s: s["sequence-number"])
    old = str(first["root-manifest"])

    def apply(records: Records, _meta: dict[str, bytes]) -> None:
        leaves_with_dv = {r["referenced_file"] for r in records if r["content_type"] == MANIFEST_DV}
        r = next(r for r in records if _upgraded_manifest(r) and r["location"] not in leaves_with_dv)
        r.update(location=old, file_size_in_bytes=Path(old).stat().st_size)
    edit_root(t.path, apply)
    return old


def _first_root_key(t: V4Table) -> str:
    """The upgrade's root (not the current snapshot's): only --all-snapshots reads it."""
    doc = read_metadata(t.path)
    first = min((s for s in doc["snapshots"] if s.get("root-manifest")), key=lambda s: s["sequence-number"])
    edit_avro(first["root-manifest"], lambda _s, meta, _r: meta.__setitem__("snapshot-id", b"42"))
    return str(first["root-manifest"])


CASES: list[Case] = [
    Case("v4.snapshot-manifest-key", _both_keys),
    Case("v4.snapshot-manifest-key", _back_to_a_list, label="list-after-root"),
    Case("v4.root-exists", _delete_root),
    Case("v4.manifest-metadata", _root_key("content", b"data")),
    Case("v4.root-snapshot-keys", _root_key("sequence-number", b"999")),
    Case("v4.root-snapshot-keys", _first_root_key, label="older-root", all_snapshots=True),
    Case("v4.content-types", _leaf_says_deletes),
    Case("v4.content-types", _root_as_leaf, label="root-as-leaf",
         implied=frozenset({"deletes.dv-target-live", "v4.first-row-ids"})),
    Case("v4.manifest-stats", _in_root(_root_file(EXISTING), _stats)),
    Case("v4.manifest-stats-match", _in_root(_upgraded_manifest, _stats_plus)),
    Case("v4.content-stats", _in_root(_upgraded_manifest, lambda r: r.__setitem__("content_stats", None))),
    Case("v4.content-stats-bounds", _in_root(_upgraded_manifest, lambda r: r["content_stats"].__setitem__(
        "lower_bounds", r["content_stats"]["upper_bounds"]))),
    Case("v4.deletion-vector", _in_root(_root_file(EXISTING), lambda r: r.__setitem__(
        "deletion_vector", {"offset": 4, "size_in_bytes": 10, "inline_content": None}))),
    Case("v4.entry-fields", _in_root(_upgraded_manifest, lambda r: r.__setitem__("sort_order_id", 0))),
    Case("v4.version-info", _in_root(_root_file(EXISTING), _version("snapshot_id", None))),
    Case("v4.sequence-numbers", _in_root(_upgraded_manifest, _version("file_sequence_number",
                                                                      lambda vi: vi["sequence_number"] - 1))),
    Case("v4.deleted-needs-parent", _no_parent),
    Case("v4.first-row-ids", _in_root(_root_file(EXISTING), lambda r: r.__setitem__("first_row_id", None))),
    Case("v4.first-row-ids", _overlap_root_file, label="overlap"),
    # v1-v3 rules on a v4 tree report with the root as the file (a leaf's own rules: the leaf)
    Case("deletes.dv-blob-valid", _data_dv_crc),
    Case("manifest.sequence-number-order", lambda t: edit_leaf(t.path, v4_leaf(t.path), lambda records, _meta: (
        records[0]["version_info"].__setitem__("sequence_number", 10**6))),
         implied=frozenset({"v4.manifest-stats-match"})),
    Case("manifest-list.manifest-exists", lambda t: (Path(v4_leaf(t.path)).unlink(), current_root(t.path))[1],
         implied=frozenset({"v4.manifest-dv-target"})),
    Case("manifest.added-by-snapshot", _in_root(_upgraded_manifest,
                                                lambda r: r["version_info"].__setitem__("status", ADDED)),
         implied=frozenset({"v4.sequence-numbers", "v4.manifest-stats-match"})),
]


def _keys(result: ValidationResult) -> set[tuple[str, str | None, str | None, str]]:
    return {(f.rule, f.file, f.entry, f.message) for f in result.findings}


def run(d: Path, *, all_snapshots: bool = False) -> ValidationResult:
    return validate_address(str(d), Config({}), FileIO(), all_snapshots=all_snapshots)


def case_id(case: Case) -> str:
    return case.rule + (f"-{case.label}" if case.label else "")


def check_v4_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    """Break a v4 copy the case's way: its rule (and only the rules it implies) is reported, at its file."""
    t = build_v4(spark_tables[case.kind].location, tmp_path / "t")
    pristine = run(t.path, all_snapshots=case.all_snapshots)
    assert pristine.errors == 0, _errors(pristine)
    expected_file = case.breaks(t)
    result = run(t.path, all_snapshots=case.all_snapshots)
    new = [f for f in result.findings if (f.rule, f.file, f.entry, f.message) not in _keys(pristine)]
    hits = [f for f in new if f.rule == case.rule]
    assert hits, f"{case.rule} not reported; new findings: {new}"
    assert any(f.file == expected_file for f in hits), (expected_file, hits)
    assert all(f.values or f.entry for f in hits)
    others = {f.rule for f in new if f.severity == Severity.ERROR} - {case.rule} - case.implied
    assert not others, f"breaking {case.rule} also reported {others}: {new}"
    error = CATALOGUE[case.rule].severity == Severity.ERROR
    assert result.exit_code == (7 if error else 0)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_v4_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    check_v4_rule_is_reported(case, spark_tables, tmp_path)


def test_every_v4_rule_has_a_case() -> None:
    declared = declared_rules(v4_rules)  # v4_manifest_dvs.py: its own file
    assert declared and declared - {c.rule for c in CASES} == set()
