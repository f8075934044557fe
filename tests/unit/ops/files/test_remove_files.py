"""``icectl remove-files`` on v4 tables: a removal writes one root and rewrites no leaf; a removed
leaf file goes into the leaf's manifest DV (the spec layout: ``manifest_info.dv`` on the leaf's
root entry, MODIFIED, cumulative), a root-level file becomes a DELETED row, and a removed file's
DV goes with it. Shares the v4 table fixture of tests/unit/table/test_v4_commit.py."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest
from icectl.codec.mumbling import decode_mumbling
from icectl.codec.puffin import deletion_vector_blob, write_puffin
from icectl.errors import ExitCode
from icectl.spec.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from icectl.spec.tracked_file import PRE_V4, ContentType, EntryStatus, TrackedFile, manifest_file_of
from icectl.table import Table, load_table
from icectl.table.commit import new_snapshot_id
from icectl.table.layout.manifest_list import ManifestListLayout, manifest_path
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.scan_v4 import leaf_rows, read_root
from icectl.table.snapshot_writer import SnapshotChange, write_snapshot
from unit.ops.lifecycle.test_upgrade import icectl, parquet
from unit.table import test_v4_commit
from unit.table.test_v4_commit import live, manifest_files, tree

v4 = test_v4_commit.v4  # the v4 table fixture


def root_entries(d: Path) -> tuple[int, list[TrackedFile]]:
    """The current snapshot's id and its root's rows (a spec-layout Parquet root)."""
    t = load_table(str(d))
    head = t.metadata.current_snapshot()
    assert head is not None and head.root_manifest and head.root_manifest.endswith(".parquet")
    return head.snapshot_id, read_root(t.metadata, head, t.io).entries


def leaf_of(d: Path, entries: list[TrackedFile], path: str) -> tuple[TrackedFile, int]:
    """The live leaf entry whose leaf holds ``path``, and that file's row ordinal in the leaf."""
    t = load_table(str(d))
    for e in entries:
        if e.is_manifest and e.is_live:
            ordinals = [i for i, (p, _c, _live) in enumerate(leaf_rows(t.metadata, t.io, manifest_file_of(e)))
                        if p == path]
            if ordinals:
                return e, ordinals[0]
    raise AssertionError(f"no live leaf holds {path}")


def manifest_dv(e: TrackedFile) -> tuple[EntryStatus, list[int], list[int] | None, int | None]:
    """A leaf entry's status, cumulative manifest DV, the positions its snapshot deleted and that snapshot."""
    assert e.manifest_info is not None and e.manifest_info.dv is not None, e
    t = e.tracking
    assert t.replaced_positions is None
    return (t.status, sorted(decode_mumbling(e.manifest_info.dv)),
            None if t.deleted_positions is None else sorted(decode_mumbling(t.deleted_positions)),
            t.modified_snapshot_id)


def test_remove_files_by_dv_and_deleted_entry(v4: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, paths = v4
    extra = parquet(tmp_path / "r.parquet", range(500, 503), 7)
    icectl("add-files", str(d), extra)  # a root-level file
    before = manifest_files(d)
    _, entries = root_entries(d)
    leaf0, ord0 = leaf_of(d, entries, paths[0])
    leaf1, ord1 = leaf_of(d, entries, paths[1])
    assert leaf0.location != leaf1.location and leaf0.manifest_info and leaf0.manifest_info.dv is None
    dry = icectl("remove-files", str(d), paths[0], extra, "--dry-run")
    assert dry["removed_data_files"] == 2 and manifest_files(d) == before
    out = icectl("remove-files", str(d), paths[0], extra)
    assert {f["via"].split(" on ")[0] for f in out["files"]} == {"manifest DV", "root DELETED entry"}
    written = set(manifest_files(d)) - set(before)
    assert len(written) == 1 and next(iter(written)).startswith("root-")
    assert {k: v for k, v in manifest_files(d).items() if k in before} == before  # no leaf rewritten
    assert live(d) == {paths[1], paths[2]}
    assert tree(d) == {"DATA/DELETED": 1, "DATA_MANIFEST/EXISTING": 2, "DATA_MANIFEST/MODIFIED": 1}
    first, entries = root_entries(d)
    by_location = {e.location: e for e in entries}
    # The leaf's root entry: MODIFIED, its manifest DV the removed row, deleted in this snapshot.
    assert manifest_dv(by_location[leaf0.location]) == (EntryStatus.MODIFIED, [ord0], [ord0], first)
    removed = by_location[extra]
    assert (removed.content_type, removed.status, removed.tracking.snapshot_id) == \
        (ContentType.DATA, EntryStatus.DELETED, first)
    snap = load_table(str(d)).metadata.current_snapshot()
    assert snap is not None and snap.summary["operation"] == "delete" and snap.summary["deleted-data-files"] == "2"
    assert snap.summary["total-data-files"] == "2" and snap.summary["total-records"] == "10"
    # By partition: the second leaf's file; the DELETED row of the last root is not carried over, and
    # the first leaf keeps its manifest DV as EXISTING without the positions of the earlier snapshot.
    icectl("remove-files", str(d), "--where", "ts_day=2024-03-02")
    assert live(d) == {paths[2]}
    assert tree(d) == {"DATA_MANIFEST/EXISTING": 2, "DATA_MANIFEST/MODIFIED": 1}
    second, entries = root_entries(d)
    by_location = {e.location: e for e in entries}
    assert extra not in by_location
    assert manifest_dv(by_location[leaf0.location]) == (EntryStatus.EXISTING, [ord0], None, first)
    assert manifest_dv(by_location[leaf1.location]) == (EntryStatus.MODIFIED, [ord1], [ord1], second)
    # Time travel: the snapshot before the removals still has every file.
    md = load_table(str(d)).metadata
    first_v4 = next(s for s in md.snapshots if s.root_manifest)
    assert live(d, "--snapshot", str(first_v4.snapshot_id)) == set(paths)


def test_union_dv_replaces_the_old_one(tmp_path: Path) -> None:
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--format-version", "2")
    paths = [parquet(tmp_path / f"u{i}.parquet", range(i * 10, i * 10 + 2), 1) for i in range(3)]
    icectl("add-files", str(d), *paths)  # one v2 manifest with three rows
    icectl("upgrade", str(d), "--to", "4", "--yes")
    _, entries = root_entries(d)
    leaf, ord0 = leaf_of(d, entries, paths[0])
    _, ord2 = leaf_of(d, entries, paths[2])
    assert leaf.manifest_info is not None and leaf.manifest_info.format_version == PRE_V4  # carried over
    icectl("remove-files", str(d), paths[0])
    icectl("remove-files", str(d), paths[2])
    head, entries = root_entries(d)
    assert [(e.content_type, e.location) for e in entries] == [(ContentType.DATA_MANIFEST, leaf.location)]
    # One manifest DV, the union of both removals; the entry's deleted positions are this snapshot's only.
    assert manifest_dv(entries[0]) == (EntryStatus.MODIFIED, sorted([ord0, ord2]), [ord2], head)
    assert live(d) == {paths[1]}
    r = CliRunner().invoke(app, ["remove-files", str(d), paths[0]])  # gone already
    assert r.exit_code == ExitCode.NOT_FOUND


def _add_v3_dv(d: Path, data_file: str, positions: list[int], puffin_path: Path) -> None:
    """Commit a DV on ``data_file`` as Spark does on v3: a Puffin blob in a new delete manifest
    (ADDED, sequence numbers inherited), the head's manifests kept."""
    t = load_table(str(d))
    md = t.metadata
    target = next(e.data_file for e in _live_entries(t) if e.data_file.file_path == data_file)
    puffin = write_puffin([deletion_vector_blob(data_file, positions)])
    puffin_path.write_bytes(puffin.data)
    blob = puffin.metadata.blobs[0]
    dv = DataFile(DataFileContent.POSITION_DELETES, str(puffin_path), "PUFFIN", target.partition, len(positions),
                  len(puffin.data), referenced_data_file=data_file, content_offset=blob.offset,
                  content_size_in_bytes=blob.length)
    spec = md.spec()
    ptype = spec.partition_type(md.schema())
    sid = new_snapshot_id(md)
    result = write_manifest([ManifestEntry(ManifestEntryStatus.ADDED, sid, None, None, dv)], schema=md.schema(),
                            spec=spec, partition_type=ptype, format_version=3, content=ManifestContent.DELETES,
                            snapshot_id=sid)
    commit_id = "d0d0d0d0-0000-4000-8000-000000000000"
    path = manifest_path(t.metadata_folder, commit_id, 0)
    t.io.write(path, result.data)
    layout = ManifestListLayout(commit_id, [result.to_manifest_file(path, len(result.data), spec.spec_id, sid,
                                                                     UNASSIGNED_SEQ)])
    change = SnapshotChange("delete", layout, written=[path])
    change.summary.added_file(dv)
    write_snapshot(t, "main", change, snapshot_id=sid)


def _live_entries(t: Table) -> list[ManifestEntry]:
    md = t.metadata
    head = md.current_snapshot()
    assert head is not None
    return [e for _, e in iter_entries(md, t.io, manifests_of(md, head, t.io), live_only=True)]


def test_removing_a_file_removes_its_dv(tmp_path: Path) -> None:
    """A v3 DV in a delete manifest carried over by the upgrade: removing its data file puts a
    manifest DV on the data leaf and on the delete leaf, and rewrites neither."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
           "--format-version", "3")
    paths = [parquet(tmp_path / f"f{day}.parquet", range(day * 10, day * 10 + 5), day) for day in (1, 2, 3)]
    for p in paths:
        icectl("add-files", str(d), p)
    pf = tmp_path / "dv.puffin"
    _add_v3_dv(d, paths[1], [0, 1], pf)
    icectl("upgrade", str(d), "--to", "4", "--yes")
    deletes = icectl("inspect", "files", str(d), "--content", "deletes")["rows"]
    assert [(r["file_path"], r["referenced_data_file"]) for r in deletes] == [(str(pf), paths[1])]
    _, entries = root_entries(d)
    data_leaf, data_ord = leaf_of(d, entries, paths[1])
    dv_leaf, dv_ord = leaf_of(d, entries, str(pf))
    assert data_leaf.content_type == ContentType.DATA_MANIFEST and dv_leaf.content_type == ContentType.DELETE_MANIFEST
    assert tree(d) == {"DATA_MANIFEST/EXISTING": 3, "DELETE_MANIFEST/EXISTING": 1}
    before = manifest_files(d)
    out = icectl("remove-files", str(d), paths[1])
    assert out["removed_data_files"] == 1 and out["removed_delete_files"] == 1
    assert {f["via"] for f in out["files"]} == {f"manifest DV on {data_leaf.location}",
                                                f"manifest DV on {dv_leaf.location}"}
    assert icectl("inspect", "files", str(d), "--content", "deletes")["rows"] == []
    assert live(d) == {paths[0], paths[2]}
    written = set(manifest_files(d)) - set(before)
    assert len(written) == 1 and next(iter(written)).startswith("root-")
    assert {k: v for k, v in manifest_files(d).items() if k in before} == before  # no leaf rewritten
    assert tree(d) == {"DATA_MANIFEST/EXISTING": 2, "DATA_MANIFEST/MODIFIED": 1, "DELETE_MANIFEST/MODIFIED": 1}
    head, entries = root_entries(d)
    by_location = {e.location: e for e in entries}
    assert manifest_dv(by_location[data_leaf.location]) == (EntryStatus.MODIFIED, [data_ord], [data_ord], head)
    assert manifest_dv(by_location[dv_leaf.location]) == (EntryStatus.MODIFIED, [dv_ord], [dv_ord], head)


def test_remove_files_refusals(tmp_path: Path, v4: tuple[Path, list[str]]) -> None:
    d, paths = v4
    before = manifest_files(d)
    version = (d / "metadata" / "version-hint.text").read_text()
    for args, code in ((["/no/such.parquet"], ExitCode.NOT_FOUND), ([], ExitCode.USAGE),
                       (["--where", "nonsense"], ExitCode.USAGE), (["--where", "ts_dya=2024-03-02"], ExitCode.USAGE)):
        r = CliRunner().invoke(app, ["remove-files", str(d), *args])
        assert r.exit_code == code, r.stderr
    assert manifest_files(d) == before and (d / "metadata" / "version-hint.text").read_text() == version
    none = icectl("remove-files", str(d), "--where", "ts_day=1999-01-01")
    assert none["committed"] is False
    v2 = tmp_path / "v2"
    icectl("create", str(v2), "--schema", "id long", "--format-version", "2")
    r = CliRunner().invoke(app, ["remove-files", str(v2), paths[0]])
    assert r.exit_code == ExitCode.CORRUPT and "v4" in r.stderr
