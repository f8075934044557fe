"""The order a sort or z-order rewrite writes a group's rows in (Spark's ``SparkSortFileRewriteRunner``
and ``SparkZOrderFileRewriteRunner``).

``sort``: by a sort order (``--sort-order`` or the table's), each field through its transform, in
its direction, with its null order (Spark's defaults: ascending nulls first, descending nulls
last). ``zorder(c1, c2, ...)``: by the interleaved bits of the columns' ordered bytes, as Iceberg's
``ZOrderByteUtils`` builds them: 8 bytes per column (integers, dates and timestamps with the sign
bit flipped, floating point as IEEE bits made orderable, strings and binary as their first 8 bytes
zero-padded, null as zeros), bits taken most significant first, one column after the other.

Output files are cut from the sorted rows in order, so each holds a contiguous range. The group's
rows are sorted in memory: :func:`check_memory` refuses a group that would not fit.
"""

from __future__ import annotations

import os
import re

import pyarrow as pa
import pyarrow.compute as pc

from icectl.codec.arrow_types import python_values
from icectl.errors import RefusedError, UsageError
from icectl.spec.schema import Schema
from icectl.spec.sorting import SortOrder

ZORDER = re.compile(r"^\s*zorder\s*\((.*)\)\s*$", re.IGNORECASE)
_INT64_MIN = -(2**63)
MEMORY_PER_INPUT_BYTE = 6  # Arrow's decoded size of a compressed Parquet byte, generously


def zorder_columns(text: str | None) -> list[str] | None:
    """The columns of ``zorder(a, b)`` (None: not a z-order)."""
    if text is None:
        return None
    m = ZORDER.match(text)
    if m is None:
        return None
    names = [c.strip().strip("`") for c in m.group(1).split(",") if c.strip()]
    if not names:
        raise UsageError("zorder() needs at least one column", hint="e.g. --sort-order 'zorder(lat, lon)'")
    return names


def check_memory(group_bytes: int, concurrent: int) -> None:
    """Refuse a sort whose groups would not fit in memory together (a sort holds a whole group)."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return
    need = group_bytes * MEMORY_PER_INPUT_BYTE * concurrent
    if need > physical // 2:
        raise RefusedError(f"sorting groups of {group_bytes:,} input bytes ({concurrent} at once) needs about "
                           f"{need:,} bytes of memory, more than half of this machine's {physical:,}",
                           hint="lower --max-file-group-size-bytes or --max-concurrent-file-group-rewrites")


def _column(table: pa.Table, schema: Schema, source_id: int) -> pa.ChunkedArray:
    name = schema.column_name(source_id)
    if name is None or "." in name or name not in table.column_names:
        raise UsageError(f"sort field {source_id} is not a top-level column of the table",
                         hint="sort by top-level columns")
    return table.column(name)


def sort_indices(table: pa.Table, schema: Schema, order: SortOrder) -> pa.Array:
    """The row order of ``order``."""
    keys: dict[str, pa.ChunkedArray | pa.Array] = {}
    sort_keys: list[tuple[str, str]] = []
    for i, f in enumerate(order.fields):
        column = _column(table, schema, f.source_id)
        if str(f.transform) != "identity":
            t = schema.find_type(f.source_id)
            assert t is not None
            values = [None if v is None else f.transform.apply(v, t) for v in python_values(t, column)]
            column = pa.array(values)
        # Nulls placed per field: a null flag ahead of the value (True sorts after False ascending).
        keys[f"n{i}"] = pc.is_null(column)
        sort_keys.append((f"n{i}", "descending" if f.null_order == "nulls-first" else "ascending"))
        keys[f"v{i}"] = column
        sort_keys.append((f"v{i}", "ascending" if f.direction == "asc" else "descending"))
    return pc.sort_indices(pa.table(keys), sort_keys=sort_keys)


def _ordered(column: pa.ChunkedArray) -> pa.Array:
    """A column's ZOrderByteUtils bytes as unsigned 64-bit integers (null: 0)."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    t = column.type
    flip = pa.scalar(_INT64_MIN, pa.int64())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        out = []
        for v in column.to_pylist():
            raw = v.encode() if isinstance(v, str) else (v or b"")
            out.append(int.from_bytes(raw[:8].ljust(8, b"\0"), "big") if v is not None else 0)
        return pa.array(out, pa.uint64())
    if pa.types.is_boolean(t):
        return pc.fill_null(pc.if_else(column, pa.scalar(0x81 << 56, pa.uint64()), pa.scalar(0, pa.uint64())), 0)
    if pa.types.is_floating(t):
        bits = pc.cast(column, pa.float64()).view(pa.int64())
        mask = pc.bit_wise_or(pc.shift_right(bits, 63), flip)  # arithmetic: all ones when negative
        ordered = pc.bit_wise_xor(bits, mask)
    elif pa.types.is_integer(t) or pa.types.is_temporal(t):
        if pa.types.is_date(t):
            column = pc.cast(column, pa.int32())
        elif pa.types.is_timestamp(t) or pa.types.is_time(t):
            column = column.view(pa.int64()) if t.bit_width == 64 else pc.cast(column, pa.int32())
        ordered = pc.bit_wise_xor(pc.cast(column, pa.int64()), flip)
    else:
        raise UsageError(f"zorder cannot order a column of Arrow type {t}",
                         hint="z-order by integer, floating point, date, time, timestamp, string or binary columns")
    return pc.fill_null(ordered.view(pa.uint64()), pa.scalar(0, pa.uint64()))


def zorder_indices(table: pa.Table, schema: Schema, names: list[str]) -> pa.Array:
    """The row order of the z-values of columns ``names``."""
    by_name = {f.name.lower(): f.name for f in schema.fields}
    columns = []
    for n in names:
        real = by_name.get(n.lower())
        if real is None or real not in table.column_names:
            raise UsageError(f"zorder({', '.join(names)}): the table has no column {n}")
        columns.append(_ordered(table.column(real)))
    k = len(columns)
    words: dict[str, pa.Array] = {}
    one = pa.scalar(1, pa.uint64())
    for w in range(k):
        word = pa.array([0] * len(table), pa.uint64())
        for j in range(64):
            b = 64 * w + j
            source, bit = columns[b % k], 63 - b // k
            taken = pc.bit_wise_and(pc.shift_right(source, pa.scalar(bit, pa.uint64())), one)
            word = pc.bit_wise_or(word, pc.shift_left(taken, pa.scalar(63 - j, pa.uint64())))
        words[f"w{w}"] = word
    return pc.sort_indices(pa.table(words), sort_keys=[(name, "ascending") for name in words])
