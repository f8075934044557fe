"""`icectl validate` on v4 tables (the merged spec's layout): upgraded Spark fixtures are clean, and
each v4 rule is reported.

The v4 tables are private copies of the real Spark fixtures (v1_unpart, v2_part, v3_dv), upgraded
by icectl to v4 and then changed by icectl commits that make every v4 structure: root-level data
files (ADDED, then EXISTING), a DELETED root row, a new Parquet leaf whose rows inherit, manifest
DVs (MODIFIED leaf entries, Mumbling) on upgraded data and delete manifests and on the new leaf.
Each rule case then changes one thing in a copy (the metadata JSON, the root, a leaf) and checks
that validate reports that rule at the file the case names, and no other error rule the break
does not imply. Rows are changed through the codec's model and written back raw (without the
writer's own checks), or as Parquet columns where the model cannot hold the damage.
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.corrupt import copy_table, edit_avro, edit_metadata, read_metadata
from support.forge import property_change

from icectl.codec.mumbling import encode_mumbling
from icectl.codec.v4_manifest import encode_rows, read_v4_manifest, stats_columns, tracked_file_schema
from icectl.config import Config
from icectl.ops.files.add_files import add_files
from icectl.ops.files.remove_files import remove_files
from icectl.ops.inspect.views import file_rows
from icectl.ops.lifecycle.upgrade import upgrade
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.spec.tracked_file import ContentType, DeletionVector, EntryStatus, TrackedFile
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.table.layout.root import column_types, union_partition_type
from icectl.table.scan_v4 import partition_field_types
from icectl.validate import (
    CATALOGUE,
    Severity,
    ValidationResult,
    v4_rules,
    v4_spec_rules,
    validate_address,
    validate_table,
)
from unit.validate.breaking import declared_rules
from unit.validate.test_validate import JAVA_WARNINGS, CountingIO

KINDS = ["v1_unpart", "v2_part", "v3_dv"]
_copies = itertools.count()


# --------------------------------------------------------------------------- building the v4 tables


@dataclass(frozen=True)
class V4Table:
    path: Path
    root_files: tuple[str, ...]  # data files added at the root (the first removed again)
    leaf_files: tuple[str, ...]  # data files added in one new v4 leaf (the first removed by a manifest DV)
    removed: tuple[str, ...]  # files of upgraded manifests removed by a manifest DV


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
    # Upgraded manifests lose a file each (for v3_dv, one whose DV goes too: a manifest DV on a delete manifest).
    removed = [*dv_targets[:1], *[p for p in data if p not in dv_targets[:1]]][:2]
    spec = load_table(str(d)).metadata.default_spec_id  # add-files partitions a file by the current spec
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
    return V4Table(d, (first, second), tuple(leaf), tuple(removed))


def current_root(d: Path) -> str:
    doc = read_metadata(d)
    snap = next(s for s in doc["snapshots"] if s["snapshot-id"] == doc["current-snapshot-id"])
    return str(snap["root-manifest"])


def read_rows(d: Path, path: str, *, root: bool = True) -> list[TrackedFile]:
    md = load_table(str(d)).metadata
    return read_v4_manifest(Path(path).read_bytes(), partition_types=partition_field_types(md),
                            column_types=column_types(md), root=root).entries


def write_raw(d: Path, path: str, rows: list[TrackedFile], metadata: dict[str, str] | None = None) -> None:
    """``rows`` written as a v4 manifest without the writer's checks (the damage must reach the file)."""
    md = load_table(str(d)).metadata
    ptype, types = union_partition_type(md), column_types(md)
    columns = stats_columns(rows, types)
    table = encode_rows(rows, tracked_file_schema(ptype, columns, types), ptype, columns, types)
    kv = metadata or {"schema-id": str(md.current_schema_id), "format-version": "4"}
    with pq.ParquetWriter(path, table.schema, compression="gzip", store_schema=False) as w:
        w.write_table(table)
        w.add_key_value_metadata(kv)


def edit_root(d: Path, edit: Callable[[list[TrackedFile]], list[TrackedFile]]) -> str:
    root = current_root(d)
    write_raw(d, root, edit(read_rows(d, root)))
    return root


def _is_root_file(status: EntryStatus) -> Callable[[TrackedFile], bool]:
    return lambda e: e.content_type == ContentType.DATA and e.status == status


def _is_modified_leaf(e: TrackedFile) -> bool:
    return e.is_manifest and e.status == EntryStatus.MODIFIED


def _is_v4_leaf(e: TrackedFile) -> bool:
    return e.is_manifest and e.manifest_info is not None and e.manifest_info.format_version == 4


def _in_root(pick: Callable[[TrackedFile], bool], change: Callable[[TrackedFile], TrackedFile]) -> Break:
    def breaks(t: V4Table) -> str:
        def apply(rows: list[TrackedFile]) -> list[TrackedFile]:
            i = next(i for i, e in enumerate(rows) if pick(e))
            return [*rows[:i], change(rows[i]), *rows[i + 1:]]
        return edit_root(t.path, apply)
    return breaks


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
    assert sum(1 for s in md.snapshots if s.root_manifest) >= 5  # upgrade (per branch head) and five commits
    tree = Counter((e.content_type, e.status) for e in read_rows(t.path, current_root(t.path)))
    assert tree[(ContentType.DATA, EntryStatus.EXISTING)] == 1
    assert tree[(ContentType.DATA_MANIFEST, EntryStatus.MODIFIED)] >= 1  # this commit's manifest DVs
    live = {r["file_path"] for r in file_rows(table).rows}
    assert t.root_files[1] in live and t.leaf_files[1] in live
    assert not {t.root_files[0], t.leaf_files[0], *t.removed} & live
    for deep, all_snapshots in ((False, False), (True, False), (False, True), (True, True)):
        result = validate_table(table, deep=deep, all_snapshots=all_snapshots)
        assert _errors(result) == [], (deep, all_snapshots, _errors(result))
        warnings = {f.rule for f in result.findings if f.severity == Severity.WARNING}
        assert warnings <= JAVA_WARNINGS, warnings
        assert result.snapshots == (len(md.snapshots) if all_snapshots else 1) and not result.notes
        print(f"v4 {kind} deep={deep} all={all_snapshots}: {result.summary}")


def test_all_snapshots_reads_each_root(v4_tables: dict[str, V4Table]) -> None:
    io = CountingIO()
    table = load_table(str(v4_tables["v2_part"].path), io=io)
    result = validate_table(table, all_snapshots=True)
    assert result.errors == 0 and result.snapshots == len(table.metadata.snapshots)
    roots = [p for p in io.reads if "/root-" in p]
    assert len(roots) == sum(1 for s in table.metadata.snapshots if s.root_manifest)


def test_deep_skips_files_manifest_dvs_removed(spark_tables: Any, tmp_path: Path) -> None:
    """A file a manifest DV removed is still a row of its leaf; once the file is gone (as expire
    would delete it), --deep on the current snapshot has nothing to say, on an older one it does."""
    t = build_v4(spark_tables["v1_unpart"].location, tmp_path / "t")
    gone = [*t.removed, t.leaf_files[0]]
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


def _proposal_root(t: V4Table) -> str:
    """The root rewritten in icectl's earlier proposal layout (Avro content_entry) with the same content."""
    from icectl.codec.v4_proposal import write_v4_manifest as write_proposal
    from icectl.spec.manifest import ManifestEntryStatus
    from icectl.spec.v4_proposal import ContentEntry, ManifestStats, VersionInfo
    from icectl.spec.v4_proposal import ContentType as ProposalType

    md = load_table(str(t.path)).metadata
    root = current_root(t.path)
    rows = []
    for e in read_rows(t.path, root):
        if not e.is_live:
            continue
        tr = e.tracking
        vi = VersionInfo(ManifestEntryStatus.EXISTING, tr.snapshot_id, tr.sequence_number, tr.file_sequence_number)
        if e.is_manifest:
            i = e.manifest_info
            assert (i is not None and i.dv is None) or True
            rows.append(ContentEntry(ProposalType(int(e.content_type)), e.location, e.file_format, e.spec_id or 0,
                                     e.record_count, vi, file_size_in_bytes=e.file_size_in_bytes,
                                     manifest_stats=ManifestStats(
                                         i.added_files_count, i.existing_files_count, i.deleted_files_count,
                                         i.added_rows_count, i.existing_rows_count, i.deleted_rows_count,
                                         i.min_sequence_number),
                                     first_row_id=tr.first_row_id))
        else:
            rows.append(ContentEntry(ProposalType.DATA, e.location, e.file_format, e.spec_id or 0, e.record_count, vi,
                                     partition=e.partition, file_size_in_bytes=e.file_size_in_bytes,
                                     first_row_id=tr.first_row_id))
    Path(root).write_bytes(write_proposal(rows, content="root", partition_type=md.unified_partition_type()).data)
    return root


def _no_field_id(t: V4Table) -> str:
    root = current_root(t.path)
    table = pq.read_table(root)
    i = table.schema.get_field_index("location")
    table = table.cast(table.schema.set(i, pa.field("location", pa.string(), False)))
    pq.write_table(table, root, store_schema=False)
    return root


def _kv(key: str, value: str) -> Break:
    def breaks(t: V4Table) -> str:
        root = current_root(t.path)
        md = load_table(str(t.path)).metadata
        kv = {"schema-id": str(md.current_schema_id), "format-version": "4", key: value}
        write_raw(t.path, root, read_rows(t.path, root), kv)
        return root
    return breaks


def _tracking(**changes: Any) -> Callable[[TrackedFile], TrackedFile]:
    return lambda e: e.with_tracking(**changes)


def _info(**changes: Any) -> Callable[[TrackedFile], TrackedFile]:
    def change(e: TrackedFile) -> TrackedFile:
        assert e.manifest_info is not None
        return dataclasses.replace(e, manifest_info=dataclasses.replace(e.manifest_info, **changes))
    return change


def _duplicate_root_file(t: V4Table) -> str:
    def apply(rows: list[TrackedFile]) -> list[TrackedFile]:
        e = next(e for e in rows if _is_root_file(EntryStatus.EXISTING)(e))
        return [*rows, e.with_tracking(first_row_id=10**9)]
    return edit_root(t.path, apply)


def _overlap_root_file(t: V4Table) -> str:
    """A second root-level file whose row ids overlap the first one's."""
    def apply(rows: list[TrackedFile]) -> list[TrackedFile]:
        e = next(e for e in rows if _is_root_file(EntryStatus.EXISTING)(e))
        twin = dataclasses.replace(e, location=e.location.replace(".parquet", "-twin.parquet"))
        shutil.copyfile(e.location, twin.location)
        return [*rows, twin]
    return edit_root(t.path, apply)


def _dv_past_the_leaf(t: V4Table) -> str:
    def apply(rows: list[TrackedFile]) -> list[TrackedFile]:
        i = next(i for i, e in enumerate(rows) if _is_v4_leaf(e))
        e = rows[i]
        assert e.manifest_info is not None
        changed = dataclasses.replace(e, manifest_info=dataclasses.replace(e.manifest_info,
                                                                           dv=encode_mumbling([0, 500])))
        return [*rows[:i], changed, *rows[i + 1:]]
    return edit_root(t.path, apply)


def _delete_added_in_v4(t: V4Table) -> str:
    """A row of a carried-over delete manifest claims to be ADDED by the current (v4) snapshot."""
    root = current_root(t.path)
    head = load_table(str(t.path)).metadata.current_snapshot_id
    rows = read_rows(t.path, root)
    e = next(e for e in rows if e.content_type == ContentType.DELETE_MANIFEST and e.is_live)

    def edit(_schema: dict[str, Any], _meta: dict[str, bytes], records: list[dict[str, Any]]) -> None:
        r = next(r for r in records if r["status"] != 2)
        r.update(status=1, snapshot_id=head)
    size = edit_avro(e.location, edit)
    write_raw(t.path, root, [dataclasses.replace(r, file_size_in_bytes=size) if r.location == e.location else r
                             for r in rows])
    return root


CASES: list[Case] = [
    Case("v4.snapshot-manifest-key", _both_keys),
    Case("v4.snapshot-manifest-key", _back_to_a_list, label="list-after-root"),
    Case("v4.root-exists", _delete_root),
    Case("v4.spec-layout", _proposal_root),
    Case("v4.spec-readable", _no_field_id),
    Case("v4.spec-readable", lambda t: (Path(next(e.location for e in read_rows(t.path, current_root(t.path))
                                                  if _is_v4_leaf(e))).unlink(), current_root(t.path))[1],
         label="missing-leaf"),
    Case("v4.spec-kv-metadata", _kv("schema-id", "99")),
    Case("v4.spec-kv-metadata", _kv("format-version", "3"), label="format-version"),
    Case("v4.spec-content-types", _in_root(_is_root_file(EntryStatus.EXISTING),
                                           lambda e: dataclasses.replace(e, content_type=ContentType.EQUALITY_DELETES,
                                                                         equality_ids=(1,)))),
    Case("v4.spec-manifest-info", _in_root(_is_v4_leaf, _info(format_version=7))),
    Case("v4.spec-manifest-info", _in_root(_is_v4_leaf, _info(existing_files_count=99)), label="counts"),
    Case("v4.spec-manifest-info", _in_root(_is_v4_leaf, lambda e: dataclasses.replace(e, manifest_info=None)),
         label="missing"),
    Case("v4.spec-tracking", _in_root(_is_root_file(EntryStatus.EXISTING), _tracking(snapshot_id=None))),
    Case("v4.spec-tracking", _in_root(_is_v4_leaf, _tracking(file_sequence_number=0)), label="manifest-seq"),
    Case("v4.spec-first-row-id", _in_root(_is_root_file(EntryStatus.EXISTING), _tracking(first_row_id=None))),
    Case("v4.spec-first-row-id", _overlap_root_file, label="overlap"),
    Case("v4.spec-colocated-dv", _in_root(_is_root_file(EntryStatus.EXISTING), lambda e: dataclasses.replace(
        e, deletion_vector=DeletionVector("/nowhere.puffin", 4, 40, e.record_count + 1)))),
    Case("v4.spec-manifest-dv", _in_root(_is_modified_leaf, _tracking(modified_snapshot_id=1))),
    Case("v4.spec-manifest-dv", _dv_past_the_leaf, label="past-the-leaf"),
    Case("v4.spec-manifest-dv", _in_root(_is_modified_leaf, _tracking(replaced_positions=encode_mumbling([999]))),
         label="positions-outside-dv"),
    Case("v4.spec-one-live-entry", _duplicate_root_file),
    Case("v4.spec-no-new-deletes", _delete_added_in_v4, implied=frozenset({"manifest.added-by-snapshot"})),
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
    declared = declared_rules(v4_rules) | declared_rules(v4_spec_rules)
    assert declared and declared - {c.rule for c in CASES} == set()
