"""table/reach: the one list of categories, reachability over a table's snapshots, and the local
engine's set algebra (what expired snapshots alone reach). Ported from the i28-reach branch onto
main's API."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.codec.avro_native import native_enabled
from icectl.engine import LocalEngine
from icectl.ops.expire.result import EXPIRE_CATEGORIES
from icectl.ops.lifecycle.drop import DROP_CATEGORIES
from icectl.storage import FileIO
from icectl.table import load_table, reach
from icectl.table.reach import CATEGORIES, FileSet, ReadCache, files_to_delete, reachable_files


def _run(wh: Path, *args: str) -> str:
    r = CliRunner().invoke(app, list(args), env={"ICECTL_WAREHOUSE": str(wh), "ICECTL_CONFIG": ""})
    assert r.exit_code == 0, r.stderr
    return r.stdout


def _table(tmp_path: Path, appends: int) -> tuple[Path, list[int]]:
    wh = tmp_path / "wh"
    _run(wh, "create", "db.t", "--schema", "id long")
    d = wh / "db" / "t"
    ids = []
    for n in range(appends):
        f = d / "data" / f"f{n}.parquet"
        f.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([n], pa.int64())}), f)
        ids.append(int(json.loads(_run(wh, "add-files", "db.t", str(f), "--json"))["snapshot_id"]))
    return d, ids


def test_one_list_of_categories() -> None:
    assert CATEGORIES == ("data_files", "position_delete_files", "equality_delete_files", "manifest_files",
                          "manifest_lists", "statistics_files")
    assert EXPIRE_CATEGORIES is CATEGORIES
    assert DROP_CATEGORIES == (*CATEGORIES, "metadata_files")


def test_a_file_counts_once_in_its_first_category() -> None:
    s = FileSet()
    s.add("/t/a", "manifest_lists")
    s.add("/t/a", "data_files")
    s.add("/t/b", "data_files")
    assert s.by_category()["manifest_lists"] == ["/t/a"] and s.by_category()["data_files"] == ["/t/b"]
    assert set(s.minus(FileSet({"/t/a": ("/t/a", "data_files")})).paths) == {"/t/b"}


def test_reachable_files_of_some_snapshots(tmp_path: Path) -> None:
    d, ids = _table(tmp_path, 3)
    md = load_table(str(d)).metadata
    got, manifests = reachable_files(md, ids[:2], FileIO())
    cats = got.by_category()
    assert [Path(p).name for p in cats["data_files"]] == ["f0.parquet", "f1.parquet"]
    assert len(cats["manifest_lists"]) == 2 and set(cats["manifest_files"]) == manifests and len(manifests) == 2


def test_local_engine_doomed_files_is_the_local_set_algebra(tmp_path: Path) -> None:
    d, ids = _table(tmp_path, 3)
    md = load_table(str(d)).metadata
    after = md.replace(snapshots=[s for s in md.snapshots if s.snapshot_id != ids[0]])
    doomed = LocalEngine().doomed_files(md, [ids[0]], after, FileIO(), ReadCache())
    # appends: every manifest stays listed by a later snapshot, only the first list goes
    assert [c for _p, c in doomed.files.values()] == ["manifest_lists"]
    assert doomed.files == files_to_delete(md, [ids[0]], after, FileIO()).files
    extra = FileSet()
    extra.add(str(d / "data" / "left.parquet"), "data_files")
    seen: list[set[str]] = []
    with_extra = LocalEngine().doomed_files(md, [ids[0]], after, FileIO(), ReadCache(),
                                            extra=lambda kept: (seen.append(kept), extra)[1])
    assert seen and seen[0]  # told the manifests that stay reachable
    assert sorted(c for _p, c in with_extra.files.values()) == ["data_files", "manifest_lists"]


def _columns(paths: list[str], category: str) -> tuple[pa.Array, pa.Array]:
    return pa.array(paths), pa.array([category] * len(paths))


def test_columns_and_single_adds_keep_the_lowest_rank_then_the_smallest_spelling(tmp_path: Path) -> None:
    """A file added several times (as column rows or one by one, through a symlink alias or spelled
    another way) counts once: in its category of lowest rank, then its smallest spelling, as the
    Spark twin picks; the dict form agrees."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_bytes(b"x")
    (tmp_path / "d" / "alias").symlink_to(tmp_path / "d" / "a")
    a, alias = str(tmp_path / "d" / "a"), str(tmp_path / "d" / "alias")
    b, b_plain, b_dots = f"file:{tmp_path}/d/b", f"{tmp_path}/d/b", f"{tmp_path}/d/../d/b"
    s = FileSet()
    s.add(a, "data_files")
    s.add_columns(*_columns([alias, b, b_dots], "data_files"))
    s.add_columns(*_columns([a], "manifest_lists"))  # a lower rank, added later: it wins
    assert len(s) == 2
    assert s.by_category()["manifest_lists"] == [a]
    assert s.by_category()["data_files"] == [min(b, b_dots)]  # ranks tie: the smallest spelling
    assert s.categories() == {"manifest_lists", "data_files"}
    one_by_one = FileSet({})
    for p, c in [(a, "data_files"), (alias, "data_files"), (b, "data_files"), (b_dots, "data_files"),
                 (a, "manifest_lists")]:
        one_by_one.add(p, c)
    assert one_by_one.by_category() == s.by_category()
    assert FileSet(dict(s.files)).by_category() == s.by_category()
    assert s.files[str((tmp_path / "d" / "a").resolve())] == (a, "manifest_lists")
    s.add(b_plain, "manifest_files")
    assert s.by_category()["manifest_files"] == [b_plain] and s.by_category()["data_files"] == []
    # minus, columns against dict, dict against columns: by identity
    other = FileSet()
    other.add_columns(*_columns([alias], "data_files"))
    assert set(s.minus(other).paths) == {b_plain}
    assert set(FileSet(dict(s.files)).minus(other).paths) == {b_plain}
    both = FileSet()
    both.update(s)
    both.update(other)
    assert both.by_category() == s.by_category()


def _counting(real: Any, batches: list[int]) -> Any:
    def counted(datas: Any, *args: Any) -> Any:
        batches.append(len(datas))
        return real(datas, *args)

    return counted


def test_reach_decodes_the_same_files_natively_and_with_the_reader(spark_tables,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The batched native path and the one-by-one reader reach the same files, in the same categories."""
    if not native_enabled():  # a damaged-file read that hung DataFusion turned it off in this process
        pytest.skip("native decoding is off in this process")
    for kind in ("v1_unpart", "v2_part", "v3_dv", "many_snaps"):
        t = load_table(str(spark_tables[kind].location))
        md = t.metadata
        ids = [s.snapshot_id for s in md.snapshots]
        batches: list[int] = []
        with monkeypatch.context() as mp:
            mp.setattr(reach, "live_files", _counting(reach.live_files, batches))
            native, _ = reachable_files(md, ids, t.io, cache=ReadCache())
        assert batches and sum(batches) >= len(md.snapshots), kind  # the batched path was taken
        with monkeypatch.context() as mp:
            mp.setenv("ICECTL_AVRO_DECODER", "fastavro")
            reader, _ = reachable_files(md, ids, t.io, cache=ReadCache())
        assert native.files == reader.files, kind
        assert any(c == "data_files" for _p, c in native.files.values())
