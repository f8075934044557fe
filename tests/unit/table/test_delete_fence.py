"""The delete fence (issue 11 items 2, 3, 4, 12) on small tables icectl builds itself (no Spark).

Spark-written twins of the same hazards, where Spark judges what it still reads, are in
tests/interop/test_delete_fence_vs_spark.py.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.forge import property_change

from icectl.errors import CorruptInputError, ExitCode
from icectl.spec.snapshots import SnapshotRef
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.table.delete_fence import check_absolute, file_identity, identity_cache, path_property_problem, table_fence
from unit.ops.expire.test_expire import Tbl, run, with_props, with_ref


@pytest.fixture
def wh(tmp_path: Path) -> Path:
    return tmp_path / "wh"


def _parquet(path: Path, first: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = range(first, first + 3)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"r{i}" for i in ids]}), path)
    return path


def _add(t: Tbl, f: Path, branch: str | None = None) -> int:
    on_branch = ["--branch", branch, "--create-branch"] if branch else []
    code, out, err = run(t.wh, "add-files", t.name, str(f), "--json", *on_branch)
    assert code == 0, err
    time.sleep(0.003)
    return int(json.loads(out)["snapshot_id"])


def _drop_branch_and_expire(t: Tbl, branch: str, sid: int, *extra: str) -> dict:
    t.change(with_ref(branch, SnapshotRef(sid, "branch", max_ref_age_ms=1)))
    time.sleep(0.01)
    return t.expire("--older-than", "0s", "--retain-last", "1", *extra)


def test_symlinked_folder_leading_out_of_the_table_keeps_the_outside_file(wh: Path, tmp_path: Path) -> None:
    """Item 3: t/data/ext -> /elsewhere; a snapshot naming t/data/ext/f is expired. The string
    t/data/ext/f lies under the location, the file does not: it must survive."""
    t = Tbl(wh)
    t.add()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, t.dir / "data" / "ext")
    f = _parquet(t.dir / "data" / "ext" / "x.parquet", 500)
    b = _add(t, f, branch="b")
    out = _drop_branch_and_expire(t, "b", b)
    assert out["removed_refs"] == ["b"] and out["kept_external_files_count"] == 1
    assert (outside / "x.parquet").exists()
    # Allowed explicitly, the real file is what goes (the link is never deleted through).
    t2 = Tbl(wh, "db.t2")
    t2.add()
    os.symlink(outside, t2.dir / "data" / "ext")
    b = _add(t2, t2.dir / "data" / "ext" / "x.parquet", branch="b")
    out = _drop_branch_and_expire(t2, "b", b, "--allow-external-deletes")
    assert out["deleted_data_files_count"] == 1 and not (outside / "x.parquet").exists()


def test_an_in_table_alias_keeps_the_file_a_retained_snapshot_names(wh: Path) -> None:
    """Item 3: main names t/data/alias/f, an expired branch t/data/real/f, alias -> real."""
    t = Tbl(wh)
    f = _parquet(t.dir / "data" / "real" / "f.parquet", 0)
    os.symlink(t.dir / "data" / "real", t.dir / "data" / "alias")
    b = _add(t, f, branch="b")
    _add(t, t.dir / "data" / "alias" / "f.parquet")
    out = _drop_branch_and_expire(t, "b", b)
    assert out["removed_refs"] == ["b"] and out["deleted_data_files_count"] == 0
    assert f.exists()
    code, text, err = run(wh, "validate", str(t.dir), "--deep")
    assert code == 0, (text, err)


def test_metadata_naming_a_parent_folder_does_not_widen_the_fence(wh: Path) -> None:
    """Item 4: location = the warehouse folder above the table. A file of another table there,
    named by an expired snapshot, must survive; writing commands refuse the table (item 12)."""
    t = Tbl(wh)
    t.add()
    other = _parquet(wh / "db" / "other" / "data" / "o.parquet", 900)
    b = _add(t, other, branch="b")
    t.change(with_ref("b", SnapshotRef(b, "branch", max_ref_age_ms=1)))
    # Hostile metadata, edited in place (icectl itself refuses to relocate a file-system table).
    current = Path(load_table(str(t.dir)).metadata_location)
    doc = json.loads(current.read_text())
    current.write_text(json.dumps({**doc, "location": str(wh / "db")}))
    time.sleep(0.01)
    r = t.expire("--older-than", "0s", "--retain-last", "1", expect=ExitCode.REFUSED)
    assert "is not the location its metadata names" in r["stderr"]
    assert other.exists() and b in {s.snapshot_id for s in t.md().snapshots}
    # The fence itself: the table folder, not the wider location.
    fence = table_fence(load_table(str(t.dir)))
    assert fence.roots == (os.path.realpath(t.dir),)
    assert not fence.contains(str(other)) and fence.contains(str(t.dir / "data" / "f001.parquet"))


def test_a_copied_table_refuses_every_writing_command(wh: Path, tmp_path: Path) -> None:
    """Item 12: cp -r t t_copy keeps location = .../t; icectl must not write or delete in t."""
    t = Tbl(wh)
    for _ in range(3):
        t.add()
    copy = wh / "db" / "t_copy"
    shutil.copytree(t.dir, copy, symlinks=True)
    before = t.listing()
    extra = _parquet(tmp_path / "new.parquet", 700)
    for args in (["expire-snapshots", str(copy), "--older-than", "0s", "--retain-last", "1"],
                 ["compact", str(copy)], ["add-files", str(copy), str(extra)]):
        code, out, err = run(wh, *args)
        assert code == ExitCode.REFUSED, (args, code, out, err)
        assert "is not the location its metadata names" in err and "register" in err, err
    assert t.listing() == before
    # The original still works.
    assert t.expire("--older-than", "0s", "--retain-last", "1")["expired_snapshot_count"] == 2


def test_metadata_log_cleanup_deletes_only_old_metadata_files(wh: Path, tmp_path: Path) -> None:
    """Item 2: write.metadata.delete-after-commit.enabled and a metadata log naming a live data
    file, a manifest list, a file outside the table, a lookalike outside the metadata folder and a
    version newer than the one committed."""
    t = Tbl(wh)
    for _ in range(2):
        t.add()
    table = load_table(str(t.dir))
    snap = table.metadata.current_snapshot()
    assert snap is not None and snap.manifest_list
    outside = tmp_path / "elsewhere" / "v1.metadata.json"
    outside.parent.mkdir()
    outside.write_text("{}")
    lookalike = t.dir / "data" / "v0.metadata.json"
    lookalike.write_text("{}")
    newer = t.dir / "metadata" / "v99.metadata.json"  # as a concurrent writer's newer version would be
    newer.write_text("{}")
    bait = [str(t.data_file(1)), snap.manifest_list, str(outside), str(lookalike), str(newer)]
    # Hostile metadata, edited in place (a commit writes the log itself).
    current = Path(table.metadata_location)
    doc = json.loads(current.read_text())
    doc["metadata-log"] = [{"timestamp-ms": 0, "metadata-file": p} for p in bait] + doc["metadata-log"]
    current.write_text(json.dumps(doc))
    base = load_table(str(t.dir))
    old_metadata = [e.metadata_file for e in base.metadata.metadata_log if e.metadata_file not in bait]
    assert set(bait) < {e.metadata_file for e in base.metadata.metadata_log}
    assert len(old_metadata) >= 2 and all(Path(p).exists() for p in old_metadata)
    result = commit(base, lambda md: property_change(
        {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "1"}))
    assert result.committed
    # Only the old metadata files went; every bait is still there.
    assert all(Path(p).exists() for p in bait)
    assert sorted(Path(p).name for p in result.deleted_metadata_files) == sorted(Path(p).name for p in old_metadata)
    assert not any(Path(p).exists() for p in old_metadata)
    code, text, err = run(wh, "validate", str(t.dir), "--deep")
    assert code == 0, (text, err)


def test_write_data_path_is_inside_the_fence(wh: Path, tmp_path: Path) -> None:
    t = Tbl(wh)
    t.add()
    data_path = tmp_path / "store"
    t.change(with_props({"write.data.path": str(data_path)}))
    assert table_fence(load_table(str(t.dir))).contains(str(data_path / "a" / "f.parquet"))


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and link under ``root`` (links not followed) with size and mtime."""
    out = {}
    for d, dirs, names in os.walk(root):
        for n in names + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            st = os.lstat(os.path.join(d, n))
            out[os.path.relpath(os.path.join(d, n), root)] = (st.st_size, st.st_mtime_ns)
    return out


HAZARDS = ("escape", "alias", "external", "log", "widen")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hazards=st.sets(st.sampled_from(HAZARDS)), allow=st.booleans(), dry=st.booleans())
def test_property_nothing_outside_the_table_folder_nor_live_is_deleted(hazards: set[str], allow: bool,
                                                                       dry: bool) -> None:
    """Damaged and hostile tables (symlinks out, aliases in, files from outside, a metadata log
    pointing anywhere, a widened location) in any combination: expire deletes nothing outside the
    table folder unless --allow-external-deletes, never a file a retained snapshot reaches, and
    either succeeds or refuses (exit 6) with nothing changed."""
    with tempfile.TemporaryDirectory() as tmp:
        wh, outside = Path(tmp) / "wh", Path(tmp) / "outside"
        t = Tbl(wh)
        t.add()
        t.add()
        live = [t.data_file(1), t.data_file(2)]  # main's files, retained
        expired_branches: dict[str, int] = {}
        if "escape" in hazards:
            (outside / "esc").mkdir(parents=True)
            os.symlink(outside / "esc", t.dir / "data" / "ext")
            expired_branches["e"] = _add(t, _parquet(t.dir / "data" / "ext" / "x.parquet", 500), branch="e")
        if "alias" in hazards:
            real = _parquet(t.dir / "data" / "real" / "a.parquet", 600)
            os.symlink(t.dir / "data" / "real", t.dir / "data" / "alias")
            expired_branches["a"] = _add(t, real, branch="a")
            _add(t, t.dir / "data" / "alias" / "a.parquet")
            live.append(real)
        if "external" in hazards:
            expired_branches["x"] = _add(t, _parquet(outside / "ext" / "y.parquet", 700), branch="x")
        for name, sid in expired_branches.items():
            t.change(with_ref(name, SnapshotRef(sid, "branch", max_ref_age_ms=1)))
        current = Path(load_table(str(t.dir)).metadata_location)
        doc = json.loads(current.read_text())
        if "log" in hazards:
            bait = _parquet(outside / "log" / "v9.metadata.json", 800)
            doc["metadata-log"] = [{"timestamp-ms": 0, "metadata-file": str(p)}
                                   for p in (t.data_file(1), bait, doc["snapshots"][0]["manifest-list"])]
            doc["properties"] = {**doc.get("properties", {}), "write.metadata.delete-after-commit.enabled": "true",
                                 "write.metadata.previous-versions-max": "1"}
        if "widen" in hazards:
            doc["location"] = str(wh / "db")
        current.write_text(json.dumps(doc))
        time.sleep(0.01)
        before_all, before_outside = _tree(Path(tmp)), _tree(outside) if outside.exists() else {}
        code, out, err = run(wh, "expire-snapshots", str(t.dir), "--older-than", "0s", "--retain-last", "1", "--json",
                             *(["--allow-external-deletes"] if allow else []), *(["--dry-run"] if dry else []))
        assert code in (0, ExitCode.REFUSED), (code, out, err)
        if code == ExitCode.REFUSED or dry:
            assert _tree(Path(tmp)) == before_all
        if code == ExitCode.REFUSED:
            assert "widen" in hazards  # the only refusal here: the table folder is not the location
            return
        assert all(p.exists() for p in live)
        if not allow:
            assert (_tree(outside) if outside.exists() else {}) == before_outside
        # The log's bait (a live data file, a manifest list, a file outside) always survives.
        assert "log" not in hazards or (outside / "log" / "v9.metadata.json").exists()


def test_identity_cache_sees_links_as_realpath_does(tmp_path: Path) -> None:
    """The per-run cache of real folders gives the same identities as a fresh realpath: a file link,
    a folder link, a link out, '..' and a missing file."""
    real = tmp_path / "t" / "data"
    real.mkdir(parents=True)
    (real / "f.parquet").write_bytes(b"x")
    (tmp_path / "out").mkdir()
    (real / "escape").symlink_to(tmp_path / "out", target_is_directory=True)
    (tmp_path / "t" / "alias").symlink_to(real, target_is_directory=True)
    (real / "link.parquet").symlink_to(real / "f.parquet")
    paths = [str(real / "f.parquet"), str(tmp_path / "t" / "alias" / "f.parquet"), str(real / "link.parquet"),
             str(real / "escape" / "x.parquet"), str(real / ".." / "data" / "f.parquet"), str(real / "gone"),
             "file:" + str(tmp_path / "t" / "alias" / "link.parquet"), str(real / "escape" / "..")]
    expected = [os.path.realpath(p.removeprefix("file:")) for p in paths]
    with identity_cache():
        assert [file_identity(p) for p in paths] == expected
        assert [file_identity(p) for p in paths] == expected  # asked again: from the cache


def test_path_property_problem_names_roots_parents_and_folders_holding_tables(tmp_path: Path) -> None:
    """Issue 27 item 3: what properties set / create refuse and the fence ignores (no listing of
    object storage is needed for a bucket or a parent)."""
    home = tmp_path / "wh" / "db" / "t"
    (home / "metadata").mkdir(parents=True)
    (home / "metadata" / "v1.metadata.json").write_text("{}")
    io = FileIO()

    def problem(value: str) -> str | None:
        return path_property_problem(io, value, homes=[str(home)], own_metadata=[str(home / "metadata")])

    assert problem("/") == "is a file system root" and problem("file:/") == "is a file system root"
    for bucket in ("s3://bucket", "s3://bucket/", "s3a://bucket/"):
        assert path_property_problem(io, bucket, homes=["s3://bucket/wh/t"]) == "is a whole bucket"
    assert "parent of the table location" in (path_property_problem(io, "s3://bucket/wh", homes=["s3://bucket/wh/t"])
                                              or "")
    assert "parent of the table location" in (problem(str(tmp_path / "wh")) or "")
    assert problem(str(home)) is None and problem(str(home / "data2")) is None  # its own folder
    assert problem(str(tmp_path / "store")) is None  # a folder of its own elsewhere (missing yet)
    other = tmp_path / "shared" / "x" / "metadata"
    other.mkdir(parents=True)
    (other / "00001-abc.metadata.json").write_text("{}")
    assert "holds another table's metadata" in (problem(str(tmp_path / "shared")) or "")
    # The table's own metadata folder elsewhere (write.metadata.path) is not another table.
    assert path_property_problem(io, str(tmp_path / "shared"), homes=[str(home)], own_metadata=[str(other)]) is None


DATA_PATHS = ("root", "parent", "other-table", "own-elsewhere", "inside")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(where=st.sampled_from(DATA_PATHS), command=st.sampled_from(("expire", "purge", "orphans")))
def test_property_a_data_path_in_metadata_never_widens_a_delete(where: str, command: str) -> None:
    """Issue 27 item 3: write.data.path written into the metadata by another tool. A root, a parent
    of the table or a folder holding another table never lets expire, drop --purge or
    remove-orphan-files delete an outside file (one only an expiring branch names); a folder of the
    table's own elsewhere still does, as Java writes there; the other table's files always stay."""
    with tempfile.TemporaryDirectory() as tmp:
        wh, outside = Path(tmp) / "wh", Path(tmp) / "outside"
        t = Tbl(wh)
        t.add()
        t.add()
        ext = _parquet(outside / "ext" / "y.parquet", 700)
        b = _add(t, ext, branch="x")
        t.change(with_ref("x", SnapshotRef(b, "branch", max_ref_age_ms=1)))
        other = _parquet(outside / "other" / "data" / "o.parquet", 800)
        (outside / "other" / "metadata").mkdir()
        (outside / "other" / "metadata" / "v1.metadata.json").write_text("{}")
        value = {"root": "/", "parent": tmp, "other-table": str(outside), "own-elsewhere": str(outside / "ext"),
                 "inside": str(t.dir / "data")}[where]
        current = Path(load_table(str(t.dir)).metadata_location)
        doc = json.loads(current.read_text())
        doc["properties"] = {**doc.get("properties", {}), "write.data.path": value}
        current.write_text(json.dumps(doc))
        time.sleep(0.01)
        args = {"expire": ("expire-snapshots", "db.t", "--older-than", "0s", "--retain-last", "1"),
                "purge": ("drop", "db.t", "--purge"),
                "orphans": ("remove-orphan-files", "db.t", "--older-than", "0s", "--allow-recent")}[command]
        code, out, err = run(wh, *args)
        assert code == 0, (out, err)
        assert other.exists() and (outside / "other" / "metadata" / "v1.metadata.json").exists()
        legit = where == "own-elsewhere" and command != "orphans"
        assert ext.exists() is not legit, (where, command, out, err)
        assert legit or where == "inside" or command == "orphans" or "ignored by the delete fence" in err


def test_check_absolute_refuses_relative_paths() -> None:
    """Issue 27 item 4: v1-v3 paths are absolute (the spec's full URI). v4 rows' relative locations
    are resolved against the table location when read (scan_v4), so a path that is still relative
    here (a relative root-manifest, ``file:`` without ``/``) is refused in v4 too."""
    for path in ("data/x.parquet", "./x.parquet", "file:data/x.parquet"):
        for version in (1, 2, 3, 4):
            with pytest.raises(CorruptInputError) as e:
                check_absolute(path, version, "a live file", "manifest /t/metadata/m.avro", "/t/metadata/m.avro")
            line = e.value.one_line()
            assert repr(path) in line and "/t/metadata/m.avro" in line and e.value.exit_code == ExitCode.CORRUPT
    for path in ("/t/data/x.parquet", "file:/t/x", "file:///t/x", "s3://b/t/x", "s3a://b/t/x", "gs://b/x"):
        check_absolute(path, 2, "a live file", "manifest m")
