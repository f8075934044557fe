"""icectl/ops/compact/report.py: the compact result of a dry run, a run with nothing to do and a committed run.

Plans are made by hand (plans.py); every expected number is counted from them here.
"""

from __future__ import annotations

from icectl.ops.compact.report import compact_result
from icectl.ops.compact.run import CommitOutcome, Compaction
from icectl.results import NEXT_METADATA
from icectl.spec.manifest import ManifestContent
from icectl.spec.snapshots import Snapshot
from unit.ops.compact.plans import COMMIT_ID, FakePlan, FakeWritten, fake_plan, group, manifest

V4_ONLY = {"format_version", "root_files_flushed", "manifest_dvs_applied", "root_deleted_entries_dropped",
           "root_manifest"}


def _plan() -> FakePlan:
    # data: 3 manifests (600 bytes) into 2, 10 live entries, 4 deleted dropped; deletes: one manifest, skipped
    return fake_plan([group([manifest("/m/a", 100), manifest("/m/b", 200), manifest("/m/c", 300)], rewrite=True,
                            bins=2, live=10, deleted=4),
                      group([manifest("/m/d", 50)], rewrite=False, content=ManifestContent.DELETES)], kept=5)


def test_dry_run_says_what_it_would_write_and_replace() -> None:
    doc = compact_result(Compaction(_plan(), dry_run=True)).to_json()
    assert doc["view"] == "compact" and doc["dry_run"] is True
    assert (doc["manifests_replaced"], doc["manifests_created"], doc["manifests_kept"], doc["entries_processed"]) == (
        3, 2, 5, 10)
    assert doc["base_snapshot_id"] == 41 and doc["target_size_bytes"] == 8 << 20
    meta = "/wh/db/t/metadata"
    assert doc["would_write"] == [
        {"path": f"{meta}/{COMMIT_ID}-m0.avro", "group": "spec 0 data"},
        {"path": f"{meta}/{COMMIT_ID}-m1.avro", "group": "spec 0 data"},
        {"path": f"{meta}/snap-42-1-{COMMIT_ID}.avro"}, {"path": NEXT_METADATA}]
    assert doc["would_delete"] == []  # replaced manifests stay for older snapshots
    rewritten, skipped = doc["groups"]
    assert rewritten["action"] == "rewrite" and rewritten["bytes_in"] == 600 and rewritten["manifests_out"] == 2
    assert rewritten["estimated_bytes_out"] == 1000 + 1001 and rewritten["deleted_entries_dropped"] == 4
    assert [r["path"] for r in rewritten["replaced"]] == ["/m/a", "/m/b", "/m/c"]
    assert "written" not in rewritten and "bytes_out" not in rewritten
    assert skipped == {"spec_id": 0, "content": "deletes", "action": "skip", "reason": "one manifest",
                       "manifests_in": 1, "bytes_in": 50}
    assert not V4_ONLY & set(doc) and "snapshot_id" not in doc and "replanned" not in doc
    assert compact_result(Compaction(_plan(), dry_run=True)).title == "Would compact db.t: 3 manifests into 2"


def test_dry_run_without_work_would_write_nothing() -> None:
    idle = fake_plan([group([manifest("/m/a", 1)], rewrite=False)])
    res = compact_result(Compaction(idle, dry_run=True))
    assert res.title == "Nothing to compact in db.t" and res.to_json()["would_write"] == []


def test_a_replan_that_found_nothing_reports_no_commit() -> None:
    res = compact_result(Compaction(fake_plan([]), dry_run=False, replanned=True))
    doc = res.to_json()
    assert res.title == "Nothing to compact in db.t" and doc["replanned"] is True
    assert "snapshot_id" not in doc and "would_write" not in doc


def test_a_committed_run_reports_the_snapshot_and_what_was_written() -> None:
    plan = _plan()
    g = plan.groups[0]
    written = [FakeWritten(g, 6, "/new/m0.avro", 700), FakeWritten(g, 4, "/new/m1.avro", 300)]
    snap = Snapshot(42, 5, parent_snapshot_id=43, sequence_number=9, manifest_list="/l2.avro")
    outcome = CommitOutcome("/wh/db/t/metadata/00009-x.metadata.json", snap, attempts=2, manifests_kept=6,
                            reapplied_on=[43])
    res = compact_result(Compaction(plan, False, written, outcome, replanned=False))
    doc = res.to_json()
    assert res.title == "Compacted db.t: 3 manifests into 2"
    # kept counts the head committed on (another writer's append added one), not the plan's
    assert doc["manifests_kept"] == 6
    assert (doc["snapshot_id"], doc["sequence_number"], doc["commit_attempts"], doc["reapplied_on"]) == (42, 9, 2, [43])
    assert doc["metadata_location"] == outcome.metadata_location and doc["replanned"] is False
    rewritten = doc["groups"][0]
    assert rewritten["bytes_out"] == 1000 and [w["path"] for w in rewritten["written"]] == ["/new/m0.avro",
                                                                                           "/new/m1.avro"]
    assert "replaced" not in rewritten and "estimated_bytes_out" not in rewritten
    assert not V4_ONLY & set(doc) and "would_write" not in doc
