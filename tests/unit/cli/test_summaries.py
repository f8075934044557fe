"""icectl.cli.output.summaries: the one line per table of --all runs in the cases a small table rarely shows
(a failed table, refused or failed deletions, external files kept, v4 compaction), and the expire
report of a committed run."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from icectl.cli.output.summaries import compact_line, expire_line, expire_report, orphan_line, when
from icectl.ops.compact.result import CompactResult
from icectl.ops.expire.result import ExpireCutoff, ExpireResult, RefPolicy
from icectl.ops.orphans.result import RemoveOrphanFilesResult
from icectl.results import UNSET, Committed, TableFailure

DAY = 86_400_000
NOW = 1_795_600_000_000  # 2026-11-25 09:46:40 UTC


def _cutoff() -> ExpireCutoff:
    return ExpireCutoff(expire_older_than_ms=NOW - 5 * DAY, expire_older_than="", max_snapshot_age_ms=5 * DAY,
                        source="default", now_ms=NOW, min_snapshots_to_keep=3,
                        min_snapshots_to_keep_source="history.expire.min-snapshots-to-keep",
                        max_ref_age_ms=(1 << 63) - 1, max_ref_age_source="default")


def _expire(**kw: Any) -> ExpireResult:
    base: dict[str, Any] = {"table": "db.t", "dry_run": False, "expired_snapshots": [11, 12, 13],
                            "removed_refs": [], "retained_snapshot_count": 4, "leftover_snapshots": [],
                            "skipped_metadata": [],
                            "commit": Committed("/w/db/t/metadata/v9.metadata.json", 1),
                            "deleted": {"data_files": 2, "manifest_lists": 3},
                            "cutoff": _cutoff()}
    return ExpireResult(**{**base, **kw})


def test_when_is_utc_to_the_minute() -> None:
    assert when(NOW) == "2026-11-25 09:46 UTC"


def test_expire_lines() -> None:
    assert expire_line(_expire()) == ("db.t  expired 3 snapshots, deleted 5 files "
                                      "(cutoff 2026-11-20 09:46 UTC, retain last 3)")
    line = expire_line(_expire(removed_refs=["old"], kept_external_files=["/x/a.parquet"],
                               failures=["/w/a: denied"]))
    assert line.endswith("; removed refs old; kept 1 external file; 1 deletion failed")
    refused = expire_line(_expire(deleted={}, deletes_refused="expiry would delete 9 files, more than --max-deletes 1"))
    assert refused.startswith("db.t  expired 3 snapshots, deleted 0 files") and "--max-deletes 1" in refused
    nothing = expire_line(_expire(expired_snapshots=[], deleted={}, commit=Committed()))
    assert nothing == "db.t  nothing to expire (4 snapshots kept; cutoff 2026-11-20 09:46 UTC, retain last 3)"
    failed = TableFailure(view="expire_snapshots", title="db.x: failed", table="db.x", error="table metadata is "
                          "not valid (gzip) JSON", exit_code=4)
    assert expire_line(failed) == "db.x: failed: table metadata is not valid (gzip) JSON"
    assert compact_line(failed).startswith("db.x: failed: ") and orphan_line(failed).startswith("db.x: failed: ")


def test_expire_report_of_a_committed_run() -> None:
    res = _expire(removed_refs=["old"], ref_policies=[
        RefPolicy(name="main", type="branch", snapshot_id=1, snapshot_age_ms=DAY, max_ref_age_ms=None,
                  max_ref_age_source="main", removed=False, expire_older_than_ms=NOW - 5 * DAY,
                  max_snapshot_age_ms=5 * DAY, max_snapshot_age_source="default", min_snapshots_to_keep=3,
                  min_snapshots_to_keep_source="history.expire.min-snapshots-to-keep"),
        RefPolicy(name="old", type="tag", snapshot_id=2, snapshot_age_ms=40 * DAY, max_ref_age_ms=30 * DAY,
                  max_ref_age_source="ref", removed=True)])
    res.title = "Expired 3 snapshots of db.t"
    buf = io.StringIO()
    Console(file=buf, width=120, markup=False).print(expire_report(res))
    text = buf.getvalue()
    for words in ("Expired 3 snapshots of db.t", "2026-11-20 09:46 UTC (5d before now, from the default)",
                  "at least the last 3 snapshots of each branch (from history.expire.min-snapshots-to-keep)",
                  "tag, removed: snapshot 2 is 40d old, max-ref-age 30d (the ref's own)",
                  "5 files: 2 data files, 3 manifest lists", "/w/db/t/metadata/v9.metadata.json"):
        assert words in text, (words, text)
    assert len(text.splitlines()) <= 10


def test_compact_and_orphan_lines() -> None:
    c = CompactResult(table="db.t", branch="main", dry_run=False, base_snapshot_id=1, target_size_bytes=8 << 20,
                      manifests_replaced=12, manifests_created=2, manifests_kept=3, entries_processed=1234, groups=[])
    assert compact_line(c) == "db.t  compacted 12 manifests into 2 (3 kept, 1,234 entries)"
    c.manifests_replaced = c.manifests_created = 0
    assert compact_line(c) == "db.t  nothing to compact on main (3 manifests kept)"
    c.root_files_flushed, c.dry_run = 4, True
    assert compact_line(c).startswith("db.t  would compact 0 manifests into 0") and "4 root files flushed" in \
        compact_line(c)
    o = RemoveOrphanFilesResult(table="db.t", dry_run=False, location="/w/db/t", older_than_ms=NOW,
                                prefix_mismatch_mode="error", listed_file_count=120, too_young_count=5,
                                valid_file_count=112)
    assert orphan_line(o) == "db.t  no orphan files (120 files listed, 5 not older than 2026-11-25 09:46 UTC)"
    o.orphan_file_locations, o.deleted_count = ["/w/db/t/data/a", "/w/db/t/data/b", "/w/db/t/data/c"], 3
    assert orphan_line(o).startswith("db.t  deleted 3 orphan files of 3 (120 files listed")


def test_expire_line_without_a_policy() -> None:
    assert expire_line(_expire(cutoff=UNSET)) == "db.t  expired 3 snapshots, deleted 5 files"
    assert expire_line(_expire(cutoff=UNSET, expired_snapshots=[], deleted={})) == "db.t  nothing to expire (4 " \
        "snapshots kept)"


def test_expire_report_shows_a_screenful_of_refs_removed_ones_first() -> None:
    refs = [RefPolicy(name=f"b{i}", type="branch", snapshot_id=i, snapshot_age_ms=DAY, max_ref_age_ms=30 * DAY,
                      max_ref_age_source="default", removed=False) for i in range(20)]
    refs.append(RefPolicy(name="gone", type="tag", snapshot_id=99, snapshot_age_ms=40 * DAY, max_ref_age_ms=DAY,
                          max_ref_age_source="ref", removed=True))
    buf = io.StringIO()
    Console(file=buf, width=120, markup=False).print(expire_report(_expire(ref_policies=refs)))
    rows = [ln for ln in buf.getvalue().splitlines() if ln.startswith("ref")]
    assert rows[0].startswith("ref gone") and len(rows) == 9 and "13 more" in rows[-1]
