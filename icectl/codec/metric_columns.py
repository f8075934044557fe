"""Metrics maps of the Arrow form as numpy (row, key, value) triples, and a screen for the values
no writer can record (:func:`icectl.spec.manifest.impossible_values`) over whole columns. Used
where many entries are checked at once (``validate``'s entry screen, ``compact``'s plan): rows the
screen passes need no per-entry check; the rows it flags get the per-entry one, which decides.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

METRIC_MAPS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")


def map_pairs(column: pa.Array | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A metrics map's (row, key, value) triples; raises when a row repeats a key or a value is
    null (the reader's dict keeps the last of a repeated key; the per-entry rules decide those)."""
    import pyarrow as pa

    if column is None:
        return None
    offsets = column.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = np.diff(offsets)
    rows = np.repeat(np.arange(len(column), dtype=np.int64), lengths)
    # keys and items are the whole children, also of a slice: the slice's pairs lie between its offsets
    start, end = (int(offsets[0]), int(offsets[-1])) if len(offsets) else (0, 0)
    keys = column.keys.slice(start, end - start).to_numpy(zero_copy_only=False).astype(np.int64)
    items = column.items.slice(start, end - start)
    if items.null_count or len(keys) != len(rows):
        raise ValueError("a null value")
    if len(keys) > 1:
        same_row = rows[1:] == rows[:-1]
        if not np.all(keys[1:][same_row] > keys[:-1][same_row]):  # not ascending: look for repeats
            combined = pa.array(rows * 2**33 + (keys + 2**32))
            if len(combined.unique()) != len(combined):
                raise ValueError("a repeated map key")
    values = items if pa.types.is_binary(items.type) else items.to_numpy(zero_copy_only=False)
    return rows, keys, values


def lookup_pairs(rows: np.ndarray, keys: np.ndarray, want_rows: np.ndarray, want_keys: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Where each (want_row, want_key) lies among the (row, key) pairs (unique): found, index."""
    if len(rows) == 0:
        return np.zeros(len(want_rows), dtype=bool), np.zeros(len(want_rows), dtype=np.int64)
    combined = rows * 2**33 + (keys + 2**32)
    order = np.argsort(combined, kind="stable")
    sorted_keys = combined[order]
    wanted = want_rows * 2**33 + (want_keys + 2**32)
    at = np.minimum(np.searchsorted(sorted_keys, wanted), len(sorted_keys) - 1)
    found = sorted_keys[at] == wanted
    return found, order[at]




def impossible_rows(files: Mapping[str, pa.Array], record_count: np.ndarray, single_valued: Collection[int]
                    ) -> np.ndarray:
    """Rows where :func:`~icectl.spec.manifest.impossible_values` could find something (a superset).
    ``files`` holds the data_file columns; raises ``ValueError`` where a map cannot be screened (a
    repeated key, a null value): the caller then checks every row."""
    file_size = files["file_size_in_bytes"].to_numpy(zero_copy_only=False)
    bad = (record_count < 0) | (file_size < 0)
    offset, size = files.get("content_offset"), files.get("content_size_in_bytes")
    if offset is not None and size is not None:  # a deletion vector's blob: within the file
        both = offset.is_valid().to_numpy(zero_copy_only=False) & size.is_valid().to_numpy(zero_copy_only=False)
        at = offset.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        length = size.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        # sums beyond int64 never come from a writer: flagged, the per-entry check decides
        huge = (np.abs(at) > 2**61) | (np.abs(length) > 2**61)
        bad |= both & (huge | (at < 0) | (length < 0) | ((file_size >= 0) & (at + np.where(huge, 0, length)
                                                                             > file_size)))
    counts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray] | None] = {}
    single = np.fromiter(single_valued, dtype=np.int64, count=len(single_valued))
    for name in METRIC_MAPS:
        pairs = map_pairs(files.get(name))
        counts[name] = pairs
        if pairs is None:
            continue
        rows, keys, values = pairs
        bad[rows[values < 0]] = True
        if name != "column_sizes":
            one = np.isin(keys, single)
            bad[rows[one & (values > record_count[rows])]] = True
    given = counts["value_counts"]
    for name in ("null_value_counts", "nan_value_counts"):
        pairs = counts[name]
        if pairs is None or given is None:
            continue
        found, at = lookup_pairs(given[0], given[1], pairs[0], pairs[1])
        over = found & (pairs[2] > given[2][at]) & (given[2][at] >= 0)
        bad[pairs[0][over]] = True
    return bad


__all__ = ["METRIC_MAPS", "impossible_rows", "lookup_pairs", "map_pairs"]
