"""Snapshot management judged against Spark's procedures on twin copies of the Spark fixtures.

Twins are clones (same snapshot ids, files and rows). Spark's procedure runs on one
(``rollback_to_snapshot``, ``set_current_snapshot``, ``fast_forward``, ``cherrypick_snapshot``,
``rollback_to_timestamp``, ``publish_changes``), icectl's command line on the other, step by step;
after each step both have the same refs (with retention), current snapshot and snapshot-log as
sequences of snapshot ids (a snapshot each side writes itself is mapped to the other side's by the
order they appear), and the new snapshots have the same operation, summary keys and counts. At the
end Spark reads the same rows at every ref of both twins, and at the new snapshots.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import FixtureTable
from support.forge import property_change
from support.spark import latest_metadata_json, table_rows_digest
from typer.testing import CliRunner

import icectl.ops.snapshots as ms
from icectl.cli.app import app
from icectl.table import load_table
from icectl.table.commit import commit
from icectl.table.scan import manifests_of

# Summary keys that name the engine or a process, not what the commit did.
_ENGINE_KEYS = {"engine-name", "engine-version", "iceberg-version", "app-id", "spark.app.id"}


class Twins:
    """Spark's twin and icectl's twin, and the map from Spark's new snapshot ids to icectl's."""

    def __init__(self, spark: Any, ours: FixtureTable, theirs: FixtureTable) -> None:
        self.spark, self.ours, self.theirs = spark, ours, theirs
        self.ids: dict[int, int] = {}  # theirs -> ours, for snapshots each side wrote itself

    def md(self, side: FixtureTable) -> dict[str, Any]:
        return latest_metadata_json(side.location)

    def step(self, procedure: str, *icectl_args: str) -> dict[str, Any]:
        """Spark's procedure on theirs, icectl on ours; then compare. Returns icectl's --json."""
        before = {s["snapshot-id"] for s in self.md(self.theirs).get("snapshots", [])}
        ours_before = {s["snapshot-id"] for s in self.md(self.ours).get("snapshots", [])}
        self.spark.sql(f"CALL local.system.{procedure.format(t=self.theirs.name.split('.', 1)[1])}")
        r = CliRunner().invoke(app, [*icectl_args[:1], str(self.ours.location), *icectl_args[1:], "--json"])
        assert r.exit_code == 0, (icectl_args, r.stderr)
        new_theirs = [s["snapshot-id"] for s in self.md(self.theirs)["snapshots"] if s["snapshot-id"] not in before]
        new_ours = [s["snapshot-id"] for s in self.md(self.ours)["snapshots"] if s["snapshot-id"] not in ours_before]
        assert len(new_theirs) == len(new_ours), (procedure, new_theirs, new_ours)
        self.ids.update(zip(new_theirs, new_ours, strict=True))
        self.compare()
        return json.loads(r.stdout)

    def mapped(self, sid: int | None) -> int | None:
        return self.ids.get(sid, sid) if sid is not None else None

    def compare(self) -> None:
        theirs, ours = self.md(self.theirs), self.md(self.ours)
        assert ours.get("current-snapshot-id", -1) == self.mapped(theirs.get("current-snapshot-id", -1))
        assert ours["refs"] == {n: {**r, "snapshot-id": self.mapped(r["snapshot-id"])}
                                for n, r in theirs["refs"].items()}
        assert [e["snapshot-id"] for e in ours["snapshot-log"]] == \
               [self.mapped(e["snapshot-id"]) for e in theirs["snapshot-log"]]
        assert ours.get("next-row-id") == theirs.get("next-row-id")
        by_id = {s["snapshot-id"]: s for s in ours["snapshots"]}
        for t in theirs["snapshots"]:
            o = by_id[self.mapped(t["snapshot-id"])]  # type: ignore[index]
            assert o.get("parent-snapshot-id") == self.mapped(t.get("parent-snapshot-id"))
            assert o.get("sequence-number") == t.get("sequence-number")
            assert o.get("first-row-id") == t.get("first-row-id") and o.get("added-rows") == t.get("added-rows")
            if t["snapshot-id"] in self.ids:  # a new snapshot: same operation, summary keys and counts
                ts = {k: v for k, v in t["summary"].items() if k not in _ENGINE_KEYS}
                os_ = {k: v for k, v in o["summary"].items() if k not in _ENGINE_KEYS}
                assert set(os_) == set(ts), (sorted(os_), sorted(ts))
                for k, v in ts.items():
                    if k != "source-snapshot-id":
                        assert os_[k] == v, k
                    else:
                        assert os_[k] == str(self.mapped(int(v)))

    def reads_alike(self, extra_snapshots: list[int] = ()) -> None:  # type: ignore[assignment]
        """Spark reads the same rows at every ref (and the given snapshots of theirs) on both twins."""
        refs = self.md(self.theirs)["refs"]
        for name in refs:
            clause = f"VERSION AS OF '{name}'"
            assert table_rows_digest(self.spark, f"SELECT * FROM {self.ours.name} {clause}") == \
                   table_rows_digest(self.spark, f"SELECT * FROM {self.theirs.name} {clause}"), name
        for sid in extra_snapshots:
            ours = f"SELECT * FROM {self.ours.name} VERSION AS OF {self.mapped(sid)}"
            theirs = f"SELECT * FROM {self.theirs.name} VERSION AS OF {sid}"
            assert table_rows_digest(self.spark, ours) == table_rows_digest(self.spark, theirs), sid


def _main_chain(md: dict[str, Any]) -> list[dict[str, Any]]:
    """main's history, oldest first."""
    by_id = {s["snapshot-id"]: s for s in md["snapshots"]}
    chain, sid = [], md["current-snapshot-id"]
    while sid in by_id:
        chain.append(by_id[sid])
        sid = by_id[sid].get("parent-snapshot-id")
    return chain[::-1]


def _refused_alike(twins: Twins, procedure: str, icectl_args: list[str], code: int) -> None:
    """Spark's procedure fails, icectl exits with ``code`` and one line; neither twin changes."""
    before = (twins.md(twins.theirs), twins.md(twins.ours))
    with pytest.raises(Exception) as spark_error:  # any Java exception, through py4j
        twins.spark.sql(f"CALL local.system.{procedure.format(t=twins.theirs.name.split('.', 1)[1])}")
    r = CliRunner().invoke(app, [icectl_args[0], str(twins.ours.location), *icectl_args[1:]])
    assert r.exit_code == code and len(r.stderr.strip().splitlines()) == 1, (spark_error.value, r.stderr)
    assert (twins.md(twins.theirs), twins.md(twins.ours)) == before


def test_moves_and_cherrypick_match_spark(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    """v2_part: main ins1, ins2, dynamic overwrite, delete, update, merge (tag after_merge), ins_s1, ...;
    dev = after_merge + insert + delete."""
    theirs, ours = spark_clone("v2_part"), spark_clone("v2_part")
    twins = Twins(spark, ours, theirs)
    twins.compare()
    chain = _main_chain(twins.md(theirs))
    ins2, ins_s1, overwrite = chain[1]["snapshot-id"], chain[6]["snapshot-id"], chain[2]["snapshot-id"]
    assert chain[6]["summary"]["operation"] == "append" and chain[2]["summary"].get("replace-partitions") == "true"

    _refused_alike(twins, f"rollback_to_snapshot('{{t}}', {twins.md(theirs)['refs']['dev']['snapshot-id']})",
                   ["rollback", "--to-snapshot", str(twins.md(theirs)["refs"]["dev"]["snapshot-id"])], 6)
    _refused_alike(twins, "fast_forward('{t}', 'main', 'dev')", ["fast-forward", "main", "--to", "dev"], 6)
    twins.step(f"rollback_to_snapshot('{{t}}', {ins2})", "rollback", "--to-snapshot", str(ins2))
    twins.step("set_current_snapshot(table => '{t}', ref => 'after_merge')", "set-current", "--ref", "after_merge")
    twins.step("fast_forward('{t}', 'main', 'dev')", "fast-forward", "main", "--to", "dev")
    doc = twins.step(f"cherrypick_snapshot('{{t}}', {ins_s1})", "cherrypick", str(ins_s1))
    assert doc["mode"] == "cherry-pick" and doc["source_snapshot_id"] == ins_s1
    _refused_alike(twins, f"cherrypick_snapshot('{{t}}', {ins_s1})", ["cherrypick", str(ins_s1)], 6)
    # the latest ancestor strictly older than dev's last commit: dev's insert
    dev_head = next(s for s in twins.md(theirs)["snapshots"]
                    if s["snapshot-id"] == twins.md(theirs)["refs"]["dev"]["snapshot-id"])
    ts = dev_head["timestamp-ms"]
    when = datetime.datetime.fromtimestamp(ts / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    twins.step(f"rollback_to_timestamp('{{t}}', TIMESTAMP '{when}Z')", "rollback", "--to-timestamp", str(ts))
    assert twins.md(ours)["current-snapshot-id"] == dev_head["parent-snapshot-id"]
    # the dynamic overwrite's parent is no ancestor of main now: both refuse
    _refused_alike(twins, f"cherrypick_snapshot('{{t}}', {overwrite})", ["cherrypick", str(overwrite)], 6)
    twins.reads_alike(list(twins.ids))


def test_publish_staged_writes_matches_spark(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    """v3_dv with two staged write-audit-publish writes on main's head: w1 fast-forwards, w2 is
    re-applied as a new append with new row ids (next-row-id, first-row-id equal on both twins)."""
    base = spark_clone("v3_dv")
    spark.sql(f"ALTER TABLE {base.name} SET TBLPROPERTIES ('write.wap.enabled'='true')")
    try:
        for wap_id, lo in (("w1", 500), ("w2", 600)):
            spark.conf.set("spark.wap.id", wap_id)
            spark.sql(f"INSERT INTO {base.name} VALUES ({lo}, 'eu', 1.5, TIMESTAMP '2024-01-01 00:00:00', 'wap'), "
                      f"({lo + 1}, NULL, 2.5, TIMESTAMP '2024-01-02 00:00:00', 'wap')")
    finally:
        spark.conf.unset("spark.wap.id")
    theirs, ours = spark_clone(base.name), spark_clone(base.name)
    twins = Twins(spark, ours, theirs)
    staged = {s["summary"]["wap.id"]: s["snapshot-id"] for s in twins.md(theirs)["snapshots"]
              if "wap.id" in s["summary"]}
    assert set(staged) == {"w1", "w2"}
    _refused_alike(twins, "publish_changes('{t}', 'w9')", ["publish", "w9"], 3)
    doc = twins.step("publish_changes('{t}', 'w1')", "publish", "w1")
    assert doc["mode"] == "fast-forward" and twins.md(ours)["current-snapshot-id"] == staged["w1"]
    doc = twins.step("publish_changes('{t}', 'w2')", "publish", "w2")
    assert doc["mode"] == "cherry-pick"
    new = next(s for s in twins.md(ours)["snapshots"] if s["snapshot-id"] == doc["current_snapshot_id"])
    assert new["summary"]["published-wap-id"] == "w2" and new["summary"]["source-snapshot-id"] == str(staged["w2"])
    _refused_alike(twins, "publish_changes('{t}', 'w2')", ["publish", "w2"], 6)
    twins.reads_alike([staged["w1"], staged["w2"]])
    assert table_rows_digest(spark, f"SELECT * FROM {ours.name} WHERE note = 'wap'")[0] == 4


def test_dynamic_overwrite_pick_matches_spark(spark: Any, spark_clone: Callable[..., FixtureTable],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """v2_part's dynamic INSERT OVERWRITE (replace-partitions), picked after main went back to its
    parent and got another append: a new overwrite snapshot that deletes and adds the same files
    (rewriting the manifests that held the deleted ones), as Spark's cherrypick_snapshot does.
    icectl's first attempt loses to a concurrent commit: the retry rewrites again, and the lost
    attempt's files go."""
    base = spark_clone("v2_part")
    chain = _main_chain(latest_metadata_json(base.location))
    ins2, overwrite = chain[1]["snapshot-id"], chain[2]["snapshot-id"]
    assert chain[2]["summary"].get("replace-partitions") == "true" and int(chain[2]["summary"]["deleted-data-files"])
    spark.sql(f"CALL local.system.rollback_to_snapshot('{base.name.split('.', 1)[1]}', {ins2})")
    spark.sql(f"INSERT INTO {base.name} VALUES (9001, 'late', 'red', 1, 1.0, 1.0, 1.00, true, "
              "TIMESTAMP '2030-01-01 00:00:00', TIMESTAMP_NTZ '2030-01-01 00:00:00', DATE '2030-01-01', X'01', "
              "array('a'), map('k', 'v'), named_struct('x', 1.0D, 'y', 2.0D), 'n')")
    theirs, ours = spark_clone(base.name), spark_clone(base.name)
    twins = Twins(spark, ours, theirs)
    dry = CliRunner().invoke(app, ["cherrypick", str(ours.location), str(overwrite), "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.stderr
    real_plan, calls = ms.plan_pick, []

    def racing(md: Any, sid: int, ident: str) -> Any:
        calls.append(sid)
        if len(calls) == 2:  # the first attempt's check: another writer commits first
            commit(load_table(str(ours.location)), lambda base: property_change({"owner": "ops"}))
        return real_plan(md, sid, ident)

    monkeypatch.setattr(ms, "plan_pick", racing)
    folder = Path(ours.location) / "metadata"
    files_before = set(folder.glob("*.avro"))
    doc = twins.step(f"cherrypick_snapshot('{{t}}', {overwrite})", "cherrypick", str(overwrite))
    monkeypatch.undo()
    assert doc["mode"] == "cherry-pick" and doc["new_snapshot"]["operation"] == "overwrite"
    assert doc["commit_attempts"] == 2
    table = load_table(str(ours.location))
    new_snap = table.metadata.snapshots_by_id[doc["current_snapshot_id"]]
    referenced = {Path(new_snap.manifest_list or "").name} | {
        Path(m.manifest_path).name for m in manifests_of(table.metadata, new_snap, table.io)
        if m.added_snapshot_id == new_snap.snapshot_id}
    assert {p.name for p in set(folder.glob("*.avro")) - files_before} == referenced  # nothing of attempt 1 left
    assert json.loads(dry.stdout)["new_snapshot"]["removed_data_files"] == doc["new_snapshot"]["removed_data_files"]
    new = next(s for s in twins.md(ours)["snapshots"] if s["snapshot-id"] == doc["current_snapshot_id"])
    assert int(new["summary"]["deleted-data-files"]) == len(doc["new_snapshot"]["removed_data_files"]) > 0
    _refused_alike(twins, f"cherrypick_snapshot('{{t}}', {overwrite})", ["cherrypick", str(overwrite)], 6)
    twins.reads_alike(list(twins.ids))
