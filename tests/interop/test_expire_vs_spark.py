"""`icectl expire-snapshots` judged against Spark's `expire_snapshots` procedure on twin tables.

Each fixture kind is generated twice (same history, different names and ids; single-task shuffles
so that the file layout is identical too), with Spark-written table and partition statistics
for some snapshots and, on v2_part, a branch with its own min-snapshots-to-keep. Spark's
procedure expires one twin, icectl the other, with the same policy (cutoff at a snapshot's
commit time or now, retain_last 1 or 3, an explicit snapshot id, clean_expired_metadata); then,
step by step:

- the same snapshots are gone (mapped by their index in the history, ids differ between twins),
  the same refs, snapshot-log, statistics, specs and schemas remain;
- icectl reports the same per-category counts as Spark's procedure, and the files that vanished
  from disk are the same ones by role (category, index of the snapshot that added the file,
  record counts, partition) and match the counts;
- Spark reads every retained snapshot, branch and tag of icectl's twin with the rows it had, and
  every file a retained snapshot reaches exists (checked on both twins, so the check itself is
  judged by Spark's result too).

A last test lets Spark INSERT in a loop while icectl expires the same table repeatedly (separate
processes and an in-process loop): no row, snapshot or reachable file is lost.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import FixtureTable
from support.spark import latest_metadata_json, metadata_table, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.expire.result import ExpireResult
from icectl.table import load_table

ROOT = Path(__file__).resolve().parents[2]

# Spark's procedure output columns; icectl's --json uses the same names.
COUNT_KEYS = ("deleted_data_files_count", "deleted_position_delete_files_count",
              "deleted_equality_delete_files_count", "deleted_manifest_files_count",
              "deleted_manifest_lists_count", "deleted_statistics_files_count")
_CONTENT_KEY = {0: "deleted_data_files_count", 1: "deleted_position_delete_files_count",
                2: "deleted_equality_delete_files_count"}


@dataclass(frozen=True)
class Step:
    cutoff_index: int | None  # expire older than this snapshot's commit time; None: now
    retain_last: int
    clean_expired_metadata: bool = False
    expire_index: int | None = None  # also expire this snapshot by id (snapshot_ids / --snapshot-id)
    before_sql: tuple[str, ...] = ()  # run by Spark on both twins first ({t}: the table)
    shared_puffin: bool = False  # a DV Puffin file of an expired snapshot must survive (still live)


# Steps run in order on the same pair of twins; indices are positions in the original history.
STEPS: dict[str, list[Step]] = {
    "v1_unpart": [Step(1, 1), Step(None, 1)],
    # main: 0..5,8..11; tag after_merge at 5; branch dev 6,7 on top of 5; SETUP adds branch
    # keep3 at 3 with its own min-snapshots-to-keep 3 (wins over retain_last), dropped later.
    "v2_part": [Step(4, 1), Step(None, 3), Step(5, 1, expire_index=10),
                Step(None, 1, clean_expired_metadata=True, before_sql=("ALTER TABLE {t} DROP BRANCH keep3",))],
    "v3_dv": [Step(4, 1), Step(None, 3), Step(5, 1, expire_index=6), Step(None, 1, clean_expired_metadata=True),
              # The Puffin-sharing hazard: one DELETE writes DVs for two files into one Puffin file,
              # the next replaces only one of them. Expiring the first DELETE must keep that Puffin.
              Step(None, 1, shared_puffin=True, before_sql=(
                  "INSERT INTO {t} SELECT id, NULL, id * 0.5D, TIMESTAMP'2024-06-01 00:00:00', 'a' "
                  "FROM range(1000, 1010)",
                  "INSERT INTO {t} SELECT id, NULL, id * 0.5D, TIMESTAMP'2024-06-01 00:00:00', 'b' "
                  "FROM range(1010, 1020)",
                  "DELETE FROM {t} WHERE id IN (1000, 1010)",
                  "DELETE FROM {t} WHERE id = 1001"))],
    "many_snaps": [Step(100, 1), Step(None, 3)],
}
SETUP = {"v2_part": "ALTER TABLE {t} CREATE BRANCH keep3 AS OF VERSION {id3} WITH SNAPSHOT RETENTION 3 SNAPSHOTS"}

# Snapshots whose rows are checked after each step (all for small histories).
SAMPLE = {"many_snaps": (0, 50, 99, 100, 101, 180, 246, 247, 248, 249)}


def _local(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).isoformat(timespec="milliseconds")


def _spark_ts(ms: int) -> str:
    # The session time zone is UTC (tests/support/spark.py).
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@contextmanager
def one_task(spark: Any) -> Iterator[None]:
    """Single-task shuffles while the twins are written. Merge-on-read deletes are distributed by
    data file, and file names are random: with two tasks, which DVs share a Puffin file (and how
    many delete files a DELETE writes) differs between twins; with one it cannot."""
    old = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        yield
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", old)


def history(md: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(md.get("snapshots", []), key=lambda s: (s["timestamp-ms"], s.get("sequence-number", 0)))


class Twin:
    """One of the two clones, with its snapshot ids mapped to their index in the original history."""

    def __init__(self, spark: Any, table: FixtureTable) -> None:
        self.spark = spark
        self.t = table
        self.name = table.name
        self.dir = Path(table.location)
        self.idx_of: dict[int, int] = {}
        self.id_at: dict[int, int] = {}
        self.ts_at: dict[int, int] = {}
        self.index_new_snapshots()

    def index_new_snapshots(self) -> None:
        """Give snapshots not seen yet the next indices, in commit order (the same in both twins)."""
        for s in history(self.md()):
            if s["snapshot-id"] not in self.idx_of:
                i = len(self.idx_of)
                self.idx_of[s["snapshot-id"]] = i
                self.id_at[i] = s["snapshot-id"]
                self.ts_at[i] = s["timestamp-ms"]

    @property
    def short(self) -> str:  # db.table, as the procedure wants it
        return self.name.split(".", 1)[1]

    def md(self) -> dict[str, Any]:
        return latest_metadata_json(self.dir)

    def shape(self) -> dict[str, Any]:
        """The metadata in clone-independent terms."""
        md = self.md()
        ix = self.idx_of
        return {
            "snapshots": sorted(ix[s["snapshot-id"]] for s in md.get("snapshots", [])),
            "parents": sorted((ix[s["snapshot-id"]], ix.get(s.get("parent-snapshot-id", -1)))
                              for s in md.get("snapshots", [])),
            "operations": sorted((ix[s["snapshot-id"]], s.get("summary", {}).get("operation"))
                                 for s in md.get("snapshots", [])),
            "current": ix.get(md.get("current-snapshot-id", -1)),
            "refs": {n: (r["type"], ix[r["snapshot-id"]]) for n, r in md.get("refs", {}).items()},
            "snapshot_log": [ix[e["snapshot-id"]] for e in md.get("snapshot-log", [])],
            "metadata_log_len": len(md.get("metadata-log", [])),
            "statistics": sorted(ix[s["snapshot-id"]] for s in md.get("statistics", [])),
            "partition_statistics": sorted(ix[s["snapshot-id"]] for s in md.get("partition-statistics", [])),
            "specs": sorted(s["spec-id"] for s in md.get("partition-specs", [])),
            "schemas": sorted(s["schema-id"] for s in md.get("schemas", [])),
            "next_row_id": md.get("next-row-id"),
            "last_sequence_number": md.get("last-sequence-number"),
        }

    def roles(self) -> dict[str, tuple[Any, ...]]:
        """Every file of the table -> a key that names the same file in the twin.

        Read through Spark's metadata tables (not icectl): manifest lists by snapshot index;
        manifests by adding snapshot, content, spec and entry counts; content files (data,
        delete files, DV Puffin files) by content, adding snapshot, record counts and partition
        of every live entry naming the path; statistics files by snapshot.
        """
        md = self.md()
        ix = self.idx_of
        roles: dict[str, tuple[Any, ...]] = {}
        for s in md.get("snapshots", []):
            roles[_local(s["manifest-list"])] = ("manifest_list", ix[s["snapshot-id"]])
        for m in metadata_table(self.spark, self.name, "all_manifests"):
            roles[_local(m["path"])] = (
                "manifest", ix[m["added_snapshot_id"]], m["content"], m["partition_spec_id"],
                m["added_data_files_count"], m["existing_data_files_count"], m["deleted_data_files_count"],
                m["added_delete_files_count"], m["existing_delete_files_count"], m["deleted_delete_files_count"])
        entries: dict[str, set[tuple[Any, ...]]] = {}
        rows = self.spark.sql(
            f"SELECT snapshot_id, data_file.content AS content, data_file.file_path AS path, "
            f"data_file.record_count AS n, to_json(data_file) AS f FROM {self.name}.all_entries "
            "WHERE status < 2").collect()  # ADDED/EXISTING: snapshot_id is the adding snapshot
        for r in rows:
            part = json.loads(r["f"]).get("partition")
            entries.setdefault(_local(r["path"]), set()).add(
                (r["content"], ix[r["snapshot_id"]], r["n"], json.dumps(part, sort_keys=True)))
        for path, es in entries.items():
            roles[path] = ("content", next(iter(es))[0], tuple(sorted(es)))
        for kind in ("statistics", "partition-statistics"):
            for s in md.get(kind, []):
                roles[_local(s["statistics-path"])] = (kind, ix[s["snapshot-id"]])
        return roles

    def disk(self) -> tuple[set[str], set[str]]:
        """(table files, metadata JSON files) on disk; Hadoop's .crc sidecars and the hint aside."""
        files: set[str] = set()
        jsons: set[str] = set()
        for root, _dirs, names in os.walk(self.dir):
            for n in names:
                if n.endswith(".crc") or n == "version-hint.text":
                    continue
                (jsons if n.endswith(".metadata.json") else files).add(os.path.join(root, n))
        return files, jsons

    def orphan_checksums(self) -> list[str]:
        """Hadoop .crc sidecars of table files that are gone (metadata JSONs aside: commits prune those)."""
        out = []
        for root, _dirs, names in os.walk(self.dir):
            present = set(names)
            for n in names:
                if n.startswith(".") and n.endswith(".crc") and not n.endswith(".metadata.json.crc") \
                        and n[1:-4] not in present:
                    out.append(os.path.join(root, n))
        return out

    def digest(self, version: int | str) -> tuple[int, str]:
        v = version if isinstance(version, int) else f"'{version}'"
        return table_rows_digest(self.spark, f"SELECT * FROM {self.name} VERSION AS OF {v}")

    def check_reachable_files_exist(self) -> int:
        """Every file a snapshot of the table reaches, per Spark's metadata tables, exists."""
        md = self.md()
        paths = {_local(s["manifest-list"]) for s in md.get("snapshots", [])}
        paths |= {_local(m["path"]) for m in metadata_table(self.spark, self.name, "all_manifests")}
        paths |= {_local(r["file_path"]) for r in
                  self.spark.sql(f"SELECT file_path FROM {self.name}.all_files").collect()}
        for kind in ("statistics", "partition-statistics"):
            paths |= {_local(s["statistics-path"]) for s in md.get(kind, [])}
        missing = sorted(p for p in paths if not os.path.exists(p))
        assert not missing, f"{self.name}: {len(missing)} reachable files missing, e.g. {missing[:3]}"
        return len(paths)


def icectl_expire(table_dir: Path, *args: str, expect: int = 0) -> dict[str, Any]:
    r = CliRunner().invoke(app, ["expire-snapshots", str(table_dir), *args, "--json"])
    assert r.exit_code == expect, (r.exit_code, r.stdout, r.stderr)
    return json.loads(r.stdout)


def _categories(roles: dict[str, tuple[Any, ...]], deleted: set[str], who: str) -> tuple[Counter[Any], Counter[str]]:
    unknown = sorted(p for p in deleted if p not in roles)
    assert not unknown, f"{who} deleted files the table never referenced: {unknown[:3]}"
    keys: Counter[Any] = Counter(roles[p] for p in deleted)
    per_cat: Counter[str] = Counter()
    for p in deleted:
        r = roles[p]
        per_cat[{"manifest_list": "deleted_manifest_lists_count", "manifest": "deleted_manifest_files_count",
                 "statistics": "deleted_statistics_files_count",
                 "partition-statistics": "deleted_statistics_files_count"}.get(r[0])
                or _CONTENT_KEY[r[1]]] += 1
    return keys, per_cat


def _add_statistics(spark: Any, twin: Twin, table_stats_at: tuple[int, ...],
                    partition_stats_at: tuple[int, ...]) -> None:
    """Puffin table statistics and partition statistics files, written by Spark, for some snapshots."""
    for i in table_stats_at:
        spark.sql(f"CALL local.system.compute_table_stats(table => '{twin.short}', snapshot_id => {twin.id_at[i]})")
    for i in partition_stats_at:
        spark.sql(f"CALL local.system.compute_partition_stats(table => '{twin.short}', "
                  f"snapshot_id => {twin.id_at[i]})")


STATS = {  # (table statistics at, partition statistics at): expired and retained ones
    "v1_unpart": ((0, 2), ()),
    "v2_part": ((2, 11), (3, 11)),
    "v3_dv": ((1, 7), (2, 7)),
}


@pytest.mark.parametrize("kind", list(STEPS))
def test_expire_equals_spark(spark: Any, spark_clone: Callable[..., FixtureTable], kind: str) -> None:
    with one_task(spark):
        theirs, ours = Twin(spark, spark_clone(kind)), Twin(spark, spark_clone(kind))
    assert theirs.shape() == ours.shape(), "the twins differ before anything ran"
    for twin in (theirs, ours):
        if kind in STATS:
            _add_statistics(spark, twin, *STATS[kind])
        if kind in SETUP:
            spark.sql(SETUP[kind].format(t=twin.name, id3=twin.id_at[3]))
    assert theirs.shape() == ours.shape()

    rows: dict[int, tuple[int, str]] = {}  # snapshot index -> rows before any expiry
    for step in STEPS[kind]:
        with one_task(spark):
            for w in (theirs, ours):
                for sql in step.before_sql:
                    spark.sql(sql.format(t=w.name))
                w.index_new_snapshots()
        assert theirs.shape() == ours.shape()
        sample = SAMPLE.get(kind, tuple(ours.idx_of.values()))
        rows.update({i: ours.digest(ours.id_at[i]) for i in sample if i not in rows})
        ref_rows = {n: ours.digest(n) for n in ours.md().get("refs", {})}
        # The twins hold the same rows.
        assert theirs.digest("main") == ref_rows["main"]
        before = {w.name: (w.roles(), *w.disk()) for w in (theirs, ours)}
        # The twins' files are alike too, role for role (else the comparison below means nothing).
        assert Counter(before[ours.name][0].values()) == Counter(before[theirs.name][0].values())
        snaps_before = set(ours.shape()["snapshots"])
        now_ms = int(time.time() * 1000)
        cut = {w.name: (w.ts_at[step.cutoff_index] if step.cutoff_index is not None else now_ms)
               for w in (theirs, ours)}
        clean = ", clean_expired_metadata => true" if step.clean_expired_metadata else ""
        if step.expire_index is not None:
            clean += f", snapshot_ids => array({theirs.id_at[step.expire_index]}L)"
        spark_out = spark.sql(
            f"CALL local.system.expire_snapshots(table => '{theirs.short}', "
            f"older_than => TIMESTAMP '{_spark_ts(cut[theirs.name])}', retain_last => {step.retain_last}{clean})"
        ).collect()[0].asDict()
        args = ["--older-than", _iso(cut[ours.name]), "--retain-last", str(step.retain_last)]
        if step.clean_expired_metadata:
            args.append("--clean-expired-metadata")
        if step.expire_index is not None:
            args += ["--snapshot-id", str(ours.id_at[step.expire_index])]
        out = icectl_expire(ours.dir, *args)

        # Same metadata: snapshots, refs, logs, statistics, specs, schemas.
        assert ours.shape() == theirs.shape(), step
        assert sorted(ours.idx_of[s] for s in out["expired_snapshots"]) == sorted(
            snaps_before - set(ours.shape()["snapshots"]))
        assert out["failures"] == [] and out["already_gone"] == 0
        # Same files gone from disk, by role.
        deleted: dict[str, tuple[Counter[Any], Counter[str]]] = {}
        for w in (theirs, ours):
            roles, files, jsons = before[w.name]
            files_after, jsons_after = w.disk()
            assert files_after <= files, f"{w.name}: files appeared: {sorted(files_after - files)[:3]}"
            deleted[w.name] = _categories(roles, files - files_after, w.name)
            # Metadata JSON files are never deleted by expiry itself (only by the commit's
            # previous-versions-max pruning, which both sides do alike).
            assert len(jsons - jsons_after) == len(before[theirs.name][2] - theirs.disk()[1])
            assert not w.orphan_checksums(), f"{w.name}: .crc sidecars left behind: {w.orphan_checksums()[:3]}"
        ours_gone, theirs_gone = deleted[ours.name][0], deleted[theirs.name][0]
        assert ours_gone == theirs_gone, (step, "only icectl deleted:", ours_gone - theirs_gone,
                                          "only Spark deleted:", theirs_gone - ours_gone)
        # Same counts as Spark's procedure, and each side's counts are what left the disk.
        assert {k: out[k] for k in COUNT_KEYS} == {k: spark_out[k] for k in COUNT_KEYS}, step
        for w, reported in ((theirs, spark_out), (ours, out)):
            assert {k: deleted[w.name][1][k] for k in COUNT_KEYS} == {k: reported[k] for k in COUNT_KEYS}, w.name

        # Spark reads every retained snapshot and ref with the rows it had; nothing reachable is missing.
        kept = set(ours.shape()["snapshots"])
        for i in rows:
            if i in kept:
                assert ours.digest(ours.id_at[i]) == rows[i], (step, i)
        for n in ours.md().get("refs", {}):
            assert ours.digest(n) == ref_rows[n], (step, n)
        for w in (theirs, ours):
            w.check_reachable_files_exist()
        assert ours.digest("main") == theirs.digest("main"), step
        if step.shared_puffin:
            roles, files, _ = before[ours.name]
            expired = snaps_before - kept
            survivors = [p for p in files if p.endswith(".puffin") and roles[p][0] == "content"
                         and any(e[1] in expired for e in roles[p][2]) and os.path.exists(p)]
            assert survivors, "the scenario did not produce a shared Puffin file"


# --------------------------------------------------------------------------- Spark writes meanwhile


def test_expire_while_spark_inserts(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    """Spark INSERTs 15 times while icectl expires the same table again and again: nothing is lost.

    Two expirers race Spark and each other: a cron-like loop of separate `icectl` processes and a
    tight in-process loop of the library call (more chances to commit between Spark's refresh and
    its commit, so Spark's retries and icectl's post-commit re-read both get exercised).
    """
    t = spark_clone("v1_unpart")
    ref = spark_clone("v1_unpart")  # the same inserts, never expired: the expected rows
    props = ("'commit.retry.num-retries'='40', 'commit.retry.min-wait-ms'='10', "
             "'commit.retry.max-wait-ms'='200'")
    spark.sql(f"ALTER TABLE {t.name} SET TBLPROPERTIES ({props})")
    made: list[tuple[int, int]] = []  # (snapshot of t, snapshot of ref) after each insert
    errors: list[BaseException] = []
    done = threading.Event()

    def insert(name: str, i: int) -> int:
        spark.sql(f"INSERT INTO {name} SELECT id, concat('name-', id), id * 1.25, DATE'2024-01-01', "
                  f"TIMESTAMP'2024-01-01 00:00:00', CAST(id AS DECIMAL(10, 2)), true, X'00' "
                  f"FROM range({1000 + i * 3}, {1003 + i * 3})")
        return int(spark.sql(f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at DESC LIMIT 1")
                   .collect()[0][0])

    def writer() -> None:
        try:
            for i in range(15):
                made.append((insert(t.name, i), insert(ref.name, i)))
        except BaseException as e:  # reported by the main thread
            errors.append(e)
        finally:
            done.set()

    in_process: list[ExpireResult] = []

    def tight_expirer() -> None:
        try:
            while not done.is_set():
                policy = ExpirePolicy(older_than_ms=int(time.time() * 1000), retain_last=2)
                in_process.append(expire_snapshots(load_table(str(t.location)), policy))
                time.sleep(0.05)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer), threading.Thread(target=tight_expirer)]
    for th in threads:
        th.start()
    runs: list[dict[str, Any]] = []
    while not done.is_set() or len(runs) < 3:
        # A separate process, as a cron job would be.
        p = subprocess.run([sys.executable, "-m", "icectl", "expire-snapshots", str(t.location), "--older-than",
                            "0s", "--retain-last", "2", "--json"], capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
        assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
        runs.append(json.loads(p.stdout))
    for th in threads:
        th.join()
    assert not errors, errors
    assert len(made) == 15
    assert all(r.exit_code == 0 and not r.data.get("failures") for r in in_process)
    assert sum(r["expired_snapshot_count"] for r in runs) + sum(
        r.data["expired_snapshot_count"] for r in in_process) > 0

    # Right after the race: every snapshot Spark made that is still in the table (the current one
    # and its retained ancestors) reads as the never-expired twin's snapshot does.
    twin_of = dict(made)
    md = latest_metadata_json(t.location)
    assert md["current-snapshot-id"] == made[-1][0]
    for s in md["snapshots"]:
        if s["snapshot-id"] in twin_of:
            assert table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF {s['snapshot-id']}") == \
                table_rows_digest(spark, f"SELECT * FROM {ref.name} VERSION AS OF {twin_of[s['snapshot-id']]}")
    Twin(spark, t).check_reachable_files_exist()

    icectl_expire(t.location, "--older-than", "0s", "--retain-last", "2")
    md = latest_metadata_json(t.location)
    kept = {s["snapshot-id"] for s in md["snapshots"]}
    assert kept == {made[-1][0], made[-2][0]}
    assert table_rows_digest(spark, t.name) == table_rows_digest(spark, ref.name)
    assert table_rows_digest(spark, t.name)[0] == 50 + 15 * 3
    assert table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF {made[-2][0]}") == \
        table_rows_digest(spark, f"SELECT * FROM {ref.name} VERSION AS OF {made[-2][1]}")
    Twin(spark, t).check_reachable_files_exist()
    assert not Twin(spark, t).orphan_checksums()
    # Everything the expired snapshots alone reached is gone: the table holds only what its two
    # snapshots reach (plus metadata JSONs and checksums). Java's writeVersionHint leaks its
    # `<uuid>-version-hint.temp` when its rename loses a race; such a file has the `.crc` sidecar
    # only Hadoop writes, so it is Spark's, not icectl's (icectl's temp files never get one).
    def spark_hint_temp(d: str, n: str) -> bool:
        return n.endswith("-version-hint.temp") and os.path.exists(os.path.join(d, f".{n}.crc"))

    files = {os.path.join(r, n) for r, _d, ns in os.walk(t.location) for n in ns
             if not n.endswith((".crc", ".metadata.json")) and n != "version-hint.text"
             and not spark_hint_temp(r, n)}
    reachable = {_local(p) for p in (
        [s["manifest-list"] for s in md["snapshots"]]
        + [m["path"] for m in metadata_table(spark, t.name, "all_manifests")]
        + [r[0] for r in spark.sql(f"SELECT file_path FROM {t.name}.all_files").collect()])}
    assert files == reachable


def test_spark_local_rename_never_replaces(spark: Any, tmp_path: Path) -> None:
    """What makes icectl's link(2) commit and Spark's check-then-rename safe together on a local disk.

    Spark from PyPI ships Hive's jars, whose ProxyLocalFileSystem serves `file:` and refuses to
    rename onto an existing file (returns false), so Spark cannot replace a `v<N+1>` icectl
    published between Spark's exists-check and its rename: Spark's commit fails and retries. The
    same refusal is why Java leaks `<uuid>-version-hint.temp` when icectl rewrote the hint between
    Java's delete and rename. (Plain Hadoop's LocalFileSystem may replace; expire-snapshots re-reads
    the table before deleting anything for that case.)
    """
    fs = spark._jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark._jsc.hadoopConfiguration())
    path = spark._jvm.org.apache.hadoop.fs.Path
    (tmp_path / "ours").write_text("icectl's v2")
    (tmp_path / "theirs").write_text("spark's v2")
    assert fs.rename(path(f"file:{tmp_path}/theirs"), path(f"file:{tmp_path}/ours")) is False
    assert (tmp_path / "ours").read_text() == "icectl's v2"
