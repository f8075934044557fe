"""codec.arrow_types.distinct_rows: the grouping the bulk JSON path and compaction's clustering
build on, against the same grouping computed in Python (floats by their bits)."""

from __future__ import annotations

import math
import random
import struct

import pyarrow as pa
import pytest

from icectl.codec.arrow_types import distinct_rows


def _key(v: object) -> object:
    return ("f", struct.pack("<d", v)) if isinstance(v, float) else v  # -0.0 and 0.0 apart, NaN equal to NaN


@pytest.mark.parametrize("seed", range(20))
def test_groups_and_first_rows_are_the_python_grouping(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, 7, 300, 5000])
    pools = [[None, 1, 2, 3, -(2**40)], [None, 0.0, -0.0, math.nan, 1.5], [None, "a", "b", "é", ""]]
    chosen = [rng.choice(pools) for _ in range(rng.randrange(1, 4))]
    columns = [[rng.choice(pool) for _ in range(n)] for pool in chosen]
    types = [pa.array(c).type if pa.array(c).type != pa.null() else pa.int64() for c in columns]
    arrays = [pa.array(c, t) if rng.random() < 0.5 else pa.chunked_array([pa.array(c[: n // 2], t),
                                                                           pa.array(c[n // 2:], t)], t)
              for c, t in zip(columns, types, strict=True)]
    groups, firsts = distinct_rows(arrays, n)
    seen: dict[tuple[object, ...], int] = {}
    expected = [seen.setdefault(tuple(_key(c[i]) for c in columns), len(seen)) for i in range(n)]
    assert groups.to_pylist() == expected
    first_rows: dict[int, int] = {}
    for row, g in enumerate(expected):
        first_rows.setdefault(g, row)
    assert firsts.to_pylist() == [first_rows[g] for g in range(len(seen))]
    assert firsts.type == pa.int64()
