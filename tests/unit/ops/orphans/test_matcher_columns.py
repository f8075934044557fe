"""remove-orphan-files' matcher judges a listing the same whether the valid files are indexed one
by one (the Spark engine's way, and every path before issue 31) or kept as Arrow columns (the local
engine at scale): every verdict and every prefix-mismatch pair, on spellings chosen to differ."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from icectl.ops.orphans import EQUAL_SCHEMES_DEFAULT, Matcher, ValidFiles
from icectl.storage.path_arrays import identities


def _valid_columns(paths: list[str]) -> pa.Table:
    arr = pa.array(paths, pa.large_string())
    return pa.table({"identity": identities(arr), "path": arr, "category": pa.array(["data_files"] * len(paths))})


@pytest.mark.parametrize("authorities", [{}, {"other": "bucket"}])
def test_columns_and_one_by_one_give_the_same_verdicts(tmp_path: Path, authorities: dict[str, str]) -> None:
    d = tmp_path / "t" / "data"
    d.mkdir(parents=True)
    for name in ("a.parquet", "b.parquet", "c.parquet"):
        (d / name).write_bytes(b"x")
    os.symlink(d / "a.parquet", d / "alias.parquet")
    valid = [f"file:{d}/a.parquet", f"{d}/b.parquet", "s3://bucket/t/data/x.parquet", "s3a://other/t/data/y.parquet",
             "s3://bucket/t/data/z.parquet#frag", "s3://bucket/t/data/dir/", "gs://b/t/data/w.parquet",
             "hdfs://nn:8020/t/data/v.parquet"]
    listed = [f"{d}/a.parquet", f"file:{d}/a.parquet", f"{d}/alias.parquet", f"{d}/b.parquet", f"file:{d}/c.parquet",
              f"{d}/.a.parquet.crc", f"{d}/.c.parquet.crc", "s3://bucket/t/data/x.parquet",
              "s3a://bucket/t/data/x.parquet", "s3://other/t/data/x.parquet", "s3://bucket/t/data/y.parquet",
              "gs://bucket/t/data/x.parquet", "s3://bucket/t/data/z.parquet", "s3://bucket/t/data/dir",
              "gs://b/t/data/w.parquet", "gs://c/t/data/w.parquet", "hdfs://nn:8020/t/data/v.parquet",
              "hdfs://other:8020/t/data/v.parquet", "s3://bucket/t/data/orphan.parquet", f"{d}/orphan.parquet"]
    one = Matcher(EQUAL_SCHEMES_DEFAULT, authorities)
    one.index(ValidFiles(dict.fromkeys(valid, "data_files")))
    cols = Matcher(EQUAL_SCHEMES_DEFAULT, authorities)
    cols.index(ValidFiles({}, columns=_valid_columns(valid)))
    assert not cols.by_path  # nothing indexed one by one before a listing asks
    want = one.judge_all(listed)
    assert cols.judge_all(listed) == want
    verdicts = {p: v for p, (v, _c) in zip(listed, want, strict=True)}
    # the cases are really different ones
    assert verdicts[f"{d}/alias.parquet"] == "valid" and verdicts[f"{d}/.a.parquet.crc"] == "valid"
    assert verdicts[f"file:{d}/c.parquet"] == "orphan" and verdicts[f"{d}/.c.parquet.crc"] == "orphan"
    assert verdicts["s3a://bucket/t/data/x.parquet"] == "valid"  # s3a = s3
    assert verdicts["s3://other/t/data/x.parquet"] == ("valid" if authorities else "mismatch")
    assert verdicts["s3://bucket/t/data/z.parquet"] == "valid"  # the fragment is no part of the path
    assert verdicts["s3://bucket/t/data/y.parquet"] == ("valid" if authorities else "mismatch")
    assert len(cols.by_path) < len(valid)  # only the valid files a listed one could be were indexed
