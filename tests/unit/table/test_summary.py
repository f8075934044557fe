"""Snapshot summaries against Java's SnapshotSummary.Builder and SnapshotProducer.updateTotal.

Expected keys and values are worked out by hand from the spec's Appendix F and the notes in
/work/shared/spec/iceberg-notes.md section 4 (metric keys only when > 0, DV sizes are the blob's
``content_size_in_bytes``, totals = parent + added - removed, written only when the parent's total
is a number and the result is >= 0, a branch's first snapshot counting from 0).
"""

from __future__ import annotations

import pytest

from icectl import __version__
from icectl.spec.manifest import DataFile, DataFileContent
from icectl.table.summary import SummaryBuilder, carried_totals

DATA, POS, EQ = DataFileContent.DATA, DataFileContent.POSITION_DELETES, DataFileContent.EQUALITY_DELETES
ENGINE = {"engine-name": "icectl", "engine-version": __version__}


def _f(content: DataFileContent, records: int, size: int, fmt: str = "PARQUET",
       content_size: int | None = None) -> DataFile:
    return DataFile(content, f"/d/{content.name}-{records}-{size}", fmt, (), records, size,
                    content_size_in_bytes=content_size)


def test_first_snapshot_counts_every_kind_of_file_and_starts_totals_from_zero() -> None:
    b = SummaryBuilder()
    b.added_file(_f(DATA, 10, 100), "p=1")
    b.added_file(_f(DATA, 5, 50), "p=2")
    b.added_file(_f(EQ, 3, 20), "p=1")
    b.added_file(_f(POS, 2, 30), "p=2")  # a position delete file
    b.added_file(_f(POS, 4, 999, fmt="PUFFIN", content_size=40), "p=2")  # a DV: its blob's 40 bytes count
    assert b.build("append", None) == {
        "operation": "append",
        "added-data-files": "2", "added-records": "15",
        "added-files-size": str(100 + 50 + 20 + 30 + 40),
        "added-delete-files": "3",
        "added-equality-delete-files": "1", "added-equality-deletes": "3",
        "added-position-delete-files": "1", "added-dvs": "1", "added-position-deletes": str(2 + 4),
        "changed-partition-count": "2",
        "total-records": "15", "total-files-size": "240", "total-data-files": "2", "total-delete-files": "3",
        "total-position-deletes": "6", "total-equality-deletes": "3",
        **ENGINE,
    }


def test_totals_carry_the_parent_forward_with_removals() -> None:
    parent = {"operation": "append", "total-records": "100", "total-files-size": "1000", "total-data-files": "4",
              "total-delete-files": "2", "total-position-deletes": "7", "total-equality-deletes": "0"}
    b = SummaryBuilder()
    b.removed_file(_f(DATA, 30, 300))
    b.removed_file(_f(POS, 4, 500, fmt="PUFFIN", content_size=60))
    b.added_file(_f(DATA, 12, 120))
    out = b.build("overwrite", parent, extra={"source": "test"})
    assert out == {
        "operation": "overwrite",
        "added-data-files": "1", "added-records": "12", "added-files-size": "120",
        "deleted-data-files": "1", "deleted-records": "30",
        "removed-files-size": str(300 + 60), "removed-delete-files": "1", "removed-dvs": "1",
        "removed-position-deletes": "4",
        "changed-partition-count": "1",  # the unpartitioned table's one partition, as Java counts it
        "total-records": str(100 - 30 + 12), "total-files-size": str(1000 - 360 + 120),
        "total-data-files": "4", "total-delete-files": "1", "total-position-deletes": "3",
        "total-equality-deletes": "0",
        "source": "test", **ENGINE,
    }


def test_a_commit_without_files_carries_totals_and_writes_no_metrics() -> None:
    parent = {"total-records": "9", "total-data-files": "1"}
    assert SummaryBuilder().build("replace", parent) == {
        "operation": "replace", "total-records": "9", "total-data-files": "1", **ENGINE}


def test_totals_java_cannot_carry_are_dropped() -> None:
    metrics = {"added-records": 3, "deleted-data-files": 2}
    parent = {"total-records": "x7", "total-data-files": "1", "total-files-size": "10"}
    # Not a number: dropped; missing from the parent: dropped; below zero after removals: dropped.
    assert carried_totals(parent, metrics) == {"total-files-size": "10"}
    assert carried_totals({}, metrics) == {}
    assert carried_totals(None, {"deleted-records": 1}) == {
        "total-files-size": "0", "total-data-files": "0", "total-delete-files": "0",
        "total-position-deletes": "0", "total-equality-deletes": "0"}


@pytest.mark.parametrize("raw", ["-1", "--5", "1-2"], ids=["negative", "double-minus", "inner-minus"])
def test_a_parent_total_that_is_no_count_is_dropped_not_carried_or_crashed_on(raw: str) -> None:
    # Java (SnapshotProducer.updateTotal): a negative parent total never takes additions and is not
    # written; a value Long.parseLong refuses is ignored. Either way the total is left out.
    assert "total-records" not in carried_totals({"total-records": raw}, {"added-records": 3})
