"""The delete fence (issue 11 items 2, 3, 10, 12) on clones of Spark-written fixtures: Spark judges
that it still reads the same rows after icectl deleted what it deleted.

Each table is built the way the problem was found: a metadata log naming a live data file and a
file outside the table with delete-after-commit on; an in-table symlink alias; a file added from
outside the table, then removed by Spark's DELETE; a `cp -r` copy of a table.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.fixtures import FixtureTable
from support.forge import property_change
from support.spark import latest_metadata_path, metadata_table, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.errors import ExitCode
from icectl.storage import local_path
from icectl.table import load_table
from icectl.table.commit import commit


def icectl(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, list(args), env={"ICECTL_CONFIG": ""})
    return r.exit_code, r.stdout, r.stderr


def digest(spark: Any, t: FixtureTable) -> tuple[int, str]:
    spark.sql(f"REFRESH TABLE {t.name}")
    return table_rows_digest(spark, t.name)


def live_files(spark: Any, t: FixtureTable) -> set[str]:
    spark.sql(f"REFRESH TABLE {t.name}")
    return {local_path(r["file_path"]) for r in metadata_table(spark, t.name, "files")}


def listing(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for d, _dirs, names in os.walk(root):
        for n in names:
            st = os.stat(os.path.join(d, n))
            out[os.path.relpath(os.path.join(d, n), root)] = (st.st_size, st.st_mtime_ns)
    return out


def delete_last_insert(spark: Any, t: FixtureTable) -> set[str]:
    """Spark's DELETE of the third insert (ids 35..49 of v1_unpart): its files leave the table."""
    before = live_files(spark, t)
    spark.sql(f"DELETE FROM {t.name} WHERE id >= 35")
    removed = before - live_files(spark, t)
    assert removed
    return removed


def test_metadata_log_cleanup_deletes_only_old_metadata_files(
        spark: Any, spark_clone: Callable[..., FixtureTable], tmp_path: Path) -> None:
    t = spark_clone("v1_unpart")
    rows = digest(spark, t)
    live = sorted(live_files(spark, t))
    outside = tmp_path / "elsewhere" / "v1.metadata.json"
    outside.parent.mkdir()
    outside.write_text("{}")
    # The log names a live data file and a file outside the table (hostile or damaged metadata).
    current = latest_metadata_path(t.location)
    doc = json.loads(current.read_text())
    old_metadata = [local_path(e["metadata-file"]) for e in doc["metadata-log"]]
    assert old_metadata and all(Path(p).exists() for p in old_metadata)
    bait = [{"timestamp-ms": 0, "metadata-file": p} for p in (live[0], str(outside))]
    doc["metadata-log"] = bait + doc["metadata-log"]
    current.write_text(json.dumps(doc))
    (current.parent / f".{current.name}.crc").unlink(missing_ok=True)  # Hadoop would reject the stale checksum
    result = commit(load_table(str(t.location)), lambda md: property_change(
        {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "1"}))
    assert result.committed
    assert Path(live[0]).exists() and outside.exists()
    assert sorted(Path(p).name for p in result.deleted_metadata_files) == sorted(Path(p).name for p in old_metadata)
    assert not any(Path(p).exists() for p in old_metadata)
    assert digest(spark, t) == rows


def test_in_table_alias_keeps_the_live_file(spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    """The current snapshot names t/alias/f (alias -> data), the expired ones t/data/f."""
    t = spark_clone("v1_unpart")
    rows = digest(spark, t)
    removed = delete_last_insert(spark, t)
    os.symlink(t.location / "data", t.location / "alias")
    aliased = [str(t.location / "alias" / os.path.relpath(p, t.location / "data")) for p in sorted(removed)]
    code, out, err = icectl("add-files", str(t.location), *aliased)
    assert code == 0, err
    assert digest(spark, t) == rows  # the same rows again, through the alias
    code, out, err = icectl("expire-snapshots", str(t.location), "--older-than", "0s", "--retain-last", "1", "--json")
    assert code == 0, (out, err)
    assert json.loads(out)["expired_snapshot_count"] >= 3
    assert all(Path(p).exists() for p in removed)
    assert digest(spark, t) == rows


def test_external_file_added_then_removed_does_not_block_expiry(
        spark: Any, spark_clone: Callable[..., FixtureTable], tmp_path: Path) -> None:
    for allow in (False, True):
        t = spark_clone("v1_unpart")
        ext = tmp_path / f"ext{int(allow)}" / "f.parquet"
        ext.parent.mkdir()
        shutil.copy(sorted(live_files(spark, t))[0], ext)
        code, _, err = icectl("add-files", str(t.location), str(ext))
        assert code == 0, err
        spark.sql(f"DELETE FROM {t.name} WHERE id < 35")  # removes the external copy too
        rows = digest(spark, t)
        args = ("expire-snapshots", str(t.location), "--older-than", "0s", "--retain-last", "1", "--json",
                *(["--allow-external-deletes"] if allow else []))
        code, out, err = icectl(*args, "--dry-run")
        assert code == 0, (out, err)
        plan = json.loads(out)
        assert plan["expired_snapshot_count"] >= 4 and plan["deleted_data_files_count"] >= 1
        assert plan["kept_external_files_count"] == (0 if allow else 1)
        code, out, err = icectl(*args)
        assert code == 0, (out, err)
        done = json.loads(out)
        assert done["kept_external_files_count"] == (0 if allow else 1)
        assert ext.exists() is (not allow)
        assert digest(spark, t) == rows


def test_a_cp_r_copy_refuses_writing_commands(spark_tables: Any, tmp_path: Path) -> None:
    original = spark_tables["v1_unpart"].location
    copy = tmp_path / "v1_unpart_copy"
    shutil.copytree(original, copy)
    before = listing(original)
    extra = tmp_path / "extra.parquet"
    shutil.copy(next(p for p in (original / "data").rglob("*.parquet")), extra)
    for args in (("compact", str(copy)), ("expire-snapshots", str(copy), "--older-than", "0s", "--retain-last", "1"),
                 ("add-files", str(copy), str(extra))):
        code, out, err = icectl(*args)
        assert code == ExitCode.REFUSED, (args, out, err)
        assert "is not the location its metadata names" in err
    assert listing(original) == before
