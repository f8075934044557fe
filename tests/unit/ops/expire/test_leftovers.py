"""expire-snapshots finishes the cleanup of an earlier expiry that was cut short after its commit.

The earlier expiry's snapshots survive only in older metadata files named by the metadata log;
a rerun must find them there and delete what they reach and no retained snapshot reaches, and
must never trust a log entry that is not an earlier metadata file of this very table.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import icectl.ops.expire as expire_mod
from icectl.cli.app import app
from icectl.table import load_table
from unit.ops.expire.test_expire import COUNTS, Tbl, rollback, run
from unit.ops.expire.test_expire import wh as wh


class Killed(BaseException):
    """Stands for the process dying right after the commit returned."""


def _kill_after_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    real = expire_mod.commit

    def commit_then_die(*a: Any, **k: Any) -> Any:
        real(*a, **k)
        raise Killed
    monkeypatch.setattr(expire_mod, "commit", commit_then_die)


def _grow(t: Tbl, n: int = 4) -> list[int]:
    ids = [t.add() for _ in range(n)]
    t.change(rollback(ids[0]))  # the later snapshots lose their ref: their data files become unreachable
    return ids


def _files(t: Tbl) -> set[str]:
    return set(t.listing())


def _add_log_entries(t: Tbl, paths: list[str | Path]) -> None:
    """A new version whose metadata log also names ``paths`` (written by hand: a commit rebuilds
    the log from its base)."""
    current = Path(load_table(str(t.dir)).metadata_location)
    doc = json.loads(current.read_text())
    doc["metadata-log"] += [{"timestamp-ms": doc["last-updated-ms"], "metadata-file": str(p)} for p in paths]
    doc["metadata-log"].append({"timestamp-ms": doc["last-updated-ms"], "metadata-file": str(current)})
    version = int(current.name[1:].split(".")[0]) + 1
    (current.parent / f"v{version}.metadata.json").write_text(json.dumps(doc))
    (current.parent / "version-hint.text").write_text(str(version))


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_rerun_after_a_kill_right_after_the_commit_finishes_the_cleanup(wh: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         version: int) -> None:
    killed = Tbl(wh, "db.killed", version=min(version, 3))
    if version == 4:  # root manifests: the snapshots after the upgrade are v4 trees
        killed.add()
        code, _, err = run(wh, "upgrade", str(killed.dir), "--to", "4", "--yes")
        assert code == 0, err
    first = killed.n + 1  # data file number of the first snapshot _grow adds
    _grow(killed)
    cutoff = str(int(time.time() * 1000) + 1)
    args = ("--older-than", cutoff, "--retain-last", "1")
    # The twin: the same table (same absolute paths) expired without interruption, then restored.
    saved = wh.parent / "saved"
    shutil.copytree(killed.dir, saved)
    whole = killed.expire(*args)
    n = whole["expired_snapshot_count"]  # 3 (v4: 5, the two before and of the upgrade too)
    assert n == (5 if version == 4 else 3) and whole["deleted_data_files_count"] == 3
    uninterrupted = _files(killed)
    shutil.rmtree(killed.dir)
    shutil.copytree(saved, killed.dir)

    with monkeypatch.context() as m:
        _kill_after_commit(m)
        with pytest.raises(Killed):
            expire_mod.expire_snapshots(load_table(str(killed.dir)),
                                        expire_mod.ExpirePolicy(older_than_ms=int(cutoff), retain_last=1))
    assert len(killed.md().snapshots) == 1 and all(killed.data_file(first + i).exists() for i in range(4))

    plan = killed.expire(*args, "--dry-run")
    assert sorted(plan["would_delete"]["data_files"]) == sorted(str(killed.data_file(first + i)) for i in (1, 2, 3))
    assert plan["expired_snapshot_count"] == 0 and len(plan["leftover_snapshots"]) == n
    assert plan["would_write"] == []  # nothing to commit, only files to delete
    code, out, err = run(wh, "expire-snapshots", str(killed.dir), *args)
    assert code == 0, err
    assert "Nothing to expire" not in out and f"finishing the cleanup of {n} snapshot(s)" in out
    # Exactly what the uninterrupted run left: same files by relative path (metadata versions too).
    assert _files(killed) == uninterrupted
    again = killed.expire(*args)
    assert again["leftover_snapshots"] == [] and {c: again[c] for c in COUNTS} == dict.fromkeys(COUNTS, 0)


def test_counts_of_the_rerun_match_the_uninterrupted_run(wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    killed, twin = Tbl(wh, "db.killed"), Tbl(wh, "db.twin")  # the same history, other ids
    for t in (killed, twin):
        _grow(t)
    args = ("--older-than", str(int(time.time() * 1000) + 1), "--retain-last", "1")
    whole = twin.expire(*args)
    with monkeypatch.context() as m:
        _kill_after_commit(m)
        with pytest.raises(Killed):
            run(wh, "expire-snapshots", str(killed.dir), *args)
    rerun = killed.expire(*args)
    assert {c: rerun[c] for c in COUNTS} == {c: whole[c] for c in COUNTS} and whole["deleted_data_files_count"] == 3


def _hostile_setup(wh: Path, tmp_path: Path) -> tuple[Tbl, Tbl]:
    t, other = Tbl(wh, "db.t"), Tbl(wh, "db.other")
    for tb in (t, other):
        tb.add()
        tb.add()
    return t, other


def test_log_entries_naming_other_files_delete_nothing(wh: Path, tmp_path: Path) -> None:
    """Another table's metadata (in its folder and copied into ours), a data file (in place and
    copied into the metadata folder), garbage JSON and a missing file: all skipped, nothing deleted."""
    t, other = _hostile_setup(wh, tmp_path)
    meta = t.dir / "metadata"
    other_md = Path(load_table(str(other.dir)).metadata_location)
    # Another table's metadata whose snapshots reach files of OUR table (same uuid is what a
    # copied table would have; here a different uuid but paths into t): must still be skipped.
    ours = json.loads(Path(load_table(str(t.dir)).metadata_location).read_text())
    foreign = dict(ours, **{"table-uuid": "00000000-0000-0000-0000-000000000001"})
    foreign["snapshots"] = [dict(s, **{"snapshot-id": s["snapshot-id"] + 1}) for s in ours["snapshots"]]
    (meta / "v0.metadata.json").write_text(json.dumps(foreign))
    relocated = dict(ours, location=str(other.dir))
    relocated["snapshots"] = foreign["snapshots"]
    (meta / "00000-relocated.metadata.json").write_text(json.dumps(relocated))
    shutil.copy(other_md, meta / "copied-from-other.metadata.json")
    shutil.copy(t.data_file(1), meta / "data-copy.metadata.json")
    (meta / "garbage.metadata.json").write_text("{ not json")
    (meta / "deep.metadata.json").write_text("[" * 100_000 + "]" * 100_000)
    entries = [other_md, t.data_file(1), meta / "v0.metadata.json", meta / "00000-relocated.metadata.json",
               meta / "copied-from-other.metadata.json", meta / "data-copy.metadata.json",
               meta / "garbage.metadata.json", meta / "deep.metadata.json", meta / "v77.metadata.json",
               meta / "missing.metadata.json", tmp_path / "elsewhere.metadata.json", "hdfs://nn/x.metadata.json"]
    _add_log_entries(t, entries)
    before = _files(t)
    for extra in (["--dry-run"], []):
        out = t.expire("--older-than", "0s", "--retain-last", "2", *extra)
        assert out["leftover_snapshots"] == [] and {c: out[c] for c in COUNTS} == dict.fromkeys(COUNTS, 0)
        notes = "\n".join(out["skipped_metadata"])
        for e in entries:
            # every entry is skipped with a note, but a missing file silently
            assert (str(e) in notes) != str(e).endswith("missing.metadata.json"), (e, notes)
    assert _files(t) == before


def test_a_crafted_earlier_metadata_cannot_unprotect_live_files(wh: Path) -> None:
    """An earlier metadata file of this table (same uuid and location, in the folder) whose extra
    snapshot reaches the live snapshot's manifest list: its files are live, so nothing goes."""
    t = Tbl(wh)
    t.add()
    t.add()
    meta = t.dir / "metadata"
    ours = json.loads(Path(load_table(str(t.dir)).metadata_location).read_text())
    crafted = dict(ours)
    crafted["snapshots"] = [*ours["snapshots"], *[dict(s, **{"snapshot-id": s["snapshot-id"] ^ 1})
                                                 for s in ours["snapshots"]]]
    (meta / "v0.metadata.json").write_text(json.dumps(crafted))
    _add_log_entries(t, [meta / "v0.metadata.json"])
    before = _files(t)
    out = t.expire("--older-than", "0s", "--retain-last", "5")
    assert len(out["leftover_snapshots"]) == 2  # trusted as leftovers: only reachability protects
    assert {c: out[c] for c in COUNTS} == dict.fromkeys(COUNTS, 0)
    assert _files(t) == before


def test_unreadable_files_of_an_earlier_snapshot_are_a_note_not_a_failure(wh: Path) -> None:
    """A trusted earlier metadata file whose extra snapshots name a manifest list on storage icectl
    cannot reach, or a file that is no Avro: the run goes on, nothing is deleted, a note says why."""
    t = Tbl(wh)
    t.add()
    t.add()
    meta = t.dir / "metadata"
    (meta / "junk.avro").write_bytes(b"not avro at all")
    ours = json.loads(Path(load_table(str(t.dir)).metadata_location).read_text())
    crafted = dict(ours)
    crafted["snapshots"] = [*ours["snapshots"],
                            dict(ours["snapshots"][0], **{"snapshot-id": 11, "manifest-list": "hdfs://nn/x.avro"}),
                            dict(ours["snapshots"][0], **{"snapshot-id": 12, "manifest-list": str(meta / "junk.avro")})]
    (meta / "v0.metadata.json").write_text(json.dumps(crafted))
    _add_log_entries(t, [meta / "v0.metadata.json"])
    before = _files(t)
    for extra in (["--dry-run"], []):
        out = t.expire("--older-than", "0s", "--retain-last", "5", *extra)
        assert {c: out[c] for c in COUNTS} == dict.fromkeys(COUNTS, 0)
        assert any("left for a later run" in n for n in out["skipped_metadata"]), out["skipped_metadata"]
    assert _files(t) == before


def test_manifest_list_of_a_leftover_already_gone_contributes_nothing(wh: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    t = Tbl(wh)
    ids = _grow(t)
    args = ("--older-than", str(int(time.time() * 1000) + 1), "--retain-last", "1")
    with monkeypatch.context() as m:
        _kill_after_commit(m)
        with pytest.raises(Killed):
            run(wh, "expire-snapshots", str(t.dir), *args)
    # A cleanup cut short: the manifest list of one leftover is gone, its data file is not.
    Path(_manifest_list_in_history(t, ids[3])).unlink()
    out = t.expire(*args)
    assert sorted(out["leftover_snapshots"]) == sorted(ids[1:3])
    assert out["failures"] == [] and out["deleted_manifest_lists_count"] == 2
    assert t.data_file(4).exists() and not t.data_file(2).exists() and not t.data_file(3).exists()


def _manifest_list_in_history(t: Tbl, sid: int) -> Any:
    """The manifest list of ``sid`` as the earlier metadata names it."""
    for p in sorted((t.dir / "metadata").glob("v*.metadata.json")):
        for s in json.loads(p.read_text())["snapshots"]:
            if s["snapshot-id"] == sid:
                return s["manifest-list"]
    raise AssertionError(sid)


# --------------------------------------------------------------------------- a real kill, Spark judges

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[2]  # tests/: support/ and the test packages import from here


def _start_killed_expire(*cli_args: str) -> subprocess.Popen[str]:
    """This file as a script: the real CLI in a process that dies (exit 9) as soon as expire's
    commit returns, before any file is deleted (as test_commit.start_worker runs its workers)."""
    path = os.pathsep.join(p for p in (str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "kill-expire", *cli_args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": path, "ICECTL_CONFIG": ""}, cwd=HERE)


def _relative_files(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, _dirs, names in os.walk(root) for n in names}


def test_killed_after_commit_then_rerun_leaves_what_an_uninterrupted_run_leaves(spark: Any, spark_clone: Any,
                                                                                tmp_path: Path) -> None:
    from support.spark import latest_metadata_json, table_rows_digest

    t = spark_clone("v2_part")
    table_dir = Path(t.location)
    views = (t.name, f"{t.name}.branch_dev", f"{t.name}.tag_after_merge")
    rows_before = {v: table_rows_digest(spark, v) for v in views}
    # A fixed cutoff: both runs expire the same snapshots.
    cutoff = max(s["timestamp-ms"] for s in latest_metadata_json(table_dir)["snapshots"]) + 1
    args = ("expire-snapshots", str(table_dir), "--older-than", str(cutoff), "--retain-last", "1", "--json")
    saved = tmp_path / "saved"
    shutil.copytree(table_dir, saved, symlinks=True)
    original = _relative_files(table_dir)

    # The twin: the same table (same absolute paths, so the same file names) expired in one go.
    r = CliRunner().invoke(app, list(args), env={"ICECTL_CONFIG": ""})
    assert r.exit_code == 0, r.output
    whole = json.loads(r.stdout)
    assert whole["expired_snapshot_count"] > 3 and whole["deleted_data_files_count"] > 0
    uninterrupted = _relative_files(table_dir)
    rows = {v: table_rows_digest(spark, v) for v in views}
    assert rows == rows_before
    shutil.rmtree(table_dir)
    shutil.copytree(saved, table_dir, symlinks=True)

    killed = _start_killed_expire(*args)
    _out, err = killed.communicate(timeout=300)
    assert killed.returncode == 9, err
    after_kill = _relative_files(table_dir)
    # Committed, nothing deleted (but Spark's sidecar of the rewritten version hint): the files that
    # stayed behind for good before.
    assert original - {"metadata/.version-hint.text.crc"} <= after_kill
    assert len(latest_metadata_json(table_dir)["snapshots"]) == len(latest_metadata_json(saved)["snapshots"]) - \
        whole["expired_snapshot_count"]

    r = CliRunner().invoke(app, list(args), env={"ICECTL_CONFIG": ""})
    assert r.exit_code == 0, r.output
    rerun = json.loads(r.stdout)
    assert _relative_files(table_dir) == uninterrupted
    assert rerun["expired_snapshot_count"] == 0
    assert len(rerun["leftover_snapshots"]) == whole["expired_snapshot_count"]
    assert {v: table_rows_digest(spark, v) for v in views} == rows
    again = CliRunner().invoke(app, ["expire-snapshots", str(table_dir), "--older-than", str(cutoff),
                                     "--retain-last", "1"], env={"ICECTL_CONFIG": ""})
    assert again.exit_code == 0 and "Nothing to expire" in again.stdout


def _worker(argv: list[str]) -> None:
    mode, cli_args = argv[0], argv[1:]
    if mode != "kill-expire":
        raise SystemExit(f"unknown worker mode {mode}")
    real = expire_mod.commit

    def commit_then_die(*a: Any, **k: Any) -> Any:
        real(*a, **k)
        os._exit(9)
    expire_mod.commit = commit_then_die  # type: ignore[assignment]
    sys.argv = ["icectl", *cli_args]
    from icectl.cli.app import main
    main()
    raise SystemExit("expire should have been killed after its commit")


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS))
    _worker(sys.argv[1:])


def test_rerun_on_a_table_addressed_by_a_relative_path(wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The metadata log names files absolutely; a table addressed as ./warehouse/db/t (the embedded
    default catalog's way) must still find its earlier metadata files as its own."""
    killed = Tbl(wh, "db.killed")
    first = killed.n + 1
    _grow(killed)
    args = ("--older-than", str(int(time.time() * 1000) + 1), "--retain-last", "1")
    with monkeypatch.context() as m:
        _kill_after_commit(m)
        with pytest.raises(Killed):
            run(wh, "expire-snapshots", str(killed.dir), *args)
    assert all(killed.data_file(first + i).exists() for i in range(4))
    monkeypatch.chdir(wh)
    code, out, err = run(wh, "expire-snapshots", os.path.join(".", "db", "killed"), *args, "--json")
    assert code == 0, err
    rerun = json.loads(out)
    assert rerun["skipped_metadata"] == [] and len(rerun["leftover_snapshots"]) == 3
    assert rerun["deleted_data_files_count"] == 3
    assert killed.data_file(first).exists() and not any(killed.data_file(first + i).exists() for i in (1, 2, 3))
