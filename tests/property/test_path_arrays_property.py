"""The Arrow path rules (icectl.storage.path_arrays) give row for row what their one-path twins give,
on random spellings built from the pieces that matter (schemes, authorities, slashes, the characters
urlparse splits on, links on a real disk) and on a fixed list of awkward ones."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from icectl.storage.path_arrays import first_relative, identities, member_mask, relative_mask
from icectl.storage.paths import is_relative_path, path_identity

AWKWARD = [
    "/x", "/", "//", "///x", "/a//b/", "/a/./b", "/a/../b", "/a/b/.", "/a/b/..", "x", "./x", "", "file:", "file:x",
    "file:/x", "file:///x", "file:////x", "file://host/x", "file://host", "FILE:/x", "File:///x", "file:/a;b",
    "file:/a?b", "file:/a#b", "s3://b/x", "S3A://b/x/", "s3n://b//x//", "s3:/b/x", "s3:b", "s3://", "s3://[b/x",
    "s3://b]/x", "gs://b/x", "hdfs://nn:8020/a/b", "abfss://c@acct.dfs.core.windows.net/t/x", "C:/x", "c:\\x",
    "a:b", "ab:c", "1a:/x", "+a:/x", "s3://b/x?y", "s3://b/x#y", "s3://b/x;y", "s3://b/ü", "s3://ü/x", "/ü/x",
    "s3://b/\tx", " s3://b/x", "\ts3://b/x", "//host/x", "//h[/x", "/a:b/c", "http://h/x?q#f", "s3a://b/x",
]


def _one_identity(p: str, folders: dict[str, str]) -> object:
    try:
        return path_identity(p, folders)
    except Exception as e:
        return type(e)


def _arrays_identity(paths: list[str], folders: dict[str, str]) -> list[object]:
    out = []
    # Row by row where the batch raises: the batch must raise exactly where a row does.
    try:
        return identities(pa.array(paths, pa.string()), folders).to_pylist()
    except Exception:
        for p in paths:
            try:
                out.append(identities(pa.array([p], pa.string()), folders).to_pylist()[0])
            except Exception as e:
                out.append(type(e))
        return out


def _one_relative(p: str) -> object:
    try:
        return is_relative_path(p)
    except Exception as e:
        return type(e)


def _arrays_relative(paths: list[str]) -> list[object]:
    try:
        return relative_mask(pa.array(paths, pa.string())).to_pylist()
    except Exception:
        out: list[object] = []
        for p in paths:
            try:
                out.append(relative_mask(pa.array([p], pa.string())).to_pylist()[0])
            except Exception as e:
                out.append(type(e))
        return out


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a file, a link to it, a link to a folder elsewhere, and a folder link."""
    root = tmp_path_factory.mktemp("paths")
    (root / "t" / "data").mkdir(parents=True)
    (root / "t" / "data" / "a.parquet").write_bytes(b"x")
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "b.parquet").write_bytes(b"y")
    os.symlink(root / "t" / "data" / "a.parquet", root / "t" / "data" / "alias.parquet")
    os.symlink(root / "elsewhere" / "b.parquet", root / "t" / "data" / "out.parquet")
    os.symlink(root / "elsewhere", root / "t" / "linked")
    os.symlink(root / "t" / "data" / "missing", root / "t" / "data" / "dangling.parquet")
    return root


def _disk_paths(root: Path) -> list[str]:
    names = ["a.parquet", "alias.parquet", "out.parquet", "dangling.parquet", "none.parquet", ".", "..", ""]
    out = []
    for folder in ("t/data", "t/linked", "t/nowhere", "t/data/a.parquet", "elsewhere", "t/../t/data", "t//data"):
        for n in names:
            out += [f"{root}/{folder}/{n}", f"file:{root}/{folder}/{n}", f"file://{root}/{folder}/{n}"]
    return out


def test_awkward_spellings_agree(disk: Path) -> None:
    paths = AWKWARD + _disk_paths(disk)
    folders: dict[str, str] = {}
    assert _arrays_identity(paths, {}) == [_one_identity(p, folders) for p in paths]
    assert _arrays_relative(paths) == [_one_relative(p) for p in paths]


def test_links_resolve_once_per_folder(disk: Path) -> None:
    """The link rows resolve to their targets; the plain rows to the folder's real path + name."""
    got = identities(pa.array([f"{disk}/t/data/alias.parquet", f"{disk}/t/linked/b.parquet",
                               f"file:{disk}/t/data/out.parquet", f"{disk}/t/data/a.parquet"])).to_pylist()
    real = os.path.realpath(disk)
    assert got == [f"{real}/t/data/a.parquet", f"{real}/elsewhere/b.parquet", f"{real}/elsewhere/b.parquet",
                   f"{real}/t/data/a.parquet"]


def test_first_relative() -> None:
    assert first_relative(pa.array(["/a", "s3://b/x", "file:/y"])) is None
    assert first_relative(pa.array(["/a", "data/x.parquet", "file:z", "s3://b"])) == 1
    assert first_relative(pa.array(["/a", "file:z"])) == 1


PIECES = st.sampled_from(["", "/", "//", "a", "b.parquet", ".", "..", ":", "?", "#", ";", "[", "]", "%2F", "ü",
                          "\t", " ", "s3", "S3A", "file", "FILE", "gs", "c", "@", "=", "x y"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(PIECES, min_size=1, max_size=8).map("".join), min_size=1, max_size=20))
def test_random_spellings_agree(paths: list[str]) -> None:
    folders: dict[str, str] = {}
    assert _arrays_identity(paths, {}) == [_one_identity(p, folders) for p in paths]
    assert _arrays_relative(paths) == [_one_relative(p) for p in paths]


def test_common_spellings_take_no_row_by_row_path(monkeypatch: pytest.MonkeyPatch, disk: Path) -> None:
    """The spellings Spark, Java and icectl write are computed by the kernels alone."""
    import icectl.storage.path_arrays as pa_mod

    def refuse(*_a: object, **_k: object) -> object:
        raise AssertionError("the one-path rule was asked")

    monkeypatch.setattr(pa_mod, "path_identity", refuse)
    monkeypatch.setattr(pa_mod, "is_relative_path", refuse)
    common = [f"{disk}/t/data/a.parquet", f"file:{disk}/t/data/a.parquet", f"file://{disk}/t/data/alias.parquet",
              "s3://bucket/wh/db/t/data/x=1/00000-0-a.parquet", "s3a://bucket/t/m.avro", "gs://b/t/x.parquet",
              "hdfs://nn:8020/wh/t/x.parquet", "abfss://c@acct.dfs.core.windows.net/t/x.parquet"]
    got = identities(pa.array(common)).to_pylist()
    assert got[1] == got[2] == os.path.realpath(f"{disk}/t/data/a.parquet")
    assert got[3:5] == ["s3://bucket/wh/db/t/data/x=1/00000-0-a.parquet", "s3://bucket/t/m.avro"]
    assert relative_mask(pa.array(common)).to_pylist() == [False] * len(common)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcdefg"), max_size=30), st.lists(st.sampled_from("abcdxyz"), max_size=30))
def test_member_mask_is_is_in_whichever_side_is_hashed(values: list[str], others: list[str]) -> None:
    """Repeated values included: every copy of a value the other side holds is marked."""
    got = member_mask(pa.array(values, pa.large_string()), pa.array(others, pa.large_string())).to_pylist()
    assert got == [v in others for v in values]
