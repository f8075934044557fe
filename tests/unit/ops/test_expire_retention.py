"""ops/expire_retention: the retention outcome as REST updates, in the order Java's RemoveSnapshots builds them."""

from __future__ import annotations

from icectl.ops.create.metadata import new_table_metadata
from icectl.ops.expire_retention import ExpirePolicy, apply_retention, expiry_change
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
