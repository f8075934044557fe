"""The column screen of impossible entry values flags exactly the rows the per-entry rule
(icectl.spec.manifest.impossible_values) finds something in, also over a slice of the columns."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa

from icectl.codec.metric_columns import METRIC_MAPS, impossible_rows, map_pairs
from icectl.spec.manifest import impossible_values

from .test_manifest_writer import data_file

SINGLE = frozenset({1, 2})


def _row(rng: random.Random) -> dict[str, Any]:
    def counts() -> dict[int, int] | None:
        if rng.random() < 0.2:
            return None
        return {k: rng.choice([-1, 0, 3, 9, 15, 40]) for k in rng.sample([1, 2, 3, 4], rng.randint(0, 4))}

    row: dict[str, Any] = {name: counts() for name in METRIC_MAPS}
    row["record_count"] = rng.choice([-1, 0, 10, 20])
    row["file_size_in_bytes"] = rng.choice([-5, 0, 100, 1000])
    if rng.random() < 0.4:
        row["content_offset"] = rng.choice([-1, 0, 4, 90, 2**62])
        row["content_size_in_bytes"] = rng.choice([-1, 0, 10, 2**62])
    else:
        row["content_offset"] = row["content_size_in_bytes"] = None
    return row


def test_the_screen_flags_what_the_entry_rule_finds() -> None:
    rng = random.Random(7)
    rows = [_row(rng) for _ in range(2000)]
    want = np.asarray([bool(impossible_values(data_file(0, **r), SINGLE)) for r in rows])
    assert 0.2 < want.mean() < 0.95  # both kinds of rows are there
    maps = pa.map_(pa.int32(), pa.int64())
    files = {name: pa.array([None if r[name] is None else list(r[name].items()) for r in rows], maps)
             for name in METRIC_MAPS}
    for name in ("record_count", "file_size_in_bytes", "content_offset", "content_size_in_bytes"):
        files[name] = pa.array([r[name] for r in rows], pa.int64())
    record_count = files["record_count"].to_numpy(zero_copy_only=False)
    assert (impossible_rows(files, record_count, SINGLE) == want).all()
    # a slice (as a joined read's manifest is): the same rows
    sliced = {name: a.slice(700, 600) for name, a in files.items()}
    got = impossible_rows(sliced, record_count[700:1300], SINGLE)
    assert (got == want[700:1300]).all()


def test_map_pairs_of_a_slice_are_the_slices_own() -> None:
    column = pa.array([[(1, 2), (3, 4)], [(5, 6)], None, [(7, 8), (9, -1)]], pa.map_(pa.int32(), pa.int64()))
    rows, keys, values = map_pairs(column.slice(1, 3))  # type: ignore[misc]
    assert rows.tolist() == [0, 2, 2] and keys.tolist() == [5, 7, 9] and list(values) == [6, 8, -1]
