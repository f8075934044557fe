"""`icectl compact` with the Spark engine (issue 17) equals the local engine, on each Spark fixture.

A clone of a fixture is compacted on the local engine, put back as it was, then compacted on Spark
(``local[2]``: manifests decoded and new manifests written by Spark tasks, the commit on the
driver); both runs see the very same files. Judged:

- the same result JSON, once the new snapshot id, the commit uuids and the new manifests' byte
  counts (their headers hold the snapshot id) are masked; the same snapshot summary;
- the same new manifests: manifest-list rows (counts, partition summaries, ``first_row_id``) and
  their decoded entries in order (status, snapshot id, sequence numbers, every data_file field);
- Spark reads the same rows afterwards as from the snapshot before;
- Spark tasks ran (the engine's task count grew);
- a v4 table (``upgrade --to 4``) compacts identically;
- a failing commit leaves no file the executors wrote; a damaged manifest (its bytes, decoded on an
  executor) is the same error, with the same exit code, on both engines and writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import FIXTURE_KINDS, FixtureTable
from support.spark import latest_metadata_json, table_rows_digest
from typer.testing import CliRunner

import icectl.engine
from icectl.cli.app import app
from icectl.errors import IcectlError, StorageError
from icectl.ops.compact import distribute
from icectl.ops.compact import run as compact_run
from icectl.ops.compact.manifests import compact
from icectl.ops.compact.plan import CompactOptions
from icectl.table import load_table
from icectl.table.manifest_read import ReadOptions, manifest_entries
from icectl.table.scan import manifests_of
from icectl.table.scan_v4 import read_leaf

SIZES = {"bytes", "bytes_out"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Small enough that most groups roll into several manifests: bins spread over Spark's tasks.
TARGET = {"v2_part": 16 * 1024}


def _sizeless(doc: Any) -> Any:
    # The new manifests' sizes: their headers hold the snapshot id, whose digits vary.
    if isinstance(doc, dict):
        return {k: "<n>" if k in SIZES else _sizeless(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_sizeless(v) for v in doc]
    return doc


def _masked(doc: Any, loc: Path, snapshot_id: int | None) -> str:
    text = json.dumps(_sizeless(doc), sort_keys=True, default=repr).replace(str(loc), "<T>")
    if snapshot_id is not None:
        text = text.replace(str(snapshot_id), "0")  # a number: still JSON
    return UUID.sub("<uuid>", text)


def _new_content(loc: Path, snapshot_id: int) -> list[str]:
    """Each manifest (v4: leaf) the snapshot added: its listing row and its entries in file order."""
    table = load_table(str(loc))
    md = table.metadata
    snap = md.snapshot_by_id(snapshot_id)
    assert snap is not None
    out = []
    for m in manifests_of(md, snap, table.io, use_cache=False):
        if m.added_snapshot_id != snapshot_id:
            continue
        ptype = md.partition_type(m.partition_spec_id)
        if md.format_version >= 4:
            entries = read_leaf(md, table.io, m, ptype, options=ReadOptions(use_cache=False))
        else:
            entries = manifest_entries(table.io, m, partition_type=ptype, format_version=md.format_version,
                                       options=ReadOptions(use_cache=False))
        row = repr(dataclasses.replace(m, manifest_path="", manifest_length=0))  # file names are random
        out.append(_masked({"manifest": row, "entries": [repr(e) for e in entries]}, loc, snapshot_id))
    return out


def _compacted(t: FixtureTable, options: CompactOptions, engine: Any) -> tuple[str, str, list[str]]:
    """Compact on ``engine``: the masked result, the new snapshot's summary, the new manifests."""
    with icectl.engine.using(engine):
        data = compact(load_table(str(t.location)), options).data
    snapshot_id = data["snapshot_id"]
    snap = next(s for s in latest_metadata_json(t.location)["snapshots"] if s["snapshot-id"] == snapshot_id)
    return (_masked(data, t.location, snapshot_id), _masked(snap["summary"], t.location, snapshot_id),
            _new_content(t.location, snapshot_id))


def _same(on_spark: tuple[str, str, list[str]], on_local: tuple[str, str, list[str]]) -> None:
    for what, a, b in zip(("result", "summary", "manifests"), on_spark, on_local, strict=True):
        assert a == b, f"{what} differs:\n{a}\n{b}"


def _on_both(t: FixtureTable, options: CompactOptions, engine: Any, keep: Path) -> tuple[str, str, list[str]]:
    """Compact ``t`` on the local engine, put the table back as it was, compact it on ``engine``: both
    runs see the very same files (twin clones would differ in their paths, inside delete files too)."""
    put_back = _restorer(t, keep)
    on_local = _compacted(t, options, icectl.engine.LocalEngine())
    put_back()
    mark = engine.mark()
    on_other = _compacted(t, options, engine)
    if engine.name == "spark":
        assert engine.report_since(mark).spark_tasks > 0  # Spark tasks read and wrote the manifests
    _same(on_other, on_local)
    return on_local


def _restorer(t: FixtureTable, keep: Path) -> Callable[[], None]:
    """A function that puts the table back as it is now. A commit adds files, may delete old metadata
    files and rewrites the Hadoop catalog's version hint: every file is hard-linked under ``keep``
    (instant, and a deleted file's bytes stay), the version hint and its .crc are kept as bytes."""
    root = Path(t.location)
    stat = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}
    hints = {p: p.read_bytes() for p in stat if p.name in ("version-hint.text", ".version-hint.text.crc")}
    for p in stat:
        if p not in hints:
            (keep / p.relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
            os.link(p, keep / p.relative_to(root))

    def put_back() -> None:
        for p in root.rglob("*"):
            if p.is_file() and p not in stat:
                p.unlink()
        for p in stat:
            if p not in hints and not p.exists():
                os.link(keep / p.relative_to(root), p)
        for p, data in hints.items():
            p.write_bytes(data)
            os.utime(p, ns=(stat[p][1], stat[p][1]))
        now = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}
        assert now == stat

    return put_back


def _files(t: FixtureTable) -> set[str]:
    return {str(p) for p in Path(t.location).rglob("*") if p.is_file()}


def _spark_reads_as_before(spark: Any, t: FixtureTable, pre_id: int) -> None:
    """Spark reads the same rows from the head as from the snapshot before compaction."""
    spark.catalog.refreshTable(t.name)  # Spark may have cached the table before it was put back
    now = table_rows_digest(spark, t.name)
    assert now == table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF {pre_id}") and now[0] > 0


@pytest.mark.parametrize("kind", FIXTURE_KINDS)
def test_spark_engine_compacts_each_fixture_as_the_local_engine(
        spark: Any, spark_clone: Callable[..., FixtureTable], spark_engine: Any, tmp_path: Path, kind: str) -> None:
    t = spark_clone(kind)
    pre_id = latest_metadata_json(t.location)["current-snapshot-id"]
    result_json, _summary, manifests = _on_both(t, CompactOptions(target_size=TARGET.get(kind)), spark_engine,
                                                tmp_path)
    result = json.loads(result_json)
    assert result["manifests_replaced"] > 1 and len(manifests) == result["manifests_created"], result
    if kind in TARGET:
        assert result["manifests_created"] >= 2, result
    _spark_reads_as_before(spark, t, pre_id)


def _icectl(*args: str, expect: int = 0) -> dict[str, Any]:
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == expect, r.stderr
    return json.loads(r.stdout) if r.stdout.strip() else {}


def test_v4_compaction_on_spark_equals_local(spark_clone: Callable[..., FixtureTable], spark_engine: Any,
                                             tmp_path: Path) -> None:
    # Many small v2 manifests (v4 compaction rewrites data manifests only: carried-over delete
    # manifests stay as they are): under half of 64 KiB each, they merge into Parquet leaves.
    t = spark_clone("many_appends")
    _icectl("upgrade", str(t.location), "--to", "4", "--yes")
    entries = _icectl("inspect", "entries", str(t.location))["rows"]
    result_json, _summary, leaves = _on_both(t, CompactOptions(target_size=65536), spark_engine, tmp_path)
    result = json.loads(result_json)
    assert result["format_version"] == 4 and result["manifests_replaced"] > 1 and leaves, result
    after = _icectl("inspect", "entries", str(t.location))["rows"]
    assert _live(after) == _live(entries)


def _live(rows: list[dict[str, Any]]) -> list[str]:
    """Live entries as icectl lists them, file_format in v4's lower case (the leaves' spelling) and
    without column sizes (v4's content stats have no place for them)."""
    out = []
    for r in rows:
        if r["status"] != 2:
            r["data_file"]["file_format"] = r["data_file"]["file_format"].lower()
            r["data_file"].pop("column_sizes", None)
            out.append(json.dumps({k: v for k, v in r.items() if k not in ("status", "manifest_path")},
                                  sort_keys=True))
    return sorted(out)


def test_a_failed_commit_leaves_no_executor_written_file(
        spark_clone: Callable[..., FixtureTable], spark_engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    t = spark_clone("v2_part")
    before = _files(t)
    written: list[str] = []

    def fails(table: Any, branch: str, change: Any, **kw: Any) -> Any:
        written.extend(change.written)
        assert all(Path(p.removeprefix("file:")).is_file() for p in written)  # the executors wrote them
        raise StorageError("the catalog refused the commit")

    monkeypatch.setattr(compact_run, "write_snapshot", fails)
    with icectl.engine.using(spark_engine), pytest.raises(StorageError):
        compact(load_table(str(t.location)), CompactOptions(target_size=TARGET["v2_part"]))
    assert len(written) >= 2
    assert _files(t) == before  # no manifest, manifest list or metadata file left


def _damage(t: FixtureTable) -> None:
    """Garble the records of the head's first manifest, before its trailing sync marker (same
    length: only decoding the records, on an executor with Spark, finds it)."""
    table = load_table(str(t.location))
    m = manifests_of(table.metadata, table.metadata.current_snapshot(), table.io)[0]
    path = Path(m.manifest_path.removeprefix("file:"))
    data = bytearray(path.read_bytes())
    data[-80:-20] = bytes(range(60))
    path.write_bytes(bytes(data))


def test_a_damaged_manifest_is_the_same_error_on_both_engines(
        spark_clone: Callable[..., FixtureTable], spark_engine: Any, tmp_path: Path) -> None:
    t = spark_clone("v1_unpart")
    _damage(t)
    put_back = _restorer(t, tmp_path)
    errors = []
    for engine in (icectl.engine.LocalEngine(), spark_engine):
        put_back()
        before, mark = _files(t), spark_engine.mark()
        with icectl.engine.using(engine), pytest.raises(IcectlError) as e:
            compact(load_table(str(t.location)), CompactOptions())
        assert _files(t) == before  # nothing written
        tasks = spark_engine.report_since(mark).spark_tasks
        assert tasks > 0 if engine is spark_engine else tasks == 0  # Spark tasks met the damage
        errors.append((type(e.value), e.value.exit_code, e.value.message, e.value.path))
    assert errors[0] == errors[1]
    assert errors[0][1] == 4, errors


class PicklingEngine(icectl.engine.Engine):
    """An engine that runs each item as an executor would get it: the function by reference, the shared
    state and the item pickled, the result pickled back; it records the range keys it was given."""

    name = "pickling"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, bool]] = []

    def map(self, fn: Any, items: Any, *, shared: Any, description: str, range_keys: Any = None) -> Any:
        self.calls.append((description, len(items), range_keys is not None))
        fn, shared = pickle.loads(pickle.dumps(fn)), pickle.loads(pickle.dumps(shared))
        for item in items:
            yield pickle.loads(pickle.dumps(fn(shared, pickle.loads(pickle.dumps(item)))))


def test_bins_go_out_in_waves_and_each_manifest_is_read_once(
        spark_clone: Callable[..., FixtureTable], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = spark_clone("v2_part")
    engine = PicklingEngine()
    monkeypatch.setattr(distribute, "WAVE_ENTRIES", 1)  # every bin its own wave
    _on_both(t, CompactOptions(target_size=TARGET["v2_part"]), engine, tmp_path)
    reads = [c for c in engine.calls if c[0] == "reading manifests"]
    writes = [c for c in engine.calls if c[0] == "writing manifests"]
    assert len(reads) == 1 and len(writes) >= 2 and all(n == 1 and keyed for _, n, keyed in writes), engine.calls
    seen = list(distribute.map_distinct(engine, _twice, [3, 4, 3], lambda i: i, shared=10, description="d"))
    assert seen == [(3, 60), (4, 80), (3, 60)] and engine.calls[-1] == ("d", 2, False)


def _twice(shared: int, item: int) -> int:
    return shared * item * 2
