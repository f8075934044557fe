"""icectl/spec/sorting.py: sort order JSON (Appendix C), as Java reads and writes it."""

from __future__ import annotations

import pytest

from icectl.errors import CorruptInputError
from icectl.spec.sorting import UNSORTED, SortField, SortOrder
from icectl.spec.transforms import IDENTITY, BucketTransform


def test_sort_order_json_round_trips_in_the_spec_shape() -> None:
    # Appendix C's example and a v3 multi-argument field
    doc = {"order-id": 1, "fields": [
        {"transform": "identity", "source-id": 2, "direction": "asc", "null-order": "nulls-first"},
        {"transform": "bucket[4]", "source-id": 3, "direction": "desc", "null-order": "nulls-last"},
        {"transform": "bucket[8]", "source-ids": [1, 2], "direction": "asc", "null-order": "nulls-last"}]}
    order = SortOrder.from_json(doc)
    assert order.fields[0] == SortField((2,), IDENTITY, "asc", "nulls-first")
    assert order.fields[1].transform == BucketTransform(4) and order.fields[2].source_ids == (1, 2)
    assert order.to_json() == doc and not order.is_unsorted


def test_direction_and_null_order_are_read_in_any_case_and_written_lower() -> None:
    order = SortOrder.from_json({"order-id": 1, "fields": [
        {"transform": "identity", "source-id": 2, "direction": "DESC", "null-order": "NULLS-LAST"}]})
    assert order.to_json()["fields"][0] == {"transform": "identity", "source-id": 2, "direction": "desc",
                                           "null-order": "nulls-last"}


def test_unsorted_is_order_zero_without_fields() -> None:
    assert UNSORTED.to_json() == {"order-id": 0, "fields": []} and UNSORTED.is_unsorted
    assert SortOrder.from_json({"order-id": 0, "fields": []}) == UNSORTED


@pytest.mark.parametrize(("doc", "match"), [
    ({"fields": []}, "order-id"),
    ({"order-id": True, "fields": []}, "order-id"),
    ({"order-id": 1}, "'fields'"),
    ({"order-id": 1, "fields": [{"source-id": 2, "direction": "asc", "null-order": "nulls-first"}]}, "transform"),
    ({"order-id": 1, "fields": [{"transform": "identity", "source-id": 2, "direction": "up",
                                 "null-order": "nulls-first"}]}, "'direction' must be one of asc, desc"),
    ({"order-id": 1, "fields": [{"transform": "identity", "source-id": 2, "direction": "asc"}]}, "null-order"),
])
def test_malformed_sort_order_is_corrupt_input(doc: dict, match: str) -> None:
    with pytest.raises(CorruptInputError, match=match):
        SortOrder.from_json(doc)
