"""`icectl rewrite-data-files` drops, with its commit, the delete files Java's commit drops.

Java's ``RewriteFiles`` commit (``MergingSnapshotProducer.apply``) computes the smallest data
sequence number of the new snapshot's data manifests (and the table's last sequence number), and
its ``ManifestFilterManager`` drops every live delete file with a data sequence number above 0
and below it: such a file applies to no live row (a position delete to data files at or before its
own sequence number, an equality delete to those before it). On v2_part (min-input-files=2) that is
the 13 position delete files at sequence numbers 4, 5 and 6 of 28. Each commit of a partial-progress
run applies the rule on its own head. Spark reads the same rows throughout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from support.fixtures import FixtureTable
from support.spark import latest_metadata_json, table_rows_digest
from typer.testing import CliRunner

from icectl.cli.app import app
from icectl.spec.manifest import DataFileContent
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.table import load_table
from icectl.table.scan_tasks import live_files


def rewrite(location: str, *options: str) -> dict[str, Any]:
    r = CliRunner().invoke(app, ["rewrite-data-files", location, *options, "--json"])
    assert r.exit_code == 0, (r.stdout, r.stderr)
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def _files(md: TableMetadata, snap: Snapshot, location: str) -> tuple[dict[str, int], dict[str, int]]:
    """(data file -> data sequence number, delete file -> data sequence number) live in ``snap``."""
    io = load_table(location).io
    data, deletes = live_files(md, snap, io)
    return ({d.file.file_path: d.data_sequence_number for d in data},
            {d.file.file_path: d.data_sequence_number for d in deletes})


def _check_commit(md: TableMetadata, parent: Snapshot, snap: Snapshot, location: str) -> set[str]:
    """The delete files ``snap`` dropped are exactly those Java's rule drops; returns them."""
    data_before, deletes_before = _files(md, parent, location)
    data_after, deletes_after = _files(md, snap, location)
    # Java's threshold: the last sequence number before the commit, and the smallest data sequence
    # number of the data files left (the ones the commit adds are in manifests of their own, left out).
    kept_data = [seq for path, seq in data_after.items() if path in data_before]
    assert parent.sequence_number is not None
    threshold = min([parent.sequence_number, *kept_data])
    dropped = deletes_before.keys() - deletes_after.keys()
    assert deletes_after.keys() <= deletes_before.keys()
    assert dropped == {p for p, seq in deletes_before.items() if 0 < seq < threshold}, (threshold, dropped)
    removed = int(snap.summary.get("removed-delete-files", "0"))
    assert removed == len(dropped), snap.summary
    assert int(snap.summary["total-delete-files"]) == len(deletes_after)
    return dropped


def test_v2_delete_files_older_than_every_live_data_file_go_with_the_commit(
        spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v2_part")
    before = table_rows_digest(spark, t.name)
    doc = rewrite(str(t.location), "--min-input-files", "2")
    assert doc["removed_delete_files_count"] == 0  # as Spark's procedure: it counts DVs only
    md = load_table(str(t.location)).metadata
    snap = md.snapshot_by_id(doc["snapshot_id"])
    assert snap is not None and snap.parent_snapshot_id is not None
    parent = md.snapshot_by_id(snap.parent_snapshot_id)
    assert parent is not None
    _, deletes_before = _files(md, parent, str(t.location))
    dropped = _check_commit(md, parent, snap, str(t.location))
    assert sorted(deletes_before[p] for p in dropped) == [4] * 2 + [5] * 5 + [6] * 6
    assert snap.summary["removed-position-delete-files"] == "13"
    io = load_table(str(t.location)).io
    contents = {d.file.file_path: d.file.content for d in live_files(md, parent, io)[1]}
    assert {contents[p] for p in dropped} == {DataFileContent.POSITION_DELETES}
    spark.sql(f"REFRESH TABLE {t.name}")
    assert table_rows_digest(spark, t.name) == before


def test_each_partial_progress_commit_drops_what_java_drops_on_its_head(
        spark: Any, spark_clone: Callable[..., FixtureTable]) -> None:
    t = spark_clone("v2_part")
    before = table_rows_digest(spark, t.name)
    doc = rewrite(str(t.location), "--min-input-files", "2", "--partial-progress", "--max-commits", "10")
    assert len(doc["snapshot_ids"]) > 2
    md = load_table(str(t.location)).metadata
    dropped: list[set[str]] = []
    for sid in doc["snapshot_ids"]:
        snap = md.snapshot_by_id(sid)
        assert snap is not None and snap.parent_snapshot_id is not None
        parent = md.snapshot_by_id(snap.parent_snapshot_id)
        assert parent is not None
        dropped.append(_check_commit(md, parent, snap, str(t.location)))
    # The files go as the data they could apply to goes, not all with the first commit nor none.
    assert sum(len(d) for d in dropped) == 13 and not all(dropped) and any(dropped)
    spark.sql(f"REFRESH TABLE {t.name}")
    for sid in doc["snapshot_ids"]:
        assert table_rows_digest(spark, f"SELECT * FROM {t.name} VERSION AS OF {sid}") == before
    assert latest_metadata_json(t.location)["current-snapshot-id"] == doc["snapshot_ids"][-1]
