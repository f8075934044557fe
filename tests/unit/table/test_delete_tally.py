"""The count of an interrupted delete run (the CLI side, with a real SIGINT: tests/cli/test_interrupted_deletes.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from icectl.storage import FileIO
from icectl.table.delete_fence import delete_with_checksum
from icectl.table.delete_tally import DeletesInterrupted, deleting


def test_ctrl_c_in_a_run_says_how_many_of_the_planned_files_went(tmp_path: Path) -> None:
    files = [tmp_path / f"f{i}" for i in range(10)]
    for f in files:
        f.write_bytes(b"x")
    io = FileIO()
    with pytest.raises(DeletesInterrupted) as e, deleting(10, "test files", "run it again"):
        with ThreadPoolExecutor(4) as pool:  # deleted from other threads: counted all the same
            assert all(pool.map(lambda f: delete_with_checksum(io, str(f)), files[:6]))
        assert not delete_with_checksum(io, str(files[0]))  # already gone: not counted
        raise KeyboardInterrupt
    assert isinstance(e.value, KeyboardInterrupt)  # still exit 130
    assert str(e.value) == "deleted 6 of 10 test files before the interrupt; run it again"


def test_outside_a_run_nothing_is_counted_and_a_nested_run_adds_to_its_outer(tmp_path: Path) -> None:
    io = FileIO()
    for name in "abc":
        (tmp_path / name).write_bytes(b"x")
    assert delete_with_checksum(io, str(tmp_path / "a"))
    with deleting(2, "files", "") as outer:
        with deleting(1, "files", "") as inner:
            delete_with_checksum(io, str(tmp_path / "b"))
        delete_with_checksum(io, str(tmp_path / "c"))
    assert (inner.deleted, outer.deleted) == (1, 2)
    with pytest.raises(ValueError, match="not an interrupt"), deleting(1, "files", "finish it"):
        raise ValueError("not an interrupt")  # passes unchanged
