"""table/deletes: the one delete loop expire-snapshots, remove-orphan-files and drop --purge share
(ported from the i28-reach branch onto main's ``delete_checked`` / ``delete_file_set``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from icectl.storage import FileIO
from icectl.table.deletes import delete_checked, delete_file_set
from icectl.table.reach import CATEGORIES, FileSet


def _files(tmp_path: Path, names: dict[str, str]) -> FileSet:
    out = FileSet()
    for name, category in names.items():
        p = tmp_path / name
        p.write_bytes(b"x")
        out.add(str(p), category)
    return out


def test_categories_go_one_after_the_other_in_javas_order() -> None:
    done: list[str] = []
    lock = threading.Lock()

    def one(_shared: None, item: tuple[str, str]) -> bool:
        with lock:
            done.append(item[0])
        return True

    # handed over in the reverse order: the loop puts them in the order of ``categories``
    items = [(c, (c, str(i))) for c in reversed(CATEGORIES) for i in range(5)]
    outcome = delete_checked(items, categories=CATEGORIES, shared=None, delete=one, workers=8)
    assert done == sorted(done, key=CATEGORIES.index)  # never a later category before an earlier one
    assert outcome.deleted == dict.fromkeys(CATEGORIES, 5)
    assert outcome.already_gone == 0 and outcome.failures == []


def test_counts_already_gone_and_failures(tmp_path: Path) -> None:
    files = _files(tmp_path, {"d.parquet": "data_files", "m.avro": "manifest_files", "l.avro": "manifest_lists"})
    (tmp_path / "m.avro").unlink()  # already gone: counted apart, not a failure
    (tmp_path / "l.avro").unlink()
    (tmp_path / "l.avro").mkdir()  # a folder where a file was: the delete fails
    (tmp_path / "l.avro" / "x").write_bytes(b"x")
    outcome = delete_file_set(FileIO(), files, workers=4)
    assert outcome.deleted == {**dict.fromkeys(CATEGORIES, 0), "data_files": 1}
    assert outcome.already_gone == 1
    assert len(outcome.failures) == 1 and outcome.failures[0].startswith(f"{tmp_path / 'l.avro'}: ")
    assert not (tmp_path / "d.parquet").exists()


def test_on_the_executor_when_asked(tmp_path: Path) -> None:
    files = _files(tmp_path, {"s.stats": "statistics_files", "d.parquet": "data_files"})
    calls: list[tuple[list[Any], str]] = []

    def remote(fn: Any, items: list[Any], shared: Any, description: str) -> list[Any]:
        calls.append((items, description))
        return [fn(shared, i) for i in items]

    outcome = delete_file_set(FileIO(), files, workers=4, executor=remote)
    assert len(calls) == 1  # every delete went to the executor, none here
    assert [Path(p).name for p, _target in calls[0][0]] == ["d.parquet", "s.stats"]  # Java's order
    assert calls[0][1] == "deleting files"
    assert outcome.deleted["data_files"] == outcome.deleted["statistics_files"] == 1
    assert not any(tmp_path.iterdir())


def test_failure_is_worded_by_the_caller() -> None:
    outcome = delete_checked([("orphan_files", "a"), ("orphan_files", "b")], categories=("orphan_files",),
                             shared=None, delete=lambda _s, p: True if p == "a" else "not deleted", workers=2,
                             description="deleting orphan files", failure=lambda item, why: f"{item}: {why}")
    assert outcome.deleted == {"orphan_files": 1} and outcome.failures == ["b: not deleted"]
