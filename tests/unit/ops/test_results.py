"""icectl.ops.results: each command's typed result writes the JSON document the command printed
before results were typed (issue 12), key for key, in order, value for value.

Two kinds of proof: the key lists each class declares are checked against the documents recorded
with the old code (tests/cli/data/json_contract_before.json); and add-files, remove-files, upgrade
and compact, which still build their document as a dict, run for real here and their dict is
rebuilt as the typed class, whose ``to_json()`` must give back exactly that dict.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.ops.compact.manifests import compact
from icectl.ops.compact.plan import CompactOptions
from icectl.ops.compact.result import CompactResult
from icectl.ops.create.result import CreateResult, NamespaceCreateResult
from icectl.ops.expire.result import ExpireCutoff, ExpireResult
from icectl.ops.files.add_files import AddFilesResult, add_files
from icectl.ops.files.remove_files import RemoveFilesResult, remove_files
from icectl.ops.inspect.result import TableOverview
from icectl.ops.lifecycle.upgrade import UpgradeResult, upgrade
from icectl.results import UNSET, CommandResult, Committed, DryRun, Part, TableFailure, Unset, document_keys
from icectl.table import load_table

BEFORE = Path(__file__).parents[2] / "cli" / "data" / "json_contract_before.json"

# The contract, written out: every key each command's document can carry, in order.
KEYS: dict[type, list[str]] = {
    CreateResult: ["view", "table", "dry_run", "location", "format_version", "schema", "partition_spec",
                   "sort_order", "properties", "would_write", "metadata_location"],
    AddFilesResult: ["view", "table", "dry_run", "branch", "spec_id", "added_data_files", "added_records",
                     "added_files_size", "files", "created_branch", "name_mapping", "layout", "would_write",
                     "would_delete", "snapshot_id", "metadata_location", "commit_attempts", "written"],
    RemoveFilesResult: ["view", "table", "dry_run", "branch", "removed_data_files", "removed_records",
                        "removed_delete_files", "files", "committed", "would_write", "would_delete", "snapshot_id",
                        "metadata_location", "commit_attempts", "written"],
    UpgradeResult: ["view", "table", "dry_run", "from_version", "to_version", "branches", "warning", "committed",
                    "would_write", "would_delete", "written", "metadata_location", "commit_attempts", "seconds"],
    CompactResult: ["view", "table", "branch", "dry_run", "format_version", "base_snapshot_id", "target_size_bytes",
                    "manifests_replaced", "manifests_created", "manifests_kept", "entries_processed",
                    "root_files_flushed", "manifest_dvs_applied", "root_deleted_entries_dropped", "groups",
                    "would_write", "would_delete", "snapshot_id", "sequence_number", "metadata_location",
                    "root_manifest", "commit_attempts", "reapplied_on", "replanned"],
    TableOverview: ["view", "table", "metadata_location", "format_version", "table_uuid", "location", "last_updated",
                    "last_sequence_number", "current_snapshot_id", "current_snapshot", "snapshot_count", "refs",
                    "schema", "partition_spec", "sort_order", "properties", "totals", "next_row_id"],
    NamespaceCreateResult: ["message", "namespace", "catalog", "created"],
}
VIEWS = {"create": CreateResult, "add_files": AddFilesResult, "remove_files": RemoveFilesResult,
         "upgrade": UpgradeResult, "compact": CompactResult, "table": TableOverview}


def _recorded() -> list[tuple[str, dict[str, Any]]]:
    """(scenario, document) of every recorded document (the lines of --all runs one by one)."""
    out = []
    for name, run in json.loads(BEFORE.read_text()).items():
        docs = run["json"] if isinstance(run["json"], list) else [run["json"]]
        out += [(name, d) for d in docs if d is not None]
    return out


@pytest.mark.parametrize("cls", list(KEYS), ids=lambda c: c.__name__)
def test_declared_keys(cls: type) -> None:
    assert document_keys(cls) == KEYS[cls]


def test_recorded_documents_follow_the_declared_order() -> None:
    """Each document recorded before typed results has its keys in its class's declared order."""
    checked = set()
    for name, doc in _recorded():
        cls = NamespaceCreateResult if "message" in doc else VIEWS.get(doc.get("view", ""))
        if cls is None or set(doc) == {"view", "table", "error"}:
            continue  # rows views and --all failures: the contract test covers them
        keys = document_keys(cls)
        assert set(doc) <= set(keys), (name, set(doc) - set(keys))
        assert [k for k in keys if k in doc] == list(doc), name
        checked.add(cls)
    assert checked == set(KEYS)


# --------------------------------------------------------------------------- rebuilding a dict


def from_doc(cls: type, doc: dict[str, Any]) -> Any:
    """The typed result holding ``doc``'s values (a key the class lacks fails); the keys of a shared
    part (DryRun, Committed) go to that part."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    in_parts: set[str] = set()
    for f in dataclasses.fields(cls):
        if f.metadata.get("flatten"):
            part = type(f.default_factory())  # type: ignore[misc]
            keys = set(document_keys(part))
            kwargs[f.name] = from_doc(part, {k: v for k, v in doc.items() if k in keys})
            in_parts |= keys
    by_key = {f.metadata.get("key", f.name): f for f in dataclasses.fields(cls)
              if f.metadata.get("json", True) and not f.metadata.get("flatten")}
    kwargs |= {by_key[k].name: _build(hints[by_key[k].name], v) for k, v in doc.items()
               if k != "view" and k not in in_parts}
    return cls(**kwargs)


def _build(tp: Any, value: Any) -> Any:
    if value is None or isinstance(tp, typing.TypeVar):
        return value
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        real = [a for a in typing.get_args(tp) if a not in (Unset, type(None))]
        return _build(real[0], value)
    if typing.get_origin(tp) is list:
        return [_build(typing.get_args(tp)[0], v) for v in value]
    if isinstance(tp, type) and issubclass(tp, Part):
        return from_doc(tp, value)
    return value


def assert_typed_equals(cls: type, old: Any) -> dict[str, Any]:
    doc = old.to_json()
    typed = from_doc(cls, doc)
    assert isinstance(typed, CommandResult)
    assert list(typed.to_json().items()) == list(doc.items())  # same keys, same order, same values
    assert json.dumps(typed.to_json()) == json.dumps(doc)  # nested keys in the same order too
    return doc


# --------------------------------------------------------------------------- real runs


def _cli(wh: Path, *args: str) -> None:
    r = CliRunner().invoke(app, list(args), env={"ICECTL_WAREHOUSE": str(wh), "ICECTL_CONFIG": ""})
    assert r.exit_code == 0, r.stderr


def _parquet(path: Path, ids: list[int], cat: str) -> str:
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "cat": pa.array([cat] * len(ids))}), path)
    return str(path)


@pytest.fixture
def tables(tmp_path: Path) -> tuple[Path, list[str]]:
    wh = tmp_path / "wh"
    for name in ("t", "v4"):
        _cli(wh, "create", f"db.{name}", "--schema", "id long, cat string", "--partition-by", "cat")
    files = [_parquet(tmp_path / f"{i}.parquet", [i, i + 10], cat) for i, cat in enumerate("xyxy")]
    return wh, files


def _load(wh: Path, name: str) -> Any:
    return load_table(str(wh / "db" / name))


def test_add_files_remove_files_upgrade_compact_rebuilt(tables: tuple[Path, list[str]]) -> None:
    wh, files = tables
    t = lambda: _load(wh, "t")  # noqa: E731  (the table as it is now)
    v4 = lambda: _load(wh, "v4")  # noqa: E731
    assert_typed_equals(AddFilesResult, add_files(t(), [files[0]], dry_run=True))
    assert_typed_equals(AddFilesResult, add_files(t(), [files[0]]))
    assert_typed_equals(AddFilesResult, add_files(t(), [files[1]], branch="b1", create_branch=True))
    assert_typed_equals(AddFilesResult, add_files(t(), [files[1]]))
    assert_typed_equals(CompactResult, compact(t(), CompactOptions(), dry_run=True))
    assert_typed_equals(CompactResult, compact(t(), CompactOptions(min_manifests=50)))
    assert "snapshot_id" in assert_typed_equals(CompactResult, compact(t(), CompactOptions()))
    assert_typed_equals(UpgradeResult, upgrade(t(), 3, dry_run=True))
    assert_typed_equals(UpgradeResult, upgrade(t(), 3))
    assert_typed_equals(UpgradeResult, upgrade(t(), 3))  # already there: committed false
    for f in files[:2]:
        add_files(v4(), [f])
    assert_typed_equals(UpgradeResult, upgrade(v4(), 4, dry_run=True))
    assert assert_typed_equals(UpgradeResult, upgrade(v4(), 4))["branches"]
    assert_typed_equals(AddFilesResult, add_files(v4(), [files[2]], dry_run=True))
    assert_typed_equals(AddFilesResult, add_files(v4(), [files[2]]))
    assert "created_branch" in assert_typed_equals(
        AddFilesResult, add_files(v4(), [files[3]], branch="b2", create_branch=True))
    assert_typed_equals(RemoveFilesResult, remove_files(v4(), [files[2]], dry_run=True))
    assert_typed_equals(RemoveFilesResult, remove_files(v4(), [files[2]]))
    assert_typed_equals(RemoveFilesResult, remove_files(v4(), where=["cat=nothing-here"]))
    assert_typed_equals(RemoveFilesResult, remove_files(v4(), where=["cat=y"]))
    assert_typed_equals(CompactResult, compact(v4(), CompactOptions(), dry_run=True))
    assert "root_manifest" in assert_typed_equals(CompactResult, compact(v4(), CompactOptions()))
    assert "replanned" in assert_typed_equals(CompactResult, compact(v4(), CompactOptions()))  # nothing left


# --------------------------------------------------------------------------- expire's paths


def _expire(**kw: Any) -> ExpireResult:
    return ExpireResult(table="db.t", dry_run=kw.pop("dry_run", False), expired_snapshots=[1, 2], removed_refs=[],
                        retained_snapshot_count=1, leftover_snapshots=[], skipped_metadata=[], **kw)


HEAD = ["view", "table", "dry_run", "expired_snapshot_count", "expired_snapshots", "removed_refs",
        "retained_snapshot_count", "leftover_snapshots", "skipped_metadata"]
DELETED = [f"deleted_{c}_count" for c in ("data_files", "position_delete_files", "equality_delete_files",
                                          "manifest_files", "manifest_lists", "statistics_files")]
KEPT = ["kept_external_files_count", "kept_external_files"]
COMMITTED = ["metadata_location", "commit_attempts"]


@pytest.mark.parametrize(("result", "keys"), [
    (_expire(dry_run=True, dry=DryRun([], {}), kept_external_files=[]),
     [*HEAD, "would_write", "would_delete", *DELETED, *KEPT]),
    (_expire(), [*HEAD, *DELETED]),  # nothing to expire
    (_expire(commit=Committed("m", 1), kept_external_files=[], already_gone=0, failures=[]),
     [*HEAD, *COMMITTED, *KEPT, "already_gone", "failures", *DELETED]),
    (_expire(commit=Committed("m", 1), cleanup_skipped="why"),  # cleanup could not read the table
     [*HEAD, *COMMITTED, *DELETED, "cleanup_skipped"]),
    (_expire(commit=Committed("m", 1), deletes_refused="why"),
     [*HEAD, *COMMITTED, "deletes_refused", *DELETED]),
    (_expire(commit=Committed("m", 1), kept_external_files=[], cleanup_skipped="why"),  # lost
     [*HEAD, *COMMITTED, *KEPT, *DELETED, "cleanup_skipped"]),
], ids=["dry_run", "nothing", "done", "unreadable", "refused", "lost"])
def test_expire_keys_on_every_path(result: ExpireResult, keys: list[str]) -> None:
    """The order of the old dict on each path of expire_snapshots (derived from the code before typed results)."""
    assert list(result.to_json()) == keys


def test_expire_counts_follow_the_lists() -> None:
    doc = _expire(dry_run=True, dry=DryRun([], {}), kept_external_files=["/x", "/y"],
                  deleted={"manifest_lists": 2}).to_json()
    assert doc["expired_snapshot_count"] == 2 and doc["kept_external_files_count"] == 2
    assert [doc[k] for k in DELETED] == [0, 0, 0, 0, 2, 0]


def test_unset_is_left_out_and_none_is_null() -> None:
    doc = from_doc(CompactResult, {"table": "t", "branch": "main", "dry_run": True, "base_snapshot_id": None,
                                   "target_size_bytes": 1, "manifests_replaced": 0, "manifests_created": 0,
                                   "manifests_kept": 0, "entries_processed": 0, "groups": []}).to_json()
    assert doc["base_snapshot_id"] is None and "format_version" not in doc and "snapshot_id" not in doc
    assert UNSET is type(UNSET)() and not UNSET


def test_table_failure_has_the_run_view() -> None:
    r = TableFailure(view="compact", title="db.x: failed", table="db.x", error="boom", exit_code=4)
    assert r.to_json() == {"view": "compact", "table": "db.x", "error": "boom"} and r.exit_code == 4


def test_expire_policy_keys_come_after_every_earlier_key() -> None:
    """Issue 16's cutoff and ref_policies grow the document at its end, on the dry-run and committed paths."""
    cutoff = ExpireCutoff(expire_older_than_ms=1, expire_older_than="1970-01-01T00:00:00.001Z",
                          max_snapshot_age_ms=5, source="default", now_ms=6, min_snapshots_to_keep=1,
                          min_snapshots_to_keep_source="default", max_ref_age_ms=7, max_ref_age_source="default")
    dry = _expire(dry_run=True, dry=DryRun([], {}), kept_external_files=[], cutoff=cutoff,
                  ref_policies=[])
    assert list(dry.to_json()) == [*HEAD, "would_write", "would_delete", *DELETED, *KEPT, "cutoff", "ref_policies"]
    done = _expire(commit=Committed("m", 1), cleanup_skipped="why", cutoff=cutoff, ref_policies=[])
    assert list(done.to_json()) == [*HEAD, *COMMITTED, *DELETED, "cleanup_skipped", "cutoff", "ref_policies"]
    assert dry.to_json()["cutoff"]["source"] == "default"
