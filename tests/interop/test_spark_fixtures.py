"""The Spark-generated fixture tables are what tests/support/fixtures.py claims they are.

Expected contents are recomputed here in plain Python from the documented operations, and
structure is checked through Spark's own metadata tables and the raw metadata JSON, so a builder
that silently did something else (copy-on-write instead of merge-on-read, no DVs, lost branch...)
fails these tests.
"""

from __future__ import annotations

import zipfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.fixtures import MANY_SNAPSHOTS, FixtureTable, LazyFixtureTables
from support.spark import (
    jackson_input_jars,
    latest_metadata_json,
    metadata_table,
    relocate_class_file,
    shaded_jackson_jar,
    table_rows_digest,
)

SHADED = b"org/apache/iceberg/shaded/com/fasterxml/jackson/"


def _ids(spark: Any, query: str) -> list[int]:
    return sorted(r[0] for r in spark.sql(query).collect())


def _field_types(md: dict[str, Any]) -> dict[str, Any]:
    schema = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])
    return {f["name"]: f["type"] for f in schema["fields"]}


def _main_chain(md: dict[str, Any], ref: str = "main") -> list[int]:
    """Snapshot ids from the ref's head back to the root, following parent-snapshot-id."""
    by_id = {s["snapshot-id"]: s for s in md["snapshots"]}
    chain, sid = [], md["refs"][ref]["snapshot-id"]
    while sid is not None:
        chain.append(sid)
        sid = by_id[sid].get("parent-snapshot-id")
    return chain


# --------------------------------------------------------------------------- jar relocation (no JVM)


def test_shaded_jackson_jar_is_relocated() -> None:
    jar = shaded_jackson_jar()
    assert shaded_jackson_jar() == jar  # cached: same file, not rebuilt
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
        assert "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class" in names
        assert "org/apache/iceberg/shaded/com/fasterxml/jackson/databind/ObjectMapper.class" in names
        assert not [n for n in names if n.startswith("com/fasterxml/")]
        assert not [n for n in names if "module-info" in n or n.startswith("META-INF/versions/")]
        service = "META-INF/services/org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory"
        assert z.read(service).strip().startswith(b"org.apache.iceberg.shaded.com.fasterxml.jackson.")
        for name in names:
            if name.endswith(".class"):
                data = z.read(name)
                # every Jackson reference carries the shade prefix ...
                assert data.count(b"com/fasterxml/jackson/") == data.count(SHADED), name
                # ... and relocating twice changes nothing
                assert relocate_class_file(data) == data, name


def test_relocate_class_file_keeps_constant_pool_shape() -> None:
    with zipfile.ZipFile(jackson_input_jars()[0]) as z:
        original = z.read("com/fasterxml/jackson/core/JsonFactory.class")
    relocated = relocate_class_file(original)
    assert relocated[:10] == original[:10]  # magic, version and constant-pool count unchanged
    assert b"com/fasterxml/jackson/core/JsonFactory" in original
    assert original.count(b"com/fasterxml/jackson/") == relocated.count(SHADED) > 0
    grown = relocated.count(SHADED) * (len(SHADED) - len(b"com/fasterxml/jackson/"))
    dotted = original.count(b"com.fasterxml.jackson.") * len(b"org.apache.iceberg.shaded.")
    assert len(relocated) == len(original) + grown + dotted
    with pytest.raises(ValueError):
        relocate_class_file(b"not a class file")


# --------------------------------------------------------------------------- helpers on real Spark


def test_table_rows_digest_is_order_independent_and_sensitive(spark: Any) -> None:
    base = "SELECT id, CAST(id * 2 AS STRING) AS s FROM range(50)"
    n, digest = table_rows_digest(spark, base)
    assert n == 50
    assert table_rows_digest(spark, f"{base} ORDER BY id DESC") == (50, digest)
    assert table_rows_digest(spark, f"SELECT * FROM ({base}) WHERE id != 7")[1] != digest
    changed = "SELECT id, CASE WHEN id = 3 THEN 'x' ELSE CAST(id * 2 AS STRING) END AS s FROM range(50)"
    assert table_rows_digest(spark, changed)[1] != digest
    # a NULL in column a is not the same row as a NULL in column b
    assert (
        table_rows_digest(spark, "SELECT CAST(NULL AS INT) AS a, 1 AS b")[1]
        != table_rows_digest(spark, "SELECT 1 AS a, CAST(NULL AS INT) AS b")[1]
    )
    # duplicates count (multiset, not set)
    assert table_rows_digest(spark, f"{base} UNION ALL SELECT 1, '2'")[1] != digest
    assert table_rows_digest(spark, "SELECT 1 AS a WHERE false") == (0, "0-0")


def test_metadata_table_returns_plain_python(spark_tables: LazyFixtureTables, spark: Any) -> None:
    t = spark_tables["v1_unpart"]
    files = metadata_table(spark, t.name, "files")
    assert files and all(isinstance(f, dict) for f in files)
    assert isinstance(files[0]["readable_metrics"], dict)
    assert all(isinstance(v, bytes) for v in files[0]["lower_bounds"].values())
    with pytest.raises(ValueError):
        metadata_table(spark, t.name, "files; DROP TABLE x")


# --------------------------------------------------------------------------- v1_unpart


def test_v1_unpart(spark_tables: LazyFixtureTables, spark: Any) -> None:
    t = spark_tables["v1_unpart"]
    assert t.name == "local.db.v1_unpart" and t.format_version == 1
    assert t.location == t.path and (t.location / "metadata" / "version-hint.text").is_file()
    md = latest_metadata_json(t.location)
    assert md["format-version"] == 1
    assert md["partition-spec"] == [] and all(not s["fields"] for s in md["partition-specs"])
    assert _field_types(md) == {
        "id": "long",
        "name": "string",
        "price": "double",
        "day": "date",
        "ts": "timestamptz",
        "amount": "decimal(10, 2)",
        "flag": "boolean",
        "payload": "binary",
    }
    snaps = metadata_table(spark, t.name, "snapshots")
    assert [s["operation"] for s in snaps] == ["append"] * 3
    assert [int(s["summary"]["added-records"]) for s in snaps] == [20, 15, 15]
    assert metadata_table(spark, t.name, "delete_files") == []
    assert _ids(spark, f"SELECT id FROM {t.name}") == list(range(50))
    assert table_rows_digest(spark, t.name)[0] == 50


# --------------------------------------------------------------------------- v2_part


def _v2_expected() -> tuple[dict[int, str], set[int], dict[int, str]]:
    """Replays the v2_part builder on names: (main id->name, tag ids, dev branch id->name)."""
    rows = {i: f"name-{i}" for i in range(80)}
    rows.update({i: f"name-{i}-ow" for i in range(80) if i % 3 == 0})  # dynamic overwrite of day 0
    rows = {i: n for i, n in rows.items() if i % 7 != 3}  # DELETE
    rows = {i: n + "-upd" if i % 5 == 1 else n for i, n in rows.items()}  # UPDATE
    for i in range(70, 90):  # MERGE
        if i not in rows:
            rows[i] = f"name-{i}-merge"
        elif i % 2 == 0:
            rows[i] = f"name-{i}-merge"
        else:
            del rows[i]
    tag = set(rows)
    dev = {**rows, **{i: f"name-{i}-dev" for i in range(100, 110)}}
    dev = {i: n for i, n in dev.items() if i % 4 != 0}
    rows.update({i: f"name-{i}-s1" for i in range(200, 220)})
    rows.update({i: f"name-{i}-s2" for i in range(300, 330)})
    rows = {i: n for i, n in rows.items() if i % 10 != 5}
    return rows, tag, dev


def test_v2_part_contents_tag_and_branch(spark_tables: LazyFixtureTables, spark: Any) -> None:
    t = spark_tables["v2_part"]
    main, tag, dev = _v2_expected()
    got = {r["id"]: r["name"] for r in spark.sql(f"SELECT id, name FROM {t.name}").collect()}
    assert got == main
    assert _ids(spark, f"SELECT id FROM {t.name} VERSION AS OF 'after_merge'") == sorted(tag)
    got_dev = {r["id"]: r["name"] for r in spark.sql(f"SELECT id, name FROM {t.name}.branch_dev").collect()}
    assert got_dev == dev
    notes = spark.sql(f"SELECT id FROM {t.name} WHERE note = 'late-update'").collect()
    assert sorted(r["id"] for r in notes) == [2, 204, 306]
    assert table_rows_digest(spark, t.name)[0] == len(main)

    refs = {r["name"]: r for r in metadata_table(spark, t.name, "refs")}
    assert refs["after_merge"]["type"] == "TAG"
    assert refs["after_merge"]["max_reference_age_in_ms"] == 3650 * 86_400_000
    assert refs["dev"]["type"] == "BRANCH" and refs["main"]["type"] == "BRANCH"
    md = latest_metadata_json(t.location)
    main_chain, dev_chain = _main_chain(md, "main"), _main_chain(md, "dev")
    tag_id = refs["after_merge"]["snapshot_id"]
    assert tag_id in main_chain and tag_id in dev_chain
    # the branch has its own commits (append + delete) not on main, and main moved on without it
    dev_only = [s for s in dev_chain if s not in main_chain]
    by_id = {s["snapshot-id"]: s for s in md["snapshots"]}
    assert [by_id[s]["summary"]["operation"] for s in reversed(dev_only)] == ["append", "delete"]
    assert main_chain[0] not in dev_chain and main_chain.index(tag_id) >= 3


def test_v2_part_deletes_schema_and_partition_evolution(spark_tables: LazyFixtureTables, spark: Any) -> None:
    t = spark_tables["v2_part"]
    md = latest_metadata_json(t.location)
    assert md["format-version"] == 2
    for mode in ("delete", "update", "merge"):
        assert md["properties"][f"write.{mode}.mode"] == "merge-on-read"

    # merge-on-read DELETE/UPDATE/MERGE => position delete files (content=1) in Parquet, no DVs
    deletes = metadata_table(spark, t.name, "delete_files")
    assert deletes and {d["content"] for d in deletes} == {1}
    assert {d["file_format"] for d in deletes} == {"PARQUET"}
    assert all(Path(d["file_path"]).is_file() for d in deletes)
    ops = [s["operation"] for s in metadata_table(spark, t.name, "snapshots")]
    assert ops.count("append") >= 4 and "overwrite" in ops and "delete" in ops
    overwrite = next(s for s in md["snapshots"] if s["summary"].get("replace-partitions") == "true")
    assert int(overwrite["summary"]["deleted-data-files"]) > 0  # the dynamic INSERT OVERWRITE

    # schema evolution: added 'note', renamed qty -> quantity (same field id), old schemas kept
    types = _field_types(md)
    assert "note" in types and "quantity" in types and "qty" not in types
    assert types["ts"] == "timestamptz" and types["ts_ntz"] == "timestamp"
    assert types["amount"] == "decimal(12, 2)" and types["tags"]["type"] == "list"
    assert types["attrs"]["type"] == "map" and types["point"]["type"] == "struct"
    assert len(md["schemas"]) >= 3
    qty_ids = {f["id"] for s in md["schemas"] for f in s["fields"] if f["name"] in ("qty", "quantity")}
    assert len(qty_ids) == 1

    # partition evolution: days(ts)+bucket(4,id) -> ... -> days(ts)+category, with data in both
    specs = {s["spec-id"]: [(f["transform"], f["name"]) for f in s["fields"]] for s in md["partition-specs"]}
    assert len(specs) > 1
    assert specs[0] == [("day", "ts_day"), ("bucket[4]", "id_bucket")]
    assert specs[md["default-spec-id"]] == [("day", "ts_day"), ("identity", "category")]
    files = metadata_table(spark, t.name, "files")
    assert {f["spec_id"] for f in files if f["content"] == 0} >= {0, md["default-spec-id"]}
    assert {f["spec_id"] for f in deletes} >= {0, md["default-spec-id"]}


# --------------------------------------------------------------------------- v3_dv


def _v3_expected() -> dict[int, str]:
    def region(i: int) -> str | None:
        return None if i % 10 == 9 else ("eu", "us", "apac")[i % 3]

    rows = {i: f"row-{i}" for i in range(90)}
    rows = {i: n for i, n in rows.items() if not (region(i) == "eu" and i % 4 == 0)}
    rows = {i: "updated" if i % 5 == 2 else n for i, n in rows.items()}
    rows = {i: n for i, n in rows.items() if not (region(i) == "eu" and i % 4 == 1)}
    rows.update({i: f"row-{i}" for i in range(100, 130)})
    return {i: n for i, n in rows.items() if i % 6 != 0}


def test_v3_dv_deletion_vectors(spark_tables: LazyFixtureTables, spark: Any) -> None:
    t = spark_tables["v3_dv"]
    got = {r["id"]: r["note"] for r in spark.sql(f"SELECT id, note FROM {t.name}").collect()}
    assert got == _v3_expected()
    md = latest_metadata_json(t.location)
    assert md["format-version"] == 3

    deletes = metadata_table(spark, t.name, "delete_files")
    assert deletes
    for dv in deletes:  # every delete is a DV: a blob in a Puffin file, bound to one data file
        assert dv["content"] == 1 and dv["file_format"] == "PUFFIN"
        assert dv["file_path"].endswith(".puffin") and dv["referenced_data_file"]
        assert dv["content_offset"] is not None and dv["content_size_in_bytes"] > 0
    per_puffin: dict[str, set[str]] = defaultdict(set)
    for dv in metadata_table(spark, t.name, "all_delete_files"):
        per_puffin[dv["file_path"]].add(dv["referenced_data_file"])
    assert max(len(refs) for refs in per_puffin.values()) > 1  # one Puffin holds DVs for several files
    for path in per_puffin:
        raw = Path(path).read_bytes()
        assert raw[:4] == b"PFA1" and raw[-4:] == b"PFA1"  # Puffin magic at both ends

    # a second DELETE on files that already had DVs replaced them (old DV entries marked DELETED)
    entries = metadata_table(spark, t.name, "entries")
    assert any(e["status"] == 2 and e["data_file"]["content"] == 1 for e in entries)
    assert any(int(s["summary"].get("removed-dvs", 0)) > 0 for s in md["snapshots"])

    # identity(region) with a NULL partition, then an unpartitioned spec with data and DVs in it
    specs = {s["spec-id"]: s["fields"] for s in md["partition-specs"]}
    assert specs[0][0]["transform"] == "identity" and specs[md["default-spec-id"]] == []
    files = metadata_table(spark, t.name, "files")
    data = [f for f in files if f["content"] == 0]
    assert any(f["spec_id"] == 0 and f["partition"]["region"] is None for f in data)
    assert {f["spec_id"] for f in data} == {0, md["default-spec-id"]}
    assert md["default-spec-id"] in {d["spec_id"] for d in deletes}


def test_v3_dv_row_lineage(spark_tables: LazyFixtureTables, spark: Any) -> None:
    t = spark_tables["v3_dv"]
    md = latest_metadata_json(t.location)
    assert md["next-row-id"] >= 120  # at least every row ever appended got an id
    assert all("first-row-id" in s for s in md["snapshots"])
    data = [f for f in metadata_table(spark, t.name, "files") if f["content"] == 0]
    assert all(f["first_row_id"] is not None for f in data)
    assert max(f["first_row_id"] + f["record_count"] for f in data) <= md["next-row-id"]
    assert md["properties"]["write.delete.mode"] == "merge-on-read"


# --------------------------------------------------------------------------- many_snaps


def test_many_snaps(spark_tables: LazyFixtureTables, spark: Any) -> None:
    t = spark_tables["many_snaps"]
    snaps = metadata_table(spark, t.name, "snapshots")
    assert len(snaps) == MANY_SNAPSHOTS >= 200
    assert {s["operation"] for s in snaps} == {"append"}
    md = latest_metadata_json(t.location)
    assert len(_main_chain(md)) == MANY_SNAPSHOTS  # one linear history
    assert table_rows_digest(spark, t.name)[0] == MANY_SNAPSHOTS
    assert _ids(spark, f"SELECT id FROM {t.name}") == list(range(MANY_SNAPSHOTS))
    # file count stays modest: old metadata JSONs are pruned, one data file per snapshot
    metadata_jsons = list((t.location / "metadata").glob("*.metadata.json"))
    assert len(metadata_jsons) <= 26 and len(md["metadata-log"]) <= 25
    assert len(list((t.location / "data").glob("*.parquet"))) == MANY_SNAPSHOTS


# --------------------------------------------------------------------------- clones


def _history(spark: Any, t: FixtureTable) -> list[tuple[str, str | None, str | None]]:
    return [
        (s["operation"], s["summary"].get("added-records"), s["summary"].get("added-position-deletes"))
        for s in metadata_table(spark, t.name, "snapshots")
    ]


def test_clone_regenerates_identical_independent_table(
    spark_tables: LazyFixtureTables, spark: Any, spark_clone: Callable[..., FixtureTable]
) -> None:
    original = spark_tables["v3_dv"]
    before = table_rows_digest(spark, original.name)
    clone = spark_clone(original.name)
    assert clone.kind == "v3_dv" and clone.name != original.name
    assert clone.location != original.location and clone.location.is_dir()
    assert table_rows_digest(spark, clone.name) == before
    assert _history(spark, clone) == _history(spark, original)
    spark.sql(f"DELETE FROM {clone.name} WHERE id < 50")
    assert table_rows_digest(spark, clone.name) != before
    assert table_rows_digest(spark, original.name) == before
    with pytest.raises(KeyError):
        spark_clone("local.db.not_a_fixture")
