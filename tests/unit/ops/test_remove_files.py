"""``icectl remove-files`` on v4 tables: a removal writes one root and rewrites no leaf; a removed
file's DV goes with it. Shares the v4 table fixture of tests/unit/table/test_v4_commit.py."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.codec.puffin import deletion_vector_blob, write_puffin
from icectl.codec.v4_proposal import ROOT as ROOT_CONTENT
from icectl.codec.v4_proposal import (
    ContentEntry,
    ContentType,
    DeletionVectorRef,
    VersionInfo,
    read_v4_manifest,
    write_v4_manifest,
)
from icectl.errors import ExitCode
from icectl.spec.manifest import ManifestEntryStatus
from icectl.spec.snapshots import Snapshot
from icectl.spec.updates import snapshot_change
from icectl.table import load_table
from icectl.table.commit import commit
from unit.ops.test_upgrade import icectl, parquet
from unit.table import test_v4_commit
from unit.table.test_v4_commit import manifest_files, live, tree

v4 = test_v4_commit.v4  # the v4 table fixture


def test_remove_files_by_dv_and_deleted_entry(v4: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, paths = v4
    extra = parquet(tmp_path / "r.parquet", range(500, 503), 7)
    icectl("add-files", str(d), extra)  # a root-level file
    before = manifest_files(d)
    dry = icectl("remove-files", str(d), paths[0], extra, "--dry-run")
    assert dry["removed_data_files"] == 2 and manifest_files(d) == before
    out = icectl("remove-files", str(d), paths[0], extra)
    assert {f["via"].split(" on ")[0] for f in out["files"]} == {"manifest DV", "root DELETED entry"}
    written = set(manifest_files(d)) - set(before)
    assert len(written) == 1 and next(iter(written)).startswith("root-")
    assert {k: v for k, v in manifest_files(d).items() if k in before} == before  # no leaf rewritten
    assert live(d) == {paths[1], paths[2]}
    assert tree(d) == {"DATA/DELETED": 1, "DATA_MANIFEST/EXISTING": 3, "MANIFEST_DV/ADDED": 1}
    snap = load_table(str(d)).metadata.current_snapshot()
    assert snap is not None and snap.summary["operation"] == "delete" and snap.summary["deleted-data-files"] == "2"
    assert snap.summary["total-data-files"] == "2" and snap.summary["total-records"] == "10"
    # By partition: the second leaf's file; the DELETED row of the last root is not carried over.
    icectl("remove-files", str(d), "--where", "ts_day=2024-03-02")
    assert live(d) == {paths[2]}
    assert tree(d) == {"DATA_MANIFEST/EXISTING": 3, "MANIFEST_DV/ADDED": 1, "MANIFEST_DV/EXISTING": 1}
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
    icectl("remove-files", str(d), paths[0])
    icectl("remove-files", str(d), paths[2])
    t = load_table(str(d))
    head = t.metadata.current_snapshot()
    assert head is not None and head.root_manifest
    root = read_v4_manifest(Path(head.root_manifest).read_bytes(), partition_types={})
    dvs = [(e.status.name, e.record_count) for e in root.entries if e.content_type == ContentType.MANIFEST_DV]
    assert sorted(dvs) == [("ADDED", 2), ("DELETED", 1)]  # the union, and the old DV as DELETED
    assert live(d) == {paths[1]}
    r = CliRunner().invoke(app, ["remove-files", str(d), paths[0]])  # gone already
    assert r.exit_code == ExitCode.NOT_FOUND


def test_removing_a_file_removes_its_dv(v4: tuple[Path, list[str]], tmp_path: Path) -> None:
    d, paths = v4
    t = load_table(str(d))
    md = t.metadata
    head = md.current_snapshot()
    assert head is not None and head.root_manifest
    root = read_v4_manifest(Path(head.root_manifest).read_bytes(), partition_types={})
    puffin = write_puffin([deletion_vector_blob(paths[1], [0, 1])])
    pf = tmp_path / "dv.puffin"
    pf.write_bytes(puffin.data)
    blob = puffin.metadata.blobs[0]
    sid, seq = head.snapshot_id + 1, md.last_sequence_number + 1
    added = VersionInfo(ManifestEntryStatus.ADDED, sid, seq, seq)
    dv = ContentEntry(ContentType.POSITION_DELETE, str(pf), "puffin", 0, 2, added,
                      deletion_vector=DeletionVectorRef(blob.offset, blob.length), partition={1000: 19784},
                      file_size_in_bytes=len(puffin.data), referenced_file=paths[1])
    root_path = d / "metadata" / f"root-{sid}-dv.avro"
    root_path.write_bytes(write_v4_manifest([*root.entries, dv], content=ROOT_CONTENT,
                                            partition_type=md.unified_partition_type(), snapshot_id=sid,
                                            sequence_number=seq).data)
    snap = Snapshot(sid, head.timestamp_ms + 1, head.snapshot_id, seq, root_manifest=str(root_path),
                    summary={"operation": "delete"}, schema_id=0, first_row_id=md.next_row_id, added_rows=0)
    commit(t, lambda base: snapshot_change(base, snap))
    assert {r["file_path"] for r in icectl("inspect", "files", str(d), "--content", "deletes")["rows"]} == {str(pf)}
    out = icectl("remove-files", str(d), paths[1])
    assert out["removed_data_files"] == 1 and out["removed_delete_files"] == 1
    assert icectl("inspect", "files", str(d), "--content", "deletes")["rows"] == []
    assert tree(d) == {"DATA_MANIFEST/EXISTING": 3, "MANIFEST_DV/ADDED": 1, "POSITION_DELETE/DELETED": 1}


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
