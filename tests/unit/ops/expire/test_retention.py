"""ops/expire_retention: the retention outcome as REST updates, in the order Java's RemoveSnapshots builds them."""

from __future__ import annotations

from icectl.ops.create.metadata import new_table_metadata
from icectl.ops.expire.retention import ExpirePolicy, apply_retention, expiry_change
from icectl.spec.requirements import AssertRefSnapshotId
from icectl.spec.schema import NestedField, Schema, parse_primitive
from icectl.spec.snapshots import Snapshot, SnapshotLogEntry, SnapshotRef
from icectl.spec.updates import RemoveSnapshotRef, RemoveSnapshots, apply_updates
from icectl.storage import FileIO

SCHEMA = Schema((NestedField(1, "id", parse_primitive("long"), True),))
DAY = 86_400_000


def test_old_snapshots_and_an_aged_tag_become_remove_updates() -> None:
    md = new_table_metadata(schema=SCHEMA, location="/wh/t", partition_spec=None, sort_order=None, properties={},
                            format_version=2, now_ms=1000)
    snaps = tuple(Snapshot(i, i * DAY, i - 1 or None, i, f"/m{i}") for i in (1, 2, 3))
    md = md.replace(snapshots=snaps, current_snapshot_id=3, last_sequence_number=3,
                    snapshot_log=tuple(SnapshotLogEntry(s.timestamp_ms, s.snapshot_id) for s in snaps),
                    refs={"main": SnapshotRef(3), "old": SnapshotRef(1, "tag", max_ref_age_ms=DAY)})
    r = apply_retention(md, ExpirePolicy(older_than_ms=3 * DAY), now_ms=4 * DAY)
    assert r.expired == [1, 2] and r.removed_refs == ["old"]
    assert r.updates == (RemoveSnapshotRef("old"), RemoveSnapshots((1, 2)))
    assert r.metadata == apply_updates(md, r.updates)
    assert r.metadata.snapshot_log == (SnapshotLogEntry(3 * DAY, 3),) and set(r.metadata.refs) == {"main"}
    change, after = expiry_change(md, r, clean_metadata=False, io=FileIO())
    assert change.requirements == (AssertRefSnapshotId("main", 3), AssertRefSnapshotId("old", 1))
    assert change.updates == r.updates and after == r.metadata
    nothing = apply_retention(md, ExpirePolicy(older_than_ms=0), now_ms=1)
    assert nothing.updates == () and nothing.metadata is md


def test_the_cutoff_and_each_refs_policy_name_their_source() -> None:
    props = {"history.expire.max-snapshot-age-ms": str(2 * DAY), "history.expire.max-ref-age-ms": str(10 * DAY)}
    md = new_table_metadata(schema=SCHEMA, location="/wh/t", partition_spec=None, sort_order=None, properties=props,
                            format_version=2, now_ms=1000)
    snaps = tuple(Snapshot(i, i * DAY, i - 1 or None, i, f"/m{i}") for i in (1, 2, 3, 4))
    md = md.replace(snapshots=snaps, current_snapshot_id=4, last_sequence_number=4,
                    snapshot_log=tuple(SnapshotLogEntry(s.timestamp_ms, s.snapshot_id) for s in snaps),
                    refs={"main": SnapshotRef(4), "b": SnapshotRef(3, min_snapshots_to_keep=3),
                          "t": SnapshotRef(1, "tag")})
    r = apply_retention(md, ExpirePolicy(), now_ms=13 * DAY)
    c = r.cutoff
    assert c is not None
    assert (c.expire_older_than_ms, c.max_snapshot_age_ms, c.source) == (11 * DAY, 2 * DAY,
                                                                        "history.expire.max-snapshot-age-ms")
    assert c.expire_older_than == "1970-01-12T00:00:00.000Z"
    assert (c.min_snapshots_to_keep, c.min_snapshots_to_keep_source) == (1, "default")
    assert (c.max_ref_age_ms, c.max_ref_age_source) == (10 * DAY, "history.expire.max-ref-age-ms")
    p = {x.name: x for x in r.ref_policies}
    assert [x.name for x in r.ref_policies] == ["main", "b", "t"]
    # The tag's snapshot is 12 days old, past the table's 10: removed; the branch keeps 3 by its own setting.
    assert (p["t"].removed, p["t"].snapshot_age_ms, p["t"].max_ref_age_source) == (True, 12 * DAY,
                                                                                   "history.expire.max-ref-age-ms")
    assert r.removed_refs == ["t"]
    assert (p["b"].min_snapshots_to_keep, p["b"].min_snapshots_to_keep_source) == (3, "ref")
    assert (p["b"].removed, p["b"].max_ref_age_ms) == (False, 10 * DAY)
    assert (p["main"].max_ref_age_ms, p["main"].max_ref_age_source, p["main"].min_snapshots_to_keep) == (None, "main",
                                                                                                         1)
    assert r.expired == [] and r.retained == {1, 2, 3, 4}  # b keeps 1..3, main 4
    over = apply_retention(md, ExpirePolicy(older_than_ms=5 * DAY, retain_last=2), now_ms=13 * DAY)
    assert over.cutoff is not None and (over.cutoff.source, over.cutoff.max_snapshot_age_ms) == ("--older-than",
                                                                                               8 * DAY)
    main = next(x for x in over.ref_policies if x.name == "main")
    assert (main.min_snapshots_to_keep, main.min_snapshots_to_keep_source) == (2, "--retain-last")
