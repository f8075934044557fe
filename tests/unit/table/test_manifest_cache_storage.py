"""The store's identity of a file (FileIO.identity / read_with_identity), and the manifest cache on
disks that refuse writes: a read-only folder and a full one (real mounts when root may mount,
as here; a folder that is a regular file otherwise)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from support.s3 import create_bucket, s3_filesystem

from icectl.errors import NotFoundError
from icectl.storage import FileIdentity, FileIO
from icectl.table import manifest_cache as mc
from icectl.table.manifest_cache import ManifestCache

RACY = "ICECTL_CACHE_RACY_SECONDS"


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """No racy window: a file written by the test is cacheable at once."""
    monkeypatch.setenv(RACY, "0")


def table_of(n: int, tag: str) -> pa.Table:
    return pa.table({"path": [f"{tag}-{i}" for i in range(n)], "n": pa.array(range(n), pa.int64())})


# -- local identity ------------------------------------------------------------------------------


def test_identity_of_a_local_file(tmp_path: Path, settled: None) -> None:
    f = tmp_path / "m.avro"
    f.write_bytes(b"x" * 100)
    io = FileIO()
    ident = io.identity(str(f))
    st = f.stat()
    assert ident == FileIdentity(100, f"{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}")
    assert ident is not None and ident.cacheable
    assert io.identity(f"file://{f}") == ident
    data, read_ident = io.read_with_identity(f"file:{f}")
    assert data == b"x" * 100 and read_ident == ident


def test_every_change_of_a_local_file_changes_its_identity(tmp_path: Path, settled: None) -> None:
    io = FileIO()
    f = tmp_path / "m.avro"
    f.write_bytes(b"a" * 100)
    seen = [io.identity(str(f))]
    time.sleep(0.01)
    f.write_bytes(b"a" * 101)  # length
    seen.append(io.identity(str(f)))
    time.sleep(0.01)
    st = f.stat()
    f.write_bytes(b"b" * 101)  # same length, new content
    seen.append(io.identity(str(f)))
    time.sleep(0.01)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back: the ctime still moves
    seen.append(io.identity(str(f)))
    time.sleep(0.01)
    g = tmp_path / "other"
    g.write_bytes(b"b" * 101)
    os.utime(g, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(g, f)  # another file (inode) of the same length and mtime under the name
    seen.append(io.identity(str(f)))
    assert len(set(seen)) == len(seen), seen
    assert [i.length for i in seen if i] == [100, 101, 101, 101, 101]


def test_a_file_changed_within_the_racy_window_is_not_cacheable(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    io = FileIO()
    f = tmp_path / "m.avro"
    f.write_bytes(b"x")
    monkeypatch.delenv(RACY, raising=False)  # the default window: 2 s
    ident = io.identity(str(f))
    assert ident is not None and not ident.cacheable
    assert io.read_with_identity(str(f))[1] == ident  # still the identity, with the advice
    assert not io.read_with_identity(str(f))[1].cacheable  # type: ignore[union-attr]
    monkeypatch.setenv(RACY, "0.05")
    time.sleep(0.1)
    assert io.identity(str(f)).cacheable  # type: ignore[union-attr]
    # And the cache takes the advice: a racy identity is neither stored nor read.
    cache = ManifestCache(tmp_path / "c")
    monkeypatch.setenv(RACY, "1000")
    racy = io.identity(str(f))
    cache.put("manifest/1", str(f), racy, table_of(3, "r"))  # type: ignore[arg-type]
    assert list((tmp_path / "c").rglob("*.arrow")) == []


def test_missing_files_and_folders_are_errors_not_identities(tmp_path: Path) -> None:
    io = FileIO()
    with pytest.raises(NotFoundError):
        io.identity(str(tmp_path / "nope.avro"))
    with pytest.raises(NotFoundError):
        io.identity(str(tmp_path))
    with pytest.raises(NotFoundError):
        io.read_with_identity(str(tmp_path / "nope.avro"))


def test_a_store_without_versions_gives_no_identity() -> None:
    io = FileIO()
    io.write("memory://icectl-test/m.avro", b"abc")
    assert io.identity("memory://icectl-test/m.avro") is None
    assert io.read_with_identity("memory://icectl-test/m.avro") == (b"abc", None)


# -- object storage identity -----------------------------------------------------------------------------


def test_identity_of_an_object(s3_env: str) -> None:
    create_bucket(s3_env, "icectl-cache-ident")
    fs = s3_filesystem(s3_env)
    fs.pipe_file("icectl-cache-ident/m.avro", b"a" * 50)
    io = FileIO()
    first = io.identity("s3://icectl-cache-ident/m.avro")
    assert first is not None and first.length == 50 and first.cacheable
    assert io.identity("s3a://icectl-cache-ident/m.avro") == first
    data, read_ident = io.read_with_identity("s3a://icectl-cache-ident/m.avro")
    assert data == b"a" * 50 and read_ident == first
    fs.pipe_file("icectl-cache-ident/m.avro", b"b" * 50)  # same length, new content: new ETag
    second = io.identity("s3://icectl-cache-ident/m.avro")
    assert second is not None and second != first and second.length == 50
    data, read_ident = io.read_with_identity("s3://icectl-cache-ident/m.avro")
    assert data == b"b" * 50 and read_ident == second
    with pytest.raises(NotFoundError):
        io.identity("s3://icectl-cache-ident/gone.avro")


# -- disks that refuse writes -------------------------------------------------------------------------------


def _mount(*args: str) -> bool:
    try:
        return subprocess.run(["mount", *args], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=10)


@pytest.fixture
def read_only_copy(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a writable folder, the same folder mounted read-only elsewhere)."""
    src, dst = tmp_path / "rw", tmp_path / "ro"
    src.mkdir()
    dst.mkdir()
    if not _mount("--bind", "-o", "ro", str(src), str(dst)):
        pytest.skip("cannot bind-mount read-only here (needs root and mount(8))")
    try:
        yield src, dst
    finally:
        _umount(dst)


def test_a_read_only_cache_folder_is_read_and_never_written(read_only_copy: tuple[Path, Path]) -> None:
    src, dst = read_only_copy
    ident = FileIdentity(10, "v")
    ManifestCache(src).put("manifest/1", "/t/m0.avro", ident, table_of(5, "m0"))
    with pytest.raises(OSError):  # the mount really refuses writes
        (dst / "probe").write_bytes(b"")
    cache = ManifestCache(dst)
    got = cache.get("manifest/1", "/t/m0.avro", ident)  # a hit: its mtime cannot be touched, no matter
    assert got is not None and got.equals(table_of(5, "m0"))
    cache.put("manifest/1", "/t/m1.avro", ident, table_of(5, "m1"))  # no error
    assert not cache.writable
    assert cache.get("manifest/1", "/t/m1.avro", ident) is None
    assert not cache.info().writable and cache.info().entries == 1
    for f in src.rglob("*.arrow"):
        f.write_bytes(b"broken")
    assert cache.get("manifest/1", "/t/m0.avro", ident) is None  # broken and not removable: a miss


def test_a_cache_folder_under_a_regular_file_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without mounts: the folder cannot be made (ENOTDIR), as on a disk that refuses it."""
    (tmp_path / "file").write_bytes(b"")
    monkeypatch.setenv("ICECTL_CACHE_DIR", str(tmp_path / "file" / "cache"))
    cache = mc.manifest_cache()
    assert cache is not None
    ident = FileIdentity(10, "v")
    assert cache.get("manifest/1", "/t/m.avro", ident) is None
    cache.put("manifest/1", "/t/m.avro", ident, table_of(3, "m"))
    assert not cache.writable
    assert cache.get("manifest/1", "/t/m.avro", ident) is None
    info = mc.cache_info()
    assert (info.entries, info.bytes, info.writable) == (0, 0, False)
    assert mc.clear_cache() == (0, 0)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "tiny"
    disk.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)):
        pytest.skip("cannot mount a tmpfs here (needs root and mount(8))")
    try:
        yield disk
    finally:
        _umount(disk)


def test_a_full_disk_turns_writes_off_and_answers_stay_right(tiny_disk: Path) -> None:
    cache = ManifestCache(tiny_disk, max_bytes=1024**3)  # the bound is not what stops it: the disk is
    tables = {i: table_of(40, f"m{i}") for i in range(100)}  # ~2 KB each: 64 KB fills up
    for i, t in tables.items():
        cache.put("manifest/1", f"/t/m{i}.avro", FileIdentity(i, "v"), t)
    assert not cache.writable  # ENOSPC turned writes off
    hits = 0
    for i, t in tables.items():
        got = cache.get("manifest/1", f"/t/m{i}.avro", FileIdentity(i, "v"))
        if got is not None:
            assert got.equals(t)
            hits += 1
    assert 0 < hits < 100
    assert not [p for p in (tiny_disk / "manifests").iterdir() if not p.name.endswith(".arrow")]  # no temps left


def test_local_files_never_load_fsspec(tmp_path: Path) -> None:
    """fsspec costs 25-30 ms of every start: local paths go straight to os (icectl/storage/local.py)."""
    code = f"""
import sys
from icectl.storage import FileIO, walk_files
io, d = FileIO(), {str(tmp_path)!r}
io.write(d + "/a/m.avro", b"abc")
io.write_atomic(d + "/a/v1.json", b"{{}}")
assert io.write_if_absent(d + "/a/v2.json", b"x") and not io.write_if_absent(d + "/a/v2.json", b"y")
assert io.read("file://" + d + "/a/m.avro") == b"abc" and io.read_range(d + "/a/m.avro", 1, 1) == b"b"
assert io.exists(d + "/a") and io.is_dir(d + "/a") and io.size(d + "/a/m.avro") == 3
assert sorted(io.list_names(d + "/a")) == ["m.avro", "v1.json", "v2.json"] and io.list_names(d + "/b") == []
with io.open(d + "/a/m.avro") as f:
    assert f.read() == b"abc"
assert io.identity(d + "/a/m.avro").length == 3 and io.read_with_identity(d + "/a/m.avro")[0] == b"abc"
assert len(list(walk_files(io, d, lambda n: True))) == 3
assert io.delete(d + "/a/m.avro") and not io.delete(d + "/a/m.avro")
assert "fsspec" not in sys.modules, "fsspec was imported"
"""
    repo = Path(__file__).resolve().parents[3]
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(repo)})
    assert run.returncode == 0, run.stderr


def test_an_object_replaced_while_it_is_read_is_not_taken_for_the_version_headed(s3_env: str) -> None:
    """What read_with_identity relies on: s3fs reads with If-Match on the ETag its open() headed, so
    bytes of a newer version never pass for the version whose identity was taken (FileExpired)."""
    create_bucket(s3_env, "icectl-cache-ident")
    fs = s3_filesystem(s3_env)
    fs.pipe_file("icectl-cache-ident/r.avro", b"a" * 50)
    io = FileIO()
    ours, p = io.filesystem("s3://icectl-cache-ident/r.avro")
    with ours.open(p, "rb") as f:
        headed = f.details["ETag"]
        fs.pipe_file("icectl-cache-ident/r.avro", b"b" * 50)  # another writer, between HEAD and GET
        with pytest.raises(OSError) as e:
            f.read()
    assert type(e.value).__name__ == "FileExpired"
    assert io.identity("s3://icectl-cache-ident/r.avro").version.split(":")[0] != headed  # type: ignore[union-attr]
