"""Branches, tags and properties: Spark's DDL on one twin, icectl on the other, same outcome.

Twin clones of the v2_part fixture (same snapshot ids; it has a tag ``after_merge`` and a branch
``dev``) get the same sequence of changes: Spark's ``ALTER TABLE ... CREATE [OR REPLACE] / REPLACE /
DROP BRANCH|TAG ... AS OF VERSION ... RETAIN ... WITH SNAPSHOT RETENTION`` and ``SET / UNSET
TBLPROPERTIES`` on one, ``icectl branch|tag|properties`` on the other. Then the refs (type, snapshot,
every retention value), the properties, the current snapshot and the snapshot-log's snapshots are
equal, and Spark reads the same rows at every ref of both twins.
"""

from __future__ import annotations

from typing import Any

from support.fixtures import FixtureTable

from icectl.table import load_table
from interop.test_write_vs_spark import icectl

DAY = 86_400_000


def _state(t: FixtureTable) -> dict[str, Any]:
    md = load_table(str(t.location)).metadata
    return {"refs": {n: r.to_json() for n, r in md.refs.items()}, "properties": dict(md.properties),
            "current": md.current_snapshot_id, "snapshot_log": [e.snapshot_id for e in md.snapshot_log],
            "snapshots": sorted(s.snapshot_id for s in md.snapshots)}


def _rows_at(spark: Any, name: str, ref: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(f"SELECT id, name, price FROM {name} VERSION AS OF '{ref}' "
                                        "ORDER BY id, name").collect()]


def test_branch_tag_and_property_ddl_match_spark(spark: Any, spark_clone: Any) -> None:
    by_spark, by_icectl = spark_clone("v2_part"), spark_clone("v2_part")
    md = load_table(str(by_spark.location)).metadata
    main = md.current_snapshot_id
    ancestors = []  # main's history, newest first
    sid = main
    while sid is not None:
        ancestors.append(sid)
        sid = md.snapshot_by_id(sid).parent_snapshot_id  # type: ignore[union-attr]
    s1, s2 = ancestors[-1], ancestors[len(ancestors) // 2]
    assert s1 != s2 != main
    a, b = by_spark.name, str(by_icectl.location)

    steps: list[tuple[str, list[str]]] = [
        (f"CREATE BRANCH rb AS OF VERSION {s1} RETAIN 30 DAYS WITH SNAPSHOT RETENTION 3 SNAPSHOTS 7 DAYS",
         ["branch", "create", b, "rb", "--snapshot", str(s1), "--max-ref-age", "30d", "--retain-last", "3",
          "--max-snapshot-age", "7d"]),
        ("CREATE BRANCH cb WITH SNAPSHOT RETENTION 2 SNAPSHOTS",
         ["branch", "create", b, "cb", "--retain-last", "2"]),
        ("CREATE BRANCH IF NOT EXISTS cb AS OF VERSION 1 RETAIN 1 DAYS",  # exists: nothing at all
         ["branch", "create", b, "cb", "--if-not-exists", "--snapshot", str(s1), "--max-ref-age", "1d"]),
        (f"REPLACE BRANCH rb AS OF VERSION {s2} RETAIN 60 DAYS",  # keeps its snapshot retention
         ["branch", "replace", b, "rb", "--snapshot", str(s2), "--max-ref-age", "60d"]),
        (f"CREATE OR REPLACE BRANCH cb AS OF VERSION {s1} WITH SNAPSHOT RETENTION 5 DAYS",
         ["branch", "create", b, "cb", "--replace", "--snapshot", str(s1), "--max-snapshot-age", "5d"]),
        ("CREATE OR REPLACE BRANCH nb", ["branch", "create", b, "nb", "--replace"]),  # absent: a create
        ("DROP BRANCH dev", ["branch", "drop", b, "dev"]),
        ("DROP BRANCH IF EXISTS dev", ["branch", "drop", b, "dev", "--if-exists"]),
        (f"CREATE TAG t1 AS OF VERSION {s1} RETAIN 10 DAYS",
         ["tag", "create", b, "t1", "--snapshot", str(s1), "--max-ref-age", "10d"]),
        (f"REPLACE TAG t1 AS OF VERSION {s2}", ["tag", "replace", b, "t1", "--ref", "rb"]),  # rb is at s2
        ("CREATE OR REPLACE TAG after_merge RETAIN 2 DAYS",
         ["tag", "create", b, "after_merge", "--replace", "--max-ref-age", "2d"]),
        ("CREATE TAG t2", ["tag", "create", b, "t2"]),
        ("DROP TAG t2", ["tag", "drop", b, "t2"]),
        ("DROP TAG IF EXISTS t2", ["tag", "drop", b, "t2", "--if-exists"]),
        (f"REPLACE BRANCH main AS OF VERSION {s2}", ["branch", "replace", b, "main", "--snapshot", str(s2)]),
        ("SET TBLPROPERTIES ('commit.retry.num-retries'='7', 'history.expire.max-ref-age-ms'='864000000', "
         "'team'='ops', 'gc.enabled'='false')",
         ["properties", "set", b, "commit.retry.num-retries=7", "history.expire.max-ref-age-ms=864000000",
          "team=ops", "gc.enabled=false"]),
        ("UNSET TBLPROPERTIES ('team', 'gc.enabled')", ["properties", "unset", b, "team", "gc.enabled"]),
    ]
    for ddl, args in steps:
        spark.sql(f"ALTER TABLE {a} {ddl}")
        icectl(*args)

    spark_state, icectl_state = _state(by_spark), _state(by_icectl)
    assert icectl_state == spark_state
    refs = icectl_state["refs"]
    # What the steps should have done, said independently of both tools.
    assert refs["rb"] == {"snapshot-id": s2, "type": "branch", "min-snapshots-to-keep": 3,
                          "max-snapshot-age-ms": 7 * DAY, "max-ref-age-ms": 60 * DAY}
    assert refs["cb"] == {"snapshot-id": s1, "type": "branch", "min-snapshots-to-keep": 2,
                          "max-snapshot-age-ms": 5 * DAY}
    assert refs["nb"] == {"snapshot-id": main, "type": "branch"}
    assert refs["t1"] == {"snapshot-id": s2, "type": "tag", "max-ref-age-ms": 10 * DAY}
    assert refs["after_merge"] == {"snapshot-id": main, "type": "tag", "max-ref-age-ms": 2 * DAY}
    assert "dev" not in refs and "t2" not in refs
    assert icectl_state["current"] == s2 and icectl_state["snapshot_log"][-1] == s2
    assert icectl_state["properties"]["commit.retry.num-retries"] == "7"
    assert "team" not in icectl_state["properties"] and "gc.enabled" not in icectl_state["properties"]

    spark.sql(f"REFRESH TABLE {by_icectl.name}")
    for ref in sorted(refs):
        assert _rows_at(spark, by_icectl.name, ref) == _rows_at(spark, a, ref), ref


def test_v1_table_refs_and_properties_match_spark(spark: Any, spark_clone: Any) -> None:
    """Format v1 keeps refs and properties the same way: a tag and a branch with retention from an
    older snapshot, a property set and unset, on twins of v1_unpart."""
    by_spark, by_icectl = spark_clone("v1_unpart"), spark_clone("v1_unpart")
    md = load_table(str(by_spark.location)).metadata
    first = min(md.snapshots, key=lambda s: s.timestamp_ms).snapshot_id
    a, b = by_spark.name, str(by_icectl.location)
    for ddl, args in [
        (f"CREATE TAG v1tag AS OF VERSION {first} RETAIN 7 DAYS",
         ["tag", "create", b, "v1tag", "--snapshot", str(first), "--max-ref-age", "7d"]),
        (f"CREATE BRANCH v1b AS OF VERSION {first} WITH SNAPSHOT RETENTION 4 SNAPSHOTS",
         ["branch", "create", b, "v1b", "--snapshot", str(first), "--retain-last", "4"]),
        ("SET TBLPROPERTIES ('history.expire.min-snapshots-to-keep'='3', 'note'='x')",
         ["properties", "set", b, "history.expire.min-snapshots-to-keep=3", "note=x"]),
        # a key the table lacks is ignored by both (icectl warns)
        ("UNSET TBLPROPERTIES ('note', 'never_set')", ["properties", "unset", b, "note", "never_set"]),
    ]:
        spark.sql(f"ALTER TABLE {a} {ddl}")
        icectl(*args)
    state = _state(by_icectl)
    assert state == _state(by_spark)
    assert state["refs"]["v1b"] == {"snapshot-id": first, "type": "branch", "min-snapshots-to-keep": 4}
    assert state["properties"]["history.expire.min-snapshots-to-keep"] == "3" and "note" not in state["properties"]
    spark.sql(f"REFRESH TABLE {by_icectl.name}")
    for ref in ("v1tag", "v1b", "main"):
        assert _rows_at(spark, by_icectl.name, ref) == _rows_at(spark, a, ref), ref


def test_branch_on_an_empty_table_matches_spark(spark: Any, tmp_path: Any) -> None:
    """Spark's CREATE BRANCH on a table without snapshots commits an empty append on the new branch
    (Java's createBranch(name)); icectl does the same in one commit: same refs and retention, no
    main, one snapshot without a parent, the same summary keys; both branches read as empty by
    Spark, and Spark appends to icectl's branch and reads the row back."""
    names = ("local.db.empty_by_spark", "local.db.empty_by_icectl")
    for n in names:
        spark.sql(f"CREATE TABLE {n} (id bigint, name string) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"ALTER TABLE {names[0]} CREATE BRANCH audit RETAIN 7 DAYS WITH SNAPSHOT RETENTION 4 SNAPSHOTS")
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {names[1]}").where("col_name = 'Location'").collect()[0][1]
    icectl("branch", "create", location, "audit", "--max-ref-age", "7d", "--retain-last", "4")
    mds = [load_table(str(spark.sql(f"DESCRIBE TABLE EXTENDED {n}").where("col_name = 'Location'").collect()[0][1]))
           .metadata for n in names]
    for md in mds:
        assert set(md.refs) == {"audit"} and md.current_snapshot_id is None
        (snap,) = md.snapshots
        assert snap.parent_snapshot_id is None and snap.snapshot_id == md.refs["audit"].snapshot_id
    spark_ref, icectl_ref = (md.refs["audit"].to_json() for md in mds)
    spark_ref.pop("snapshot-id")
    icectl_ref.pop("snapshot-id")
    assert icectl_ref == spark_ref
    spark_summary, icectl_summary = (md.snapshots[0].summary for md in mds)
    assert icectl_summary["operation"] == spark_summary["operation"] == "append"
    ours = {k for k in icectl_summary if not k.startswith("engine-")}
    theirs = {k for k in spark_summary if not k.startswith(("engine-", "spark.", "iceberg-version", "app-id"))}
    assert ours == theirs, (icectl_summary, spark_summary)
    assert all(icectl_summary[k] == spark_summary[k] for k in ours)
    for n in names:
        assert spark.sql(f"SELECT * FROM {n} VERSION AS OF 'audit'").count() == 0
    spark.sql(f"INSERT INTO {names[1]}.branch_audit VALUES (1, 'a')")
    assert [tuple(r) for r in spark.sql(f"SELECT * FROM {names[1]} VERSION AS OF 'audit'").collect()] == [(1, "a")]
    for n in names:
        spark.sql(f"DROP TABLE {n} PURGE")
