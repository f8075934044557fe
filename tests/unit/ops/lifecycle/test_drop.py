"""`icectl register` and `icectl drop [--purge]` on small tables icectl builds itself (no Spark).

The purge is judged file by file against a listing taken before it: every file the table reaches
goes, a file outside the table that a manifest references stays (as does a symlink leading out,
and an unreferenced file in the table folder), and a refused or failed run changes nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import icectl.ops.lifecycle.drop as rd
from icectl.errors import ExitCode, NotFoundError
from icectl.spec.metadata import TableMetadata
from icectl.table import load_table
from icectl.table.commit import operations_for
from unit.ops.expire.test_expire import Tbl, run
from unit.ops.expire.test_expire import wh as wh
from unit.ops.expire.test_expire_v4 import puffin_history as puffin_history


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for d, _dirs, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


def _props(**kv: str) -> Any:
    return lambda md: md.replace(properties={**md.properties, **kv})


def _table(wh: Path, outside: Path) -> tuple[Tbl, Path, Path]:
    """A table of three appends: one file inside, one outside the table (referenced by its
    manifest), one through a symlink in data/ that leads outside; plus an unreferenced file."""
    t = Tbl(wh)
    t.add()
    t.add(where=outside)
    outside.mkdir(exist_ok=True)
    target = outside / "target.parquet"
    os.link(t.data_file(1), target)  # any Parquet file will do: same schema
    link = t.dir / "data" / "link.parquet"
    link.symlink_to(target)
    code, _, err = run(wh, "add-files", "db.t", str(link), "--json")
    assert code == 0, err
    (t.dir / "data" / "orphan.txt").write_text("not the table's")
    return t, link, target


def test_purge_deletes_what_the_table_reaches_inside_it_and_nothing_else(wh: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    t, link, _target = _table(wh, outside)
    before = _listing(t.dir)
    outside_before = _listing(outside)
    assert len(outside_before) == 2  # f002.parquet (added from here) and the link's target

    code, out, err = run(wh, "drop", "db.t", "--purge", "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert _listing(t.dir) == before and _listing(outside) == outside_before  # a dry run changes nothing
    assert plan["would_drop"].startswith("the version files")
    assert sorted(plan["kept_external_files"]) == sorted([str(outside / "f002.parquet"), str(link)])

    code, out, err = run(wh, "drop", "db.t", "--purge", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["dropped"] is True and res["failures"] == []
    # Left: the symlink (it leads out of the table), the file no manifest names; everything else went.
    assert set(_listing(t.dir)) == {"data/link.parquet", "data/orphan.txt"}
    assert _listing(outside) == outside_before
    gone = set(before) - {"data/link.parquet", "data/orphan.txt"}
    assert res["deleted"]["data_files"] == 1 and res["deleted"]["manifest_lists"] == 3
    assert sum(res["deleted"].values()) + res["already_gone"] == len(gone)
    assert not (t.dir / "metadata").exists()  # emptied folders go; data/ still holds two files
    assert str(t.dir / "metadata") in res["removed_directories"]
    code, _, _ = run(wh, "drop", "db.t", "--purge")
    assert code == ExitCode.NOT_FOUND


def test_purge_removes_the_emptied_table_folder(wh: Path) -> None:
    t = Tbl(wh)
    t.add()
    t.add()
    code, _out, err = run(wh, "drop", str(t.dir), "--purge", "--json")
    assert code == 0, err
    assert not t.dir.exists() and (wh / "db").is_dir()  # the namespace folder is outside the table


def test_gc_disabled_is_refused_before_anything_changes(wh: Path) -> None:
    t = Tbl(wh)
    t.add()
    t.change(_props(**{"gc.enabled": "false"}))
    before = _listing(t.dir)
    for args in (("--purge",), ("--purge", "--dry-run")):
        code, out, err = run(wh, "drop", "db.t", *args)
        assert code == ExitCode.REFUSED and "gc.enabled" in err and out == ""
    assert _listing(t.dir) == before


def test_a_file_system_table_needs_purge(wh: Path) -> None:
    t = Tbl(wh)
    t.add()
    before = _listing(t.dir)
    code, _, err = run(wh, "drop", "db.t")
    assert code == ExitCode.REFUSED and "--purge" in err
    assert _listing(t.dir) == before


def test_a_missing_manifest_refuses_the_purge_with_nothing_dropped(wh: Path) -> None:
    t = Tbl(wh)
    t.add()
    t.add()
    md = t.md()
    snap = md.current_snapshot()
    assert snap is not None
    manifests = [p for p in Path(t.dir / "metadata").iterdir() if p.name.endswith("-m0.avro")]
    assert manifests
    manifests[0].unlink()
    before = _listing(t.dir)
    code, _, err = run(wh, "drop", "db.t", "--purge")
    assert code == ExitCode.CORRUPT and "nothing was dropped" in err
    assert _listing(t.dir) == before and load_table(str(t.dir)).metadata_location


def test_dropped_by_another_process_between_plan_and_drop_deletes_nothing(wh: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    t = Tbl(wh)
    t.add()
    real = rd.plan_purge

    def plan_then_other_drops(*a: Any, **k: Any) -> Any:
        plan = real(*a, **k)
        for p in (t.dir / "metadata").iterdir():  # another process removes the version files
            if p.name.startswith("v") or p.name == "version-hint.text":
                p.unlink()
        return plan
    monkeypatch.setattr(rd, "plan_purge", plan_then_other_drops)
    table = load_table(str(t.dir))
    before = {k for k in _listing(t.dir) if not k.startswith("metadata/v") and "version-hint" not in k}
    with pytest.raises(NotFoundError):
        rd.drop_table(table, purge=True)
    assert set(_listing(t.dir)) == before  # no data file, manifest or list was deleted


def test_a_commit_between_plan_and_drop_is_planned_again(wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = Tbl(wh)
    t.add()
    real = rd.plan_purge
    calls: list[int] = []

    def plan_then_commit(*a: Any, **k: Any) -> Any:
        plan = real(*a, **k)
        calls.append(1)
        if len(calls) == 1:
            t.add()  # another writer's append lands after our plan
        return plan
    monkeypatch.setattr(rd, "plan_purge", plan_then_commit)
    res = rd.drop_table(load_table(str(t.dir)), purge=True)
    assert len(calls) == 2 and res.dropped is True
    assert not t.data_file(2).exists() and not t.dir.exists()  # the late append's file went too


def test_register_copies_into_a_warehouse_and_refuses_taken_names_and_damage(wh: Path) -> None:
    t = Tbl(wh)
    t.add()
    t.add()
    src = load_table(str(t.dir))
    code, out, err = run(wh, "register", "db.copy", src.metadata_location, "--dry-run", "--json")
    assert code == 0, err
    assert not (wh / "db" / "copy").exists()
    assert json.loads(out)["current_snapshot_id"] == src.metadata.current_snapshot_id
    code, out, err = run(wh, "register", "db.copy", src.metadata_location, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["metadata_location"] == str(wh / "db" / "copy" / "metadata" / "v1.metadata.json")
    assert res["total_records_count"] == 6 and res["total_data_files_count"] == 2
    copy = load_table(str(wh / "db" / "copy"))
    assert copy.metadata.current_snapshot_id == src.metadata.current_snapshot_id
    assert copy.metadata.location == src.metadata.location  # as Java: the location is kept
    assert run(wh, "register", "db.copy", src.metadata_location)[0] == ExitCode.REFUSED
    assert run(wh, "register", "db.t", src.metadata_location)[0] == ExitCode.REFUSED
    assert run(wh, "register", "db.none", str(t.dir / "metadata" / "v99.metadata.json"))[0] == ExitCode.NOT_FOUND
    assert run(wh, "register", str(t.dir), src.metadata_location)[0] == ExitCode.USAGE
    damaged = t.dir / "metadata" / "broken.metadata.json"
    damaged.write_text(Path(src.metadata_location).read_text()[:200])
    code, _, err = run(wh, "register", "db.bad", str(damaged))
    assert code == ExitCode.CORRUPT and not (wh / "db" / "bad").exists()
    # Sound JSON whose current snapshot's manifest list is gone: damaged too, nothing registered.
    doc = json.loads(Path(src.metadata_location).read_text())
    for s in doc["snapshots"]:
        if s["snapshot-id"] == doc["current-snapshot-id"]:
            s["manifest-list"] = str(t.dir / "metadata" / "snap-missing.avro")
    lost = t.dir / "metadata" / "lost.metadata.json"
    lost.write_text(json.dumps(doc))
    code, _, err = run(wh, "register", "db.lost", str(lost))
    assert code == ExitCode.CORRUPT and "does not exist" in err and not (wh / "db" / "lost").exists()


def test_a_damaged_metadata_log_cannot_make_the_purge_delete_other_files(wh: Path, tmp_path: Path) -> None:
    """Log entries naming a file in the table's folder the table does not reference, a metadata-like
    name outside the metadata folder, and a file outside the table: the purge deletes none of
    them (only metadata files directly in the metadata folder go as metadata)."""
    t = Tbl(wh)
    t.add()
    stray = t.dir / "data" / "not-the-tables.parquet"
    stray.write_text("someone else's")
    lookalike = t.dir / "data" / "v9.metadata.json"
    lookalike.write_text("{}")
    outside = tmp_path / "elsewhere.metadata.json"
    outside.write_text("{}")
    current = load_table(str(t.dir)).metadata_location
    doc = json.loads(Path(current).read_text())  # damaged on disk: the log names other files
    doc["metadata-log"] += [{"timestamp-ms": 1, "metadata-file": str(p)} for p in (stray, lookalike, outside)]
    Path(current).write_text(json.dumps(doc))
    code, out, err = run(wh, "drop", "db.t", "--purge", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["dropped"] is True
    assert stray.exists() and lookalike.exists() and outside.exists()
    assert not list((t.dir / "metadata").glob("v*.metadata.json"))  # the real metadata files went


def test_metadata_files_follow_older_logs(wh: Path) -> None:
    t = Tbl(wh)
    t.add()
    t.add()
    table = load_table(str(t.dir))
    ops_current = operations_for(table).refresh()
    every = rd.metadata_files(ops_current, table.io)
    on_disk = sorted(str(p) for p in (t.dir / "metadata").glob("v*.metadata.json"))
    assert sorted(every) == on_disk
    # A log cut to its last entry still leads to the older files through that entry's own log.
    md: TableMetadata = ops_current.metadata
    short = type(ops_current)(ops_current.location, md.replace(metadata_log=md.metadata_log[-1:]),
                              ops_current.version)
    assert sorted(rd.metadata_files(short, table.io)) == on_disk


def test_purge_of_a_v4_table_reaches_roots_leaves_and_manifest_dv_puffins(puffin_history: dict[str, Any]) -> None:
    h = puffin_history
    d: Path = h["d"]
    every = {os.path.normpath(os.path.join(r, n)) for r, _ds, ns in os.walk(d) for n in ns}
    plan = rd.drop_table(load_table(str(d)), purge=True, dry_run=True)
    assert isinstance(plan.would_delete, dict)
    planned = {os.path.normpath(p) for paths in plan.would_delete.values() for p in paths}
    assert h["puffin"] in set(plan.would_delete["manifest_files"])
    assert set(h["roots"].values()) | set(h["lists"]) <= set(plan.would_delete["manifest_lists"])
    assert h["leaves"] <= set(plan.would_delete["manifest_files"])
    assert {*h["a"], h["b0"]} <= set(plan.would_delete["data_files"])
    assert planned == every  # the history reaches every file in the folder: nothing is left out
    res = rd.drop_table(load_table(str(d)), purge=True)
    assert res.dropped is True and not res.failures and not d.exists()
