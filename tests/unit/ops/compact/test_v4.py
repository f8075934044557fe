"""`icectl compact` on format v4 (issue 7 part 4): flush root-level files into leaves, apply manifest
DVs, merge small leaves, drop DELETED entries; one `replace` commit with no net change.

The live files of every branch are tracked by the test from the operations it applied (add-files,
remove-files), and compared with what icectl reads before and after, entry for entry (sequence
numbers, row ids, partitions). The Spark-written fixtures (v2 with position deletes, branches and
evolution; v3 with DVs and row lineage) are upgraded to v4 first; Spark cannot read a v4 table
(see docs/v4.md), so Spark judges the tables before the upgrade only.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from interop.test_v4_upgrade_vs_spark import branches, live_entries
from support.fixtures import FixtureTable
from support.forge import property_change, ref_change
from support.s3 import create_bucket, s3_filesystem
from support.spark import latest_metadata_json, metadata_table
from support.v4_reader import live_data_files
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.codec.mumbling import encode_mumbling
from icectl.codec.puffin import deletion_vector_blob, write_puffin
from icectl.codec.v4_manifest import read_v4_manifest as read_spec
from icectl.codec.v4_manifest import write_v4_manifest as write_spec
from icectl.errors import CommitConflictError, ExitCode
from icectl.ops.compact.manifests import compact
from icectl.ops.compact.plan import CompactOptions
from icectl.ops.files.add_files import add_files
from icectl.ops.files.remove_files import remove_files
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.spec.snapshots import Snapshot, SnapshotRef
from icectl.spec.tracked_file import DeletionVector, EntryStatus
from icectl.spec.updates import snapshot_change
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.table.layout.root import column_types, union_partition_type
from icectl.table.scan_v4 import partition_field_types
from unit.ops.lifecycle.test_upgrade import icectl, parquet

LEAF_TYPES = {"DATA_MANIFEST", "DELETE_MANIFEST"}


def files_of(d: Path | str, ref: str = "main") -> set[tuple[str, int, str | None]]:
    """(path, content, referenced data file) of every live data and delete file of a ref, as icectl
    reads it (DVs share Puffin files: the referenced file tells them apart)."""
    rows = icectl("inspect", "entries", str(d), "--ref", ref)["rows"]
    return {(r["data_file"]["file_path"], r["data_file"]["content"], r["data_file"].get("referenced_data_file"))
            for r in rows if r["status"] != 2}


def tree_rows(d: Path | str, ref: str = "main") -> list[dict[str, Any]]:
    return icectl("inspect", "tree", str(d), "--ref", ref)["rows"]


def only_leaves(d: Path | str, ref: str = "main") -> list[dict[str, Any]]:
    """The root of ``ref``: asserts it holds only live leaves; returns them."""
    rows = tree_rows(d, ref)
    assert {r["content_type"] for r in rows} <= LEAF_TYPES, rows
    assert all(r["status"] != "DELETED" for r in rows), rows
    return rows


def metadata_dir(d: Path | str) -> set[str]:
    return {p.name for p in (Path(d) / "metadata").iterdir()}


def set_property(d: Path | str, key: str, value: str) -> None:
    commit(load_table(str(d)), lambda md: property_change({key: value}))


def live_entries_of(d: Path | str, ref: str = "main") -> Counter[tuple[Any, ...]]:
    """Every live entry of a ref: path, content, snapshot id, sequence numbers, spec, partition,
    record count, first_row_id, DV reference."""
    return live_entries(SimpleNamespace(location=Path(d)), ref)  # type: ignore[arg-type]


def validate_errors(d: Path | str) -> list[dict[str, Any]]:
    """Error findings of `icectl validate` (v4 manifest rules are another part of the issue)."""
    r = CliRunner().invoke(app, ["validate", str(d), "--json"])
    assert r.exit_code in (ExitCode.OK, ExitCode.FINDINGS), (r.stdout, r.stderr)
    return [row for row in json.loads(r.stdout)["rows"] if row["severity"] == "error"]


@pytest.fixture
def v4(tmp_path: Path) -> tuple[Path, list[str]]:
    """A v4 table (upgraded from v2): three leaves of one file each; leaf threshold 2 files."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
           "--format-version", "2", "--property", f"{V4_ROOT_MAX_ADDED_FILES.name}=2")
    paths = [parquet(tmp_path / f"f{day}.parquet", range(day * 10, day * 10 + 5), day) for day in (1, 2, 3)]
    for p in paths:
        icectl("add-files", str(d), p)
    icectl("upgrade", str(d), "--to", "4", "--yes")
    return d, paths


def _files(tmp_path: Path, n: int, start: int) -> list[str]:
    return [parquet(tmp_path / f"g{i}.parquet", range(i * 10, i * 10 + 3), 1 + i % 3) for i in range(start, start + n)]


# --------------------------------------------------------------------------- without Spark


def test_flush_apply_dvs_drop_deleted_and_noop(v4: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, paths = v4
    a1, a2 = _files(tmp_path, 2, 10)
    leaf = _files(tmp_path, 3, 20)
    icectl("add-files", str(d), a1)  # root-level
    icectl("add-files", str(d), *leaf)  # a new leaf
    icectl("add-files", str(d), a2)  # root-level
    icectl("remove-files", str(d), leaf[0])  # a manifest DV on the new leaf
    icectl("remove-files", str(d), a1, leaf[1], paths[0])  # DELETED root entry, DV union, DV on an old leaf
    model = {(p, 0, None) for p in [*paths[1:], a2, leaf[2]]}
    assert files_of(d) == model
    by_type = Counter(f"{r['content_type']}/{r['status']}" for r in tree_rows(d))
    # The spec's manifest DVs: the two leaves that lost rows in the last commit are MODIFIED root entries.
    assert by_type["DATA/DELETED"] == 1 and by_type["DATA_MANIFEST/MODIFIED"] == 2
    before = live_entries_of(d)
    parent = load_table(str(d)).metadata.current_snapshot()
    md_files = metadata_dir(d)

    plan = icectl("compact", str(d), "--dry-run")
    assert metadata_dir(d) == md_files  # the dry run wrote nothing
    assert plan["root_files_flushed"] == 1 and plan["manifest_dvs_applied"] == 2 and plan["manifests_created"] == 1
    assert plan["root_deleted_entries_dropped"] == 1 and plan["would_delete"] == []
    (group,) = plan["groups"]
    assert group["flushed"] == [a2] and group["dv_rows_dropped"] == 3 and group["live_entries"] == len(model)
    assert [w["path"].rsplit("/", 1)[-1].split("-")[0] for w in plan["would_write"][1:2]] == ["root"]

    out = icectl("compact", str(d))
    assert out["snapshot_id"] and out["manifests_created"] == 1 and out["manifests_replaced"] == 4
    assert files_of(d) == model and live_entries_of(d) == before
    (leaf_row,) = only_leaves(d)
    assert leaf_row["status"] == "ADDED" and leaf_row["existing_files"] == len(model) and leaf_row["added_files"] == 0
    md = load_table(str(d)).metadata
    snap = md.current_snapshot()
    assert snap.parent_snapshot_id == parent.snapshot_id and snap.root_manifest and snap.manifest_list is None
    s = snap.summary
    assert (s["operation"], s["manifests-created"], s["manifests-replaced"], s["entries-processed"]) == \
        ("replace", "1", "4", str(len(model)))
    assert {k: v for k, v in s.items() if k.startswith("total-")} == \
        {k: v for k, v in parent.summary.items() if k.startswith("total-")}
    assert md.next_row_id == load_table(str(d)).metadata.next_row_id and snap.added_rows == 0
    # New files: one Parquet leaf (<uuid>-m0.parquet) and one root; nothing else rewritten, nothing deleted.
    new = metadata_dir(d) - md_files
    assert len([n for n in new if n.endswith(".parquet")]) == 2 and md_files <= metadata_dir(d)
    assert validate_errors(d) == []
    # A second run is a no-op.
    files_now = metadata_dir(d)
    again = icectl("compact", str(d))
    assert "snapshot_id" not in again and again["manifests_replaced"] == 0 and metadata_dir(d) == files_now


def test_small_target_rolls_and_keeps_full_leaves(tmp_path: Path) -> None:
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
           "--format-version", "3", "--property", f"{V4_ROOT_MAX_ADDED_FILES.name}=10")
    icectl("add-files", str(d), *_files(tmp_path, 3, 0))
    icectl("upgrade", str(d), "--to", "4", "--yes")
    for start in range(3, 603, 20):  # 30 leaves of 20 files, each under half the target
        icectl("add-files", str(d), *_files(tmp_path, 20, start))
    icectl("add-files", str(d), *_files(tmp_path, 4, 603))  # root-level
    before, model = live_entries_of(d), files_of(d)
    assert len(model) == 607
    # A Parquet leaf of 20 files is ~10 KB (its footer dominates), the upgraded v3 manifest ~7 KB:
    # at 24 KiB every one is under half the target, so all 31 are merged (the v3 one into Parquet).
    target = 24 * 1024
    out = icectl("compact", str(d), "--target-size", "24KiB")
    leaves = only_leaves(d)
    assert live_entries_of(d) == before
    assert out["manifests_replaced"] == 31 and out["root_files_flushed"] == 4 and out["manifests_kept"] == 0
    new = [r for r in leaves if r["status"] == "ADDED"]
    # ~10 bytes per row once the ~10 KB footer is paid: the 607 rows fit one leaf of the target.
    assert len(new) == out["manifests_created"] == 1 and len(leaves) == len(new)
    sizes = [(Path(r["location"]).stat().st_size, r["existing_files"]) for r in new]
    assert all(0.6 * target <= s <= 1.15 * target for s, _ in sizes[:-1]) and sizes[-1][0] <= 1.15 * target, sizes
    # As many leaves as the target implies: the full ones hold the same count, the last the rest.
    per_leaf = sizes[0][1]
    assert [n for _, n in sizes] == [per_leaf] * (len(sizes) - 1) + [607 - per_leaf * (len(sizes) - 1)]
    assert len(sizes) == -(-607 // per_leaf)
    assert icectl("compact", str(d), "--target-size", "24KiB")["manifests_replaced"] == 0
    # Flushing a few more files rewrites the small leaves only; full leaves are kept as they are.
    icectl("add-files", str(d), *_files(tmp_path, 2, 700))
    out = icectl("compact", str(d), "--target-size", "24KiB")
    small = [r["location"] for r in leaves if Path(r["location"]).stat().st_size < 0.5 * target]
    assert out["manifests_replaced"] == len(small) and out["manifests_kept"] == len(leaves) - len(small)
    assert {r["location"] for r in only_leaves(d)} >= {r["location"] for r in leaves} - set(small)
    assert len(files_of(d)) == 609


def test_manifest_dv_and_a_replaced_modified_root_file_with_a_colocated_dv(v4: tuple[Path, list[str]],
                                                                          tmp_path: Path) -> None:
    """A root written by another v4 writer: a leaf with a manifest DV (MODIFIED, Mumbling) and a root
    data file whose DV changed (REPLACED old row + MODIFIED new row with a colocated DV in a Puffin
    file). Compaction applies the manifest DV, keeps the file with its DV in the root and drops the
    REPLACED row."""
    d, paths = v4
    extra = parquet(tmp_path / "r.parquet", range(700, 703), 3)
    icectl("add-files", str(d), extra)  # a root-level data file
    t = load_table(str(d))
    md = t.metadata
    head = md.current_snapshot()
    assert head is not None and head.root_manifest
    leaf_of = {r["data_file"]["file_path"]: r["manifest_path"] for r in icectl("inspect", "entries", str(d))["rows"]}
    root = read_spec(Path(head.root_manifest).read_bytes(), partition_types=partition_field_types(md),
                     column_types=column_types(md), root=True)
    puffin = write_puffin([deletion_vector_blob(extra, [0, 1])])
    pf = tmp_path / "dvs.puffin"
    pf.write_bytes(puffin.data)
    (blob,) = puffin.metadata.blobs
    sid, seq = head.snapshot_id + 1, md.last_sequence_number + 1
    rows = []
    for e in root.entries:
        if e.location == leaf_of[paths[2]]:
            assert e.manifest_info is not None
            e = dataclasses.replace(e.with_tracking(status=EntryStatus.MODIFIED, modified_snapshot_id=sid,
                                                    deleted_positions=encode_mumbling([0])),
                                    manifest_info=dataclasses.replace(e.manifest_info, dv=encode_mumbling([0])))
            rows.append(e)
        elif e.location == extra:
            rows.append(e.with_tracking(status=EntryStatus.REPLACED, modified_snapshot_id=sid))
            rows.append(dataclasses.replace(
                e.with_tracking(status=EntryStatus.MODIFIED, modified_snapshot_id=sid),
                deletion_vector=DeletionVector(str(pf), blob.offset, blob.length, 2)))
        else:
            rows.append(e.with_tracking(status=EntryStatus.EXISTING))
    root_path = d / "metadata" / f"root-{sid}-dvs.parquet"
    root_path.write_bytes(write_spec(rows, root=True, partition_type=union_partition_type(md),
                                     column_types=column_types(md), schema_id=md.current_schema_id).data)
    snap = Snapshot(sid, head.timestamp_ms + 1, head.snapshot_id, seq, root_manifest=str(root_path),
                    summary={"operation": "delete"}, schema_id=0, first_row_id=md.next_row_id, added_rows=0)
    commit(t, lambda base: snapshot_change(base, snap))
    model = {(paths[0], 0, None), (paths[1], 0, None), (extra, 0, None), (str(pf), 1, extra)}
    assert files_of(d) == model
    assert validate_errors(d) == []
    # The independent reader (written from the spec) sees the same: the DV applies to its own row.
    hint = (d / "metadata" / "version-hint.text").read_text().strip()
    independent = live_data_files(str(d / "metadata" / f"v{hint}.metadata.json"))
    assert independent == {paths[0]: set(), paths[1]: set(), extra: {0, 1}}
    before = live_entries_of(d)
    out = icectl("compact", str(d))
    assert out["manifest_dvs_applied"] == 1 and out["root_files_flushed"] == 0 and out["manifests_created"] == 1
    assert files_of(d) == model and live_entries_of(d) == before  # DV offset and size included
    by_type = Counter(f"{r['content_type']}/{r['status']}" for r in tree_rows(d))
    assert by_type == {"DATA_MANIFEST/ADDED": 1, "DATA/EXISTING": 1}, by_type  # REPLACED dropped, DV kept
    (row,) = [r for r in tree_rows(d) if r["content_type"] == "DATA"]
    assert row["referenced_file"] == str(pf) and row["dv_cardinality"] == 2
    assert validate_errors(d) == []


def test_options_filters_and_refusals(v4: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, _ = v4
    icectl("add-files", str(d), *_files(tmp_path, 1, 10))
    assert icectl("compact", str(d), "--content", "deletes", "--dry-run")["groups"] == []
    r = icectl("compact", str(d), "--min-manifests", "5", "--dry-run")
    assert r["manifests_replaced"] == 0 and "fewer than --min-manifests 5" in r["groups"][0]["reason"]
    assert r["would_write"] == []
    icectl("compact", str(d), "--spec-id", "7", expect=ExitCode.NOT_FOUND)
    icectl("compact", str(d), "--sort-by", "nope", expect=ExitCode.USAGE)
    assert icectl("compact", str(d), "--sort-by", "ts_day", "--dry-run")["groups"][0]["sort_by"] == ["ts_day"]
    icectl("compact", str(d), "--branch", "nope", expect=ExitCode.NOT_FOUND)
    t = load_table(str(d))
    head = t.metadata.current_snapshot_id
    commit(t, lambda md: ref_change("v1", SnapshotRef(head, "tag")))  # type: ignore[arg-type]
    icectl("compact", str(d), "--branch", "v1", expect=ExitCode.REFUSED)  # a tag: refused, as by every writer
    out = icectl("compact", str(d), "--spec-id", "0", "--content", "data")
    assert out["manifests_created"] == 1 and out["root_files_flushed"] == 1
    only_leaves(d)


def test_branches_are_compacted_apart(v4: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, paths = v4
    t = load_table(str(d))
    head = t.metadata.current_snapshot_id
    commit(t, lambda md: ref_change("dev", SnapshotRef(head, "branch")))  # type: ignore[arg-type]
    (dev_file,) = _files(tmp_path, 1, 40)
    icectl("add-files", str(d), dev_file, "--branch", "dev")
    icectl("remove-files", str(d), paths[1], "--branch", "dev")
    main_before, dev_before = live_entries_of(d), live_entries_of(d, "dev")
    main_root = tree_rows(d)
    out = icectl("compact", str(d), "--branch", "dev")
    assert out["branch"] == "dev" and out["root_files_flushed"] == 1 and out["manifest_dvs_applied"] == 1
    assert live_entries_of(d, "dev") == dev_before and live_entries_of(d) == main_before
    assert tree_rows(d) == main_root  # main untouched
    only_leaves(d, "dev")
    assert files_of(d, "dev") == {(paths[0], 0, None), (paths[2], 0, None), (dev_file, 0, None)}


def test_concurrent_append_is_reapplied(v4: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, paths = v4
    (a,) = _files(tmp_path, 1, 10)
    icectl("add-files", str(d), a)
    (b,) = _files(tmp_path, 1, 11)

    def other_writer(plan: Any) -> None:
        add_files(load_table(str(d)), [b])

    r = compact(load_table(str(d)), CompactOptions(), on_planned=other_writer)
    t = load_table(str(d))
    snap = t.metadata.current_snapshot()
    assert r.data["reapplied_on"] == [snap.parent_snapshot_id] and r.data["commit_attempts"] == 1
    rows = tree_rows(d)
    assert [(x["content_type"], x["status"]) for x in rows] == [("DATA_MANIFEST", "ADDED"), ("DATA", "EXISTING")]
    assert rows[1]["location"] == b  # the other writer's file stays where it was written
    assert files_of(d) == {(p, 0, None) for p in [*paths, a, b]}
    assert snap.summary["total-data-files"] == "5"


def test_concurrent_removal_forces_a_new_plan_then_gives_up(v4: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, paths = v4
    icectl("add-files", str(d), *_files(tmp_path, 1, 10))
    calls: list[int] = []

    def remover(plan: Any) -> None:  # a file inside a leaf being replaced goes: our leaf would resurrect it
        calls.append(1)
        if len(calls) == 1:
            remove_files(load_table(str(d)), [paths[0]])

    r = compact(load_table(str(d)), CompactOptions(), on_planned=remover)
    assert r.data["replanned"] is True and len(calls) == 2
    assert (paths[0], 0, None) not in files_of(d) and len(files_of(d)) == 3
    only_leaves(d)

    d2 = tmp_path / "t2"
    shutil.copytree(d, d2)  # absolute paths inside: only used as data files, the copy's own metadata differs
    rounds: list[int] = []
    src = iter(_files(tmp_path, 4, 50))

    def relentless(plan: Any) -> None:
        rounds.append(1)
        live = sorted(p for p, _, _ in files_of(d))
        remove_files(load_table(str(d)), [live[0]])
        add_files(load_table(str(d)), [next(src)])  # so the next plan has work again

    icectl("add-files", str(d), next(src))
    with pytest.raises(CommitConflictError) as info:
        compact(load_table(str(d)), CompactOptions(), on_planned=relentless)
    assert info.value.exit_code == ExitCode.CONFLICT and len(rounds) == 2
    # Every leaf and root in the metadata directory is one a snapshot lists: nothing of ours is left.
    t = load_table(str(d))
    listed = set()
    for s in t.metadata.snapshots:
        if s.root_manifest:
            listed.add(Path(s.root_manifest).name)
            listed |= {Path(r["location"]).name for r in icectl("inspect", "tree", str(d), "--snapshot",
                                                                 str(s.snapshot_id))["rows"]}
        else:
            listed.add(Path(s.manifest_list).name)
            listed |= {Path(r["location"]).name for r in icectl("inspect", "tree", str(d), "--snapshot",
                                                                 str(s.snapshot_id))["rows"]}
    assert {f for f in metadata_dir(d) if f.endswith(".avro")} <= listed


def test_json_is_one_document(v4: tuple[Path, list[str]]) -> None:
    d, _ = v4
    out = icectl("compact", str(d), "--dry-run")
    assert json.loads(json.dumps(out))["format_version"] == 4
    assert {"manifests_replaced", "manifests_created", "manifests_kept", "entries_processed", "groups",
            "would_write", "would_delete"} <= out.keys()


def test_compact_on_s3(s3_env: str, tmp_path: Path) -> None:
    create_bucket(s3_env, "wh-compact-v4")
    fs = s3_filesystem(s3_env)
    paths = []
    for i, region in enumerate(["eu", "us", "eu", "ap", "us", "eu", "us"]):
        local = tmp_path / f"p{i}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(i * 10, i * 10 + 4), pa.int64()), "region": [region] * 4}),
                       local)
        fs.put(str(local), f"wh-compact-v4/incoming/p{i}.parquet")
        paths.append(f"s3://wh-compact-v4/incoming/p{i}.parquet")
    cfg = tmp_path / "icectl.toml"
    cfg.write_text(f'[catalog.lake]\ntype = "hadoop"\nwarehouse = "s3://wh-compact-v4/wh"\n'
                   f'[s3]\nendpoint = "{s3_env}"\n')

    def run(*args: str) -> dict[str, Any]:
        r = CliRunner().invoke(app, ["--config", str(cfg), *args, "--json"])
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)

    run("create", "lake.db.ev", "--schema", "id long, region string", "--partition-by", "region",
        "--format-version", "2", "--property", f"{V4_ROOT_MAX_ADDED_FILES.name}=2")
    run("add-files", "lake.db.ev", paths[0])
    run("upgrade", "lake.db.ev", "--to", "4", "--yes")
    run("add-files", "lake.db.ev", paths[1])  # root-level
    run("add-files", "lake.db.ev", *paths[2:5])  # a leaf
    run("add-files", "lake.db.ev", paths[5], paths[6])  # root-level
    run("remove-files", "lake.db.ev", paths[2], paths[5])  # manifest DV, DELETED root entry
    expected = {p for i, p in enumerate(paths) if i not in (2, 5)}
    out = run("compact", "lake.db.ev")
    assert out["root_files_flushed"] == 2 and out["manifest_dvs_applied"] == 1 and out["manifests_created"] == 1
    assert {r["file_path"] for r in run("inspect", "files", "lake.db.ev")["rows"]} == expected
    rows = run("inspect", "tree", "lake.db.ev")["rows"]
    assert [(r["content_type"], r["status"]) for r in rows] == [("DATA_MANIFEST", "ADDED")]
    assert rows[0]["location"].startswith("s3://wh-compact-v4/wh/db/ev/metadata/")
    assert fs.exists(rows[0]["location"].removeprefix("s3://"))
    assert "snapshot_id" not in run("compact", "lake.db.ev")


# --------------------------------------------------------------------------- Spark fixtures


def _copy_current_spec_files(t: FixtureTable, dest: Path, n: int) -> list[str]:
    """``n`` copies of a live data file of the current spec (same schema, one partition each)."""
    spec = latest_metadata_json(t.location)["default-spec-id"]
    rows = icectl("inspect", "entries", str(t.location))["rows"]
    src = sorted(r["data_file"]["file_path"] for r in rows
                 if r["status"] != 2 and r["data_file"]["content"] == 0 and r["data_file"]["spec_id"] == spec)[0]
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = dest / f"copy-{i}.parquet"
        shutil.copyfile(src.removeprefix("file:"), p)
        out.append(str(p))
    return out


@pytest.mark.parametrize("kind", ["v2_part", "v3_dv"])
def test_compact_upgraded_spark_fixture(spark: Any, spark_clone: Callable[..., FixtureTable], tmp_path: Path,
                                        kind: str) -> None:
    t = spark_clone(kind)
    d = str(t.location)
    heads = branches(t)
    assert "main" in heads
    model = {b: files_of(d, b) for b in heads}  # read by the v1-v3 reader, then tracked by the test
    # Spark lists main's files the same before the upgrade.
    assert {(r["file_path"], r["content"]) for r in metadata_table(spark, t.name, "files")} == \
        {(p, c) for p, c, _ in model["main"]}
    icectl("upgrade", d, "--to", "4", "--yes")
    set_property(d, V4_ROOT_MAX_ADDED_FILES.name, "2")
    copies = _copy_current_spec_files(t, tmp_path / "copies", 7)

    def dvs_of(files: set[tuple[str, int, str | None]], data_file: str) -> set[tuple[str, int, str | None]]:
        return {f for f in files if f[1] == 1 and f[2] == data_file and f[0].endswith(".puffin")}

    icectl("add-files", d, copies[0])  # root-level
    icectl("add-files", d, *copies[1:4])  # a leaf
    icectl("add-files", d, copies[4])  # root-level
    model["main"] |= {(p, 0, None) for p in copies[:5]}
    # A Spark data file (inside an upgraded leaf), with its DV if it has one, and a file of the new leaf.
    spark_data = sorted(p for p, c, _ in model["main"] if c == 0 and p not in copies)
    with_dv = [p for p in spark_data if dvs_of(model["main"], p)]
    victim = (with_dv or spark_data)[0]
    gone = {(victim, 0, None), (copies[1], 0, None), *dvs_of(model["main"], victim)}
    icectl("remove-files", d, victim, copies[1])
    model["main"] -= gone
    icectl("remove-files", d, copies[0], copies[2])  # DELETED root entry; the leaf's DV grows
    model["main"] -= {(copies[0], 0, None), (copies[2], 0, None)}
    other = [b for b in heads if b != "main"]
    for b in other:
        icectl("add-files", d, copies[5], "--branch", b)
        model[b] |= {(copies[5], 0, None)}
    for b in heads:
        assert files_of(d, b) == model[b], b
    kinds = Counter(f"{r['content_type']}/{r['status']}" for r in tree_rows(d))
    assert kinds["DATA/DELETED"] == 1 and kinds["DATA_MANIFEST/MODIFIED"] >= 1 and kinds["DATA/EXISTING"] == 1

    before = {b: live_entries_of(d, b) for b in heads}
    for b in heads:
        groups = {(k[5], 0 if k[1] == 0 else 1) for k in before[b]}
        out = icectl("compact", d, "--branch", b)
        assert out["snapshot_id"] and out["root_files_flushed"] == 1, out
        if b == "main":  # DVs on the new leaf and on the victim's upgraded leaf(s); DELETED root entries
            assert out["manifest_dvs_applied"] >= 2 and out["root_deleted_entries_dropped"] >= 1, out
        for b2 in heads:  # every branch, compacted or not, reads as before
            assert live_entries_of(d, b2) == before[b2], (b, b2)
            assert files_of(d, b2) == model[b2]
        # The default target (8 MiB) holds any of these data groups: one Parquet leaf per spec (a
        # group that already had one leaf and nothing to flush or apply keeps it); v4 compaction
        # leaves the carried-over delete manifests as they are.
        leaves = [r for r in only_leaves(d, b) if r["content_type"] == "DATA_MANIFEST"]
        data_groups = {g for g in groups if g[1] == 0}
        assert len(leaves) == len(data_groups) >= out["manifests_created"] >= 1, (leaves, data_groups)
        assert {(r["spec_id"], 0) for r in leaves} == data_groups
        again = icectl("compact", d, "--branch", b)
        assert "snapshot_id" not in again and again["manifests_replaced"] == 0
    assert validate_errors(d) == []
    # Tags and older snapshots still read: the replaced leaves stay until expiry.
    md = load_table(d).metadata
    for name, ref in md.refs.items():
        if ref.type == "tag":
            assert files_of(d, name)
