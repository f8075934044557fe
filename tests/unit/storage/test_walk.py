"""``icectl.storage.walk_files``: the streaming, parallel recursive listing remove-orphan-files uses.

Judged against ``os.walk`` of the same tree.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from icectl.errors import NotFoundError
from icectl.storage import FileIO, walk_files


def visible(name: str) -> bool:
    return not name.startswith(("_", "."))


def tree(root: Path, shape: list[int]) -> set[str]:
    """Folders ``shape[0]`` wide at the first level, ``shape[1]`` at the second...; 3 files in each."""
    out: set[str] = set()

    def fill(d: Path, depth: int) -> None:
        d.mkdir(parents=True, exist_ok=True)
        for i in range(3):
            (d / f"f{i}.bin").write_bytes(b"x")
            out.add(str(d / f"f{i}.bin"))
        for j in range(shape[depth] if depth < len(shape) else 0):
            fill(d / f"d{j}", depth + 1)

    fill(root, 0)
    return out


@pytest.mark.parametrize("shape", [[], [1], [1, 1, 1, 1], [2, 3], [12], [1, 20, 2]])
@pytest.mark.parametrize("workers", [1, 2, 8])
def test_every_file_exactly_once(tmp_path: Path, shape: list[int], workers: int) -> None:
    want = tree(tmp_path / "t", shape)
    got = [f.path for f in walk_files(FileIO(), str(tmp_path / "t"), visible, workers=workers)]
    assert sorted(got) == sorted(want)
    spelled = [f.path for f in walk_files(FileIO(), f"file:{tmp_path / 't'}", visible, workers=workers)]
    assert sorted(spelled) == sorted(f"file:{p}" for p in want)  # in the spelling of the folder given


def test_hidden_names_are_neither_listed_nor_entered(tmp_path: Path) -> None:
    want = tree(tmp_path / "t", [2])
    (tmp_path / "t" / "_tmp" / "deep").mkdir(parents=True)
    (tmp_path / "t" / "_tmp" / "deep" / "x").write_bytes(b"x")
    (tmp_path / "t" / "d0" / ".x.crc").write_bytes(b"x")
    seen: list[str] = []

    def accept(name: str) -> bool:
        seen.append(name)
        return visible(name)

    got = {f.path for f in walk_files(FileIO(), str(tmp_path / "t"), accept, workers=2)}
    assert got == want
    assert "deep" not in seen  # _tmp was not entered


def test_links_are_reported_and_folder_links_not_entered(tmp_path: Path) -> None:
    tree(tmp_path / "t", [1])
    outside = tmp_path / "outside"
    tree(outside, [])
    os.symlink(outside, tmp_path / "t" / "d0" / "dirlink")
    os.symlink(outside / "f0.bin", tmp_path / "t" / "filelink.bin")
    os.symlink(tmp_path / "missing", tmp_path / "t" / "dangling.bin")
    got = {f.path: f for f in walk_files(FileIO(), str(tmp_path / "t"), visible)}
    assert not any("dirlink" in p for p in got)
    assert got[str(tmp_path / "t" / "filelink.bin")].is_link
    assert got[str(tmp_path / "t" / "dangling.bin")].is_link
    assert not got[str(tmp_path / "t" / "f0.bin")].is_link


def test_mtime_is_whole_milliseconds(tmp_path: Path) -> None:
    f = tmp_path / "t" / "a.bin"
    f.parent.mkdir()
    f.write_bytes(b"abc")
    os.utime(f, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    (got,) = walk_files(FileIO(), str(tmp_path / "t"), visible)
    assert (got.mtime_ms, got.size) == (1_700_000_000_123, 3)


def test_missing_folder_and_early_stop(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        list(walk_files(FileIO(), str(tmp_path / "nope"), visible))
    tree(tmp_path / "t", [10, 10])
    it = walk_files(FileIO(), str(tmp_path / "t"), visible, workers=2)
    for _ in range(5):  # past the root's 3 files: the workers are running
        next(it)
    assert any(t.name.startswith("icectl-list") for t in threading.enumerate())
    before = threading.active_count()
    it.close()  # the consumer stops: workers must end, not block on a full queue
    assert threading.active_count() <= before
    # close() does not join them (icectl.threads: a join during garbage collection can deadlock);
    # they see the stop and end on their own
    deadline = time.monotonic() + 10
    while any(t.name.startswith("icectl-list") for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(t.name.startswith("icectl-list") for t in threading.enumerate())
