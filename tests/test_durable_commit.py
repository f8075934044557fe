"""Commits on local disks are durable: the new metadata file is flushed before it is published
and its folder after (likewise version-hint.text); and Spark's ``.version-hint.text.crc`` never
goes stale when icectl rewrites the hint (Hadoop itself judges)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from icectl.catalog.hadoop import VERSION_HINT
from icectl.commit import commit, set_properties
from icectl.table import load_table


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to name file descriptors")
def test_metadata_and_hint_are_flushed_around_publication(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_expire import Tbl

    t = Tbl(tmp_path / "wh")
    table = load_table(str(t.dir))
    meta = str(t.dir / "metadata")
    events: list[tuple[str, str]] = []
    real_fsync, real_link, real_replace = os.fsync, os.link, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", _fd_path(fd)))
        real_fsync(fd)

    def link(src: Any, dst: Any, *a: Any, **k: Any) -> None:
        events.append(("link", str(dst)))
        real_link(src, dst, *a, **k)

    def replace(src: Any, dst: Any, *a: Any, **k: Any) -> None:
        events.append(("replace", f"{src} -> {dst}"))
        real_replace(src, dst, *a, **k)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "replace", replace)
    result = commit(table, lambda md: set_properties(md, {"k": "v"}))
    final = result.metadata_location
    kinds = [e[0] for e in events]
    i_link = kinds.index("link")
    assert events[i_link] == ("link", final)
    # Before link: the temporary file (the same inode final now names) is flushed.
    before = [p for k, p in events[:i_link] if k == "fsync"]
    assert before and before[-1].endswith(".metadata.json") and os.path.dirname(before[-1]) == meta
    assert ("fsync", meta) in events[i_link + 1:]  # the folder, after the new name exists
    i_replace = kinds.index("replace")
    assert events[i_replace][1].endswith(f"-> {meta}/{VERSION_HINT}")
    hint_tmp = events[i_replace][1].split(" -> ")[0]
    assert ("fsync", hint_tmp) in events[i_link:i_replace]  # the hint's content before the rename
    assert ("fsync", meta) in events[i_replace + 1:]
    assert (t.dir / "metadata" / VERSION_HINT).read_text() == final.rsplit("/v", 1)[1].split(".")[0]
