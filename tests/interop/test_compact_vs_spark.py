"""`icectl compact` judged by Spark on Spark-written tables.

For each fixture kind (v1; v2 with position deletes, partition evolution, a branch and a tag; v3
with deletion vectors and row lineage; 200 single-row appends with manifest merging off), on a
private clone:

- Spark reads the same rows for the current snapshot, every branch and every tag, and (v3) the
  same ``_row_id`` and ``_last_updated_sequence_number`` for every row; ``next-row-id`` does not move;
- icectl's ``inspect entries`` and Spark's ``entries`` metadata table list the same live files
  with the same snapshot ids and sequence numbers (every data_file field, for icectl's view);
- the rewritten groups have the manifest count the target size implies, clustered by partition;
- a second run changes nothing;
- Spark then commits on top (INSERT, and a DELETE that writes delete files or rewrites data files)
  and reads what the pre-compaction snapshot plus those changes give; Spark's expire_snapshots
  then removes the replaced manifests no retained snapshot uses, and no file a retained snapshot
  reaches.

Two more tests let Spark commit between icectl's plan and its commit: an INSERT (the plan is
re-applied on Spark's snapshot) and a DELETE that rewrites a manifest being replaced (icectl
plans again).
"""

from __future__ import annotations

import datetime
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from support.spark import latest_metadata_json, metadata_table, table_rows_digest

from icectl.ops.compact.manifests import CompactPlan, compact
from icectl.ops.compact.plan import CompactOptions
from icectl.ops.inspect.views import entry_rows
from icectl.spec.manifest import ManifestContent
from icectl.table import load_table
from icectl.table.reach import reachable_files
from icectl.table.scan import manifests_of

KINDS = ["v1_unpart", "v2_part", "v3_dv", "many_appends"]
SMALL_TARGET = 16 * 1024  # many_appends: ~200 entries roll into a few manifests at this size


def _refs(location: Path) -> dict[str, dict[str, Any]]:
    return dict(latest_metadata_json(location).get("refs") or {"main": {}})


def _reads(spark: Any, name: str, refs: dict[str, Any]) -> dict[str, tuple[int, str]]:
    out = {"current": table_rows_digest(spark, name)}
    for ref in refs:
        out[ref] = table_rows_digest(spark, f"SELECT * FROM {name} VERSION AS OF '{ref}'")
    return out


def _icectl_live(location: Path, ref: str) -> list[str]:
    rows = entry_rows(load_table(str(location)), ref=ref, metrics=True).rows
    return sorted(json.dumps({k: v for k, v in r.items() if k not in ("status", "manifest_path")},
                             sort_keys=True, default=str) for r in rows if r["status"] != 2)


def _spark_live(spark: Any, name: str) -> list[tuple[Any, ...]]:
    rows = spark.sql(f"SELECT snapshot_id, sequence_number, file_sequence_number, data_file.content, "
                     f"data_file.file_path, data_file.record_count, data_file.file_size_in_bytes "
                     f"FROM {name}.entries WHERE status < 2").collect()
    return sorted(tuple(r) for r in rows)


def _lineage(spark: Any, name: str) -> tuple[int, str]:
    return table_rows_digest(spark, f"SELECT id, _row_id, _last_updated_sequence_number FROM {name}")


def _check_clustered(table: Any, manifests: list[Any]) -> None:
    """Consecutive new manifests of one spec cover ascending, non-overlapping partition ranges."""
    md = table.metadata
    by_spec: dict[int, list[Any]] = {}
    for m in manifests:
        if m.content == ManifestContent.DATA:
            by_spec.setdefault(m.partition_spec_id, []).append(m)
    for spec_id, ms in by_spec.items():
        spec = md.spec_by_id(spec_id)
        ptype = md.partition_type(spec)
        if not ptype.fields or len(ms) < 2:
            continue
        first = ptype.fields[0].field_type
        bounds = [m.partitions[0].decoded_bounds(first) for m in ms]
        for (_, upper), (lower, _) in itertools.pairwise(bounds):
            if upper is not None and lower is not None:
                assert upper <= lower, f"spec {spec_id}: manifests not clustered: {bounds}"


@pytest.mark.parametrize("kind", KINDS)
def test_compact_then_spark_reads_writes_and_expires(spark: Any, spark_clone: Any, kind: str) -> None:
    t = spark_clone(kind)
    loc, name = Path(t.location), t.name
    if t.format_version >= 3:  # Spark merged v3_dv's data manifests: give row lineage several to merge
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('commit.manifest-merge.enabled'='false')")
        for lo in (1000, 1100, 1200):
            spark.sql(f"INSERT INTO {name} SELECT id + {lo}, region, value, ts, note FROM {name} WHERE id < 40")
    refs = _refs(loc)
    before = _reads(spark, name, refs)
    icectl_before = {ref: _icectl_live(loc, ref) for ref in refs}
    spark_before = _spark_live(spark, name)
    md_before = latest_metadata_json(loc)
    lineage_before = _lineage(spark, name) if t.format_version >= 3 else None
    table = load_table(str(loc))
    pre_id = table.metadata.current_snapshot().snapshot_id
    manifests_before = manifests_of(table.metadata, table.metadata.current_snapshot(), table.io)

    target = SMALL_TARGET if kind == "many_appends" else None
    result = compact(table, CompactOptions(target_size=target))
    assert result.exit_code == 0, result.data
    data = result.data
    assert data["manifests_replaced"] > 1, data  # every fixture has groups worth merging

    # Spark and icectl see the same table as before, on every ref.
    assert _reads(spark, name, refs) == before
    assert {ref: _icectl_live(loc, ref) for ref in refs} == icectl_before
    assert _spark_live(spark, name) == spark_before
    md_after = latest_metadata_json(loc)
    snap = next(s for s in md_after["snapshots"] if s["snapshot-id"] == data["snapshot_id"])
    parent = next(s for s in md_before["snapshots"] if s["snapshot-id"] == pre_id)
    assert snap["summary"]["operation"] == "replace"
    assert snap["summary"]["manifests-replaced"] == str(data["manifests_replaced"])
    assert snap["summary"]["manifests-created"] == str(data["manifests_created"])
    for k, v in parent["summary"].items():
        if k.startswith("total-"):
            assert snap["summary"][k] == v, k
    if t.format_version >= 3:
        assert any(g["action"] == "rewrite" and g["content"] == "data" for g in data["groups"]), data["groups"]
        assert _lineage(spark, name) == lineage_before  # Spark's rewrite_manifests re-IDs rows here
        assert md_after["next-row-id"] == md_before["next-row-id"]
        assert snap["added-rows"] == 0

    # Manifest count: what the target implies; replaced manifests stay on disk.
    table = load_table(str(loc))
    after = manifests_of(table.metadata, table.metadata.current_snapshot(), table.io)
    new = [m for m in after if m.added_snapshot_id == data["snapshot_id"]]
    assert len(new) == data["manifests_created"]
    for g in data["groups"]:
        if g["action"] != "rewrite":
            continue
        content = ManifestContent.DATA if g["content"] == "data" else ManifestContent.DELETES
        mine = [m for m in new if m.partition_spec_id == g["spec_id"] and m.content == content]
        sizes = [m.manifest_length for m in mine]
        if target is None:
            assert len(mine) == 1, sizes  # default 8 MiB: every group fits one manifest
        else:
            assert len(mine) >= 2, sizes
            assert all(0.6 * target <= s <= 1.15 * target for s in sizes[:-1]), sizes
            assert sizes[-1] <= 1.15 * target, sizes
    _check_clustered(table, new)
    replaced = {m.manifest_path for m in manifests_before} - {m.manifest_path for m in after}
    assert len(replaced) == data["manifests_replaced"]
    assert all(Path(p.removeprefix("file:")).exists() for p in replaced)

    # A second run finds nothing to do.
    again = compact(load_table(str(loc)), CompactOptions(target_size=target))
    assert again.data["manifests_replaced"] == 0 and "snapshot_id" not in again.data
    assert len(latest_metadata_json(loc)["snapshots"]) == len(md_after["snapshots"])

    # Spark commits on top and reads what the old snapshot plus its changes give.
    spark.sql(f"INSERT INTO {name} SELECT * FROM {name} VERSION AS OF {pre_id} WHERE id < 5")
    spark.sql(f"DELETE FROM {name} WHERE id % 3 = 0")
    expected = table_rows_digest(
        spark, f"SELECT * FROM (SELECT * FROM {name} VERSION AS OF {pre_id} UNION ALL "
               f"SELECT * FROM {name} VERSION AS OF {pre_id} WHERE id < 5) WHERE NOT (id % 3 = 0)")
    assert table_rows_digest(spark, name) == expected
    assert expected[0] > 0

    # Spark's expire_snapshots removes the replaced manifests no retained snapshot uses, nothing live.
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    spark.sql(f"CALL local.system.expire_snapshots(table => '{name.split('.', 1)[1]}', "
              f"older_than => TIMESTAMP '{now}', retain_last => 1)").collect()
    table = load_table(str(loc))
    md = table.metadata
    live, live_manifests = reachable_files(md, [s.snapshot_id for s in md.snapshots], table.io)
    for p in live.paths:
        assert Path(p.removeprefix("file:")).exists(), p
    for p in replaced:
        assert Path(p.removeprefix("file:")).exists() == (p in live_manifests), p
    if kind in ("v3_dv", "many_appends", "v1_unpart"):  # no tag or branch keeps the old snapshots
        assert not any(Path(p.removeprefix("file:")).exists() for p in replaced)
    assert table_rows_digest(spark, name) == expected
    for ref in refs:
        if ref != "main":
            assert table_rows_digest(spark, f"SELECT * FROM {name} VERSION AS OF '{ref}'") == before[ref]
    assert len(metadata_table(spark, name, "files")) == len(_icectl_live(loc, "main"))


def test_spark_insert_between_plan_and_commit_is_reapplied(spark: Any, spark_clone: Any) -> None:
    t = spark_clone("v1_unpart")
    name = t.name
    expected = table_rows_digest(spark, f"SELECT * FROM {name} UNION ALL SELECT * FROM {name} WHERE id < 3")
    seen: list[int] = []

    def spark_commits(plan: CompactPlan) -> None:
        if not seen:
            spark.sql(f"INSERT INTO {name} SELECT * FROM {name} WHERE id < 3")
            seen.append(1)

    table = load_table(str(t.location))
    result = compact(table, CompactOptions(), on_planned=spark_commits)
    data = result.data
    spark_head = latest_metadata_json(t.location)["snapshots"][-2]
    assert data["reapplied_on"] == [spark_head["snapshot-id"]]
    assert data["manifests_kept"] == 1  # Spark's new manifest
    assert table_rows_digest(spark, name) == expected
    snap = latest_metadata_json(t.location)["snapshots"][-1]
    assert snap["parent-snapshot-id"] == spark_head["snapshot-id"]
    assert snap["summary"]["total-records"] == spark_head["summary"]["total-records"]


def test_spark_delete_between_plan_and_commit_forces_a_new_plan(spark: Any, spark_clone: Any) -> None:
    t = spark_clone("v1_unpart")
    name = t.name
    calls: list[int] = []

    def spark_rewrites(plan: CompactPlan) -> None:
        calls.append(len(plan.replaced))
        if len(calls) == 1:  # copy-on-write DELETE: rewrites a data file, so its manifest too
            spark.sql(f"DELETE FROM {name} WHERE id = 1")

    expected = table_rows_digest(spark, f"SELECT * FROM {name} WHERE id != 1")
    metadata_dir = Path(t.location) / "metadata"
    result = compact(load_table(str(t.location)), CompactOptions(), on_planned=spark_rewrites)
    assert result.data["replanned"] is True
    assert len(calls) == 2
    assert table_rows_digest(spark, name) == expected
    head = latest_metadata_json(t.location)["snapshots"][-1]
    assert head["summary"]["operation"] == "replace"
    # The first plan's manifests were never committed: nothing of them is left behind.
    table = load_table(str(t.location))
    listed = {m.manifest_path for s in table.metadata.snapshots for m in manifests_of(table.metadata, s, table.io)}
    ours = {str(p) for p in metadata_dir.glob("*-m*.avro")} - {p.removeprefix("file:") for p in listed}
    assert not ours


@pytest.mark.parametrize("kind", ["v1_unpart", "v3_dv"])
def test_same_outcome_as_spark_rewrite_manifests_but_row_ids_kept(spark: Any, spark_clone: Any, kind: str) -> None:
    """Twins: Spark's rewrite_manifests compacts one, icectl the other. Same summary keys, totals
    and manifest counts; on v3 Spark gives every row a new _row_id and moves next-row-id, icectl not."""
    ours, theirs = spark_clone(kind), spark_clone(kind)
    for t in (ours, theirs):
        if t.format_version >= 3:
            spark.sql(f"ALTER TABLE {t.name} SET TBLPROPERTIES ('commit.manifest-merge.enabled'='false')")
            spark.sql(f"INSERT INTO {t.name} SELECT id + 1000, region, value, ts, note FROM {t.name} WHERE id < 40")
    lineage = {t.name: _lineage(spark, t.name) for t in (ours, theirs) if t.format_version >= 3}
    next_row_id = {t.name: latest_metadata_json(t.location).get("next-row-id") for t in (ours, theirs)}
    # Spark rewrites data manifests only, of the current spec; icectl is told the same.
    spec_id = load_table(str(ours.location)).metadata.default_spec_id
    compact(load_table(str(ours.location)), CompactOptions(content="data", spec_id=spec_id))
    spark.sql(f"CALL local.system.rewrite_manifests(table => '{theirs.name.split('.', 1)[1]}')").collect()
    snaps = {t.name: latest_metadata_json(t.location)["snapshots"][-2:] for t in (ours, theirs)}
    (my_parent, mine), (spark_parent, spark_snap) = snaps[ours.name], snaps[theirs.name]
    engine = {"engine-name", "engine-version", "iceberg-version", "app-id", "spark.app.id"}
    assert set(mine["summary"]) - engine == set(spark_snap["summary"]) - engine
    for k in ("operation", "manifests-created", "manifests-kept", "manifests-replaced", "changed-partition-count",
              "total-records", "total-data-files", "total-delete-files", "total-position-deletes"):
        assert mine["summary"][k] == spark_snap["summary"][k], k
    for k in (k for k in spark_snap["summary"] if k.startswith("total-")):
        # Each carries its parent's totals (sizes differ between twins: DV blobs name their table's paths).
        assert (mine["summary"][k], spark_snap["summary"][k]) == (my_parent["summary"][k],
                                                                  spark_parent["summary"][k]), k
    assert table_rows_digest(spark, ours.name) == table_rows_digest(spark, theirs.name)
    if ours.format_version >= 3:
        assert _lineage(spark, ours.name) == lineage[ours.name]
        assert latest_metadata_json(ours.location)["next-row-id"] == next_row_id[ours.name]
        # Spark's procedure: a fresh range for the rewritten manifests, and rows re-identified.
        assert latest_metadata_json(theirs.location)["next-row-id"] > next_row_id[theirs.name]
        assert _lineage(spark, theirs.name) != lineage[theirs.name]
