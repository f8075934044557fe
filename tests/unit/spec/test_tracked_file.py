"""The v4 tracked_file model: path resolution (spec "Path Resolution")."""

from __future__ import annotations

from icectl.spec.tracked_file import (
    ContentType,
    DeletionVector,
    EntryStatus,
    TrackedFile,
    Tracking,
    resolve_location,
    resolved,
)


def test_relative_locations_resolve_against_the_table_location_without_normalising() -> None:
    assert resolve_location("data/a.parquet", "s3://b/t") == "s3://b/t/data/a.parquet"
    assert resolve_location("./data/../a.parquet", "/t") == "/t/./data/../a.parquet"  # no normalisation
    assert resolve_location("data/a.parquet", "s3://b/t/") == "s3://b/t//data/a.parquet"  # the spec's "//"
    for absolute in ("/t/data/a.parquet", "s3://b/t/a.parquet", "file:/t/a.parquet", "file:///t/a.parquet"):
        assert resolve_location(absolute, "s3://other") == absolute


def test_a_row_and_its_dv_are_resolved() -> None:
    e = TrackedFile(Tracking(EntryStatus.ADDED), ContentType.DATA, "data/a.parquet", "parquet", 3, 10,
                    deletion_vector=DeletionVector("data/dv.puffin", 4, 40, 1))
    r = resolved(e, "/warehouse/t")
    assert r.location == "/warehouse/t/data/a.parquet"
    assert r.deletion_vector is not None and r.deletion_vector.location == "/warehouse/t/data/dv.puffin"
    assert resolved(r, "/elsewhere") == r
