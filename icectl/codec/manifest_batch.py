"""The Arrow tables of many manifests from one native read.

:func:`icectl.codec.manifest_arrow.manifest_table` decodes one manifest: the native decoder's fixed
cost (a temporary file, a query, the length check: ~5 ms) is paid per file, which at 20,000
manifests of 100 entries is most of a cold ``inspect files``. Here manifests with the same header
and partition spec are joined into one container (:func:`icectl.codec.avro_native.read_avro_joined`,
each file's blocks checked as in a read of its own), their columns built once with kernels, the
manifest-dependent ones (inherited snapshot ids and sequence numbers, v3 first row ids) from each
row's manifest, and each manifest's table is a slice: the same table :func:`manifest_table` makes
of it alone (the tests compare them). Any failure raises; the caller then reads the manifests one
by one, and the reader's errors are the ones reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from icectl.codec.arrow_types import int64_array
from icectl.codec.avro_native import read_avro_joined
from icectl.codec.manifest_arrow import (
    DECODE_KEY,
    TABLE_COLUMNS,
    NotArrowRepresentable,
    decode_key,
    native_columns,
    native_layout,
    partition_column,
    table_arrays,
)
from icectl.spec.manifest import ManifestContent, ManifestFile
from icectl.spec.schema import StructType

if TYPE_CHECKING:
    import pyarrow as pa


def manifest_tables(datas: Sequence[bytes], manifests: Sequence[ManifestFile], partition_type: StructType,
                    format_version: int) -> list[pa.Table]:
    """:func:`~icectl.codec.manifest_arrow.manifest_table` of each manifest (the same writer schema
    and codec, the same partition spec), from one native read."""
    import pyarrow as pa

    layout = native_layout(datas[0], partition_type, format_version)
    raw, rows = read_avro_joined(list(datas), layout.schema)
    n = raw.num_rows
    entries, files, part = native_columns(raw, layout)
    counts = np.asarray(rows, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    k = int64_array(np.repeat(np.arange(len(manifests), dtype=np.int64), counts))
    status, content = entries["status"], files["content"]
    arrays = table_arrays(entries, files, partition_column(part, layout, partition_type, n),
                          inherited_per_row(entries, status, manifests, k, n),
                          _first_row_ids(files, status, content, manifests, format_version, k, starts, n), n)
    return [pa.Table.from_arrays([a.slice(int(starts[i]), int(counts[i])) for a in arrays], names=TABLE_COLUMNS,
                                 metadata={DECODE_KEY: decode_key(m, partition_type, format_version)})
            for i, m in enumerate(manifests)]


def inherited_per_row(entries: dict[str, pa.Array], status: pa.Array, manifests: Sequence[ManifestFile], k: pa.Array,
               n: int) -> dict[str, pa.Array]:
    """:func:`icectl.codec.manifest_columns.inherited_columns` with each row's own manifest."""
    import pyarrow as pa
    import pyarrow.compute as pc

    m_snap = pa.array([m.added_snapshot_id for m in manifests], pa.int64()).take(k)
    m_seq = pa.array([m.sequence_number for m in manifests], pa.int64()).take(k)
    snap = entries.get("snapshot_id")
    snap = pa.nulls(n, pa.int64()) if snap is None else snap.cast(pa.int64())
    out = {"snapshot_id": pc.coalesce(snap, m_snap)}
    # ADDED entries inherit; under sequence number 0 every entry does
    inherit = pc.or_(pc.equal(status, pa.scalar(1, pa.int8())),
                     pc.fill_null(pc.equal(m_seq, pa.scalar(0, pa.int64())), False))
    for name in ("sequence_number", "file_sequence_number"):
        column = entries.get(name)
        column = pa.nulls(n, pa.int64()) if column is None else column.cast(pa.int64())
        fill = pc.and_(pc.and_(inherit, pc.is_null(column)), pc.is_valid(m_seq))
        out[name] = pc.if_else(fill, m_seq, column)
    return out


def _first_row_ids(files: dict[str, pa.Array], status: pa.Array, content: pa.Array,
                   manifests: Sequence[ManifestFile], format_version: int, k: pa.Array, starts: np.ndarray,
                   n: int) -> pa.Array:
    """:func:`icectl.codec.manifest_columns.first_row_ids` with each row's own manifest: its data
    entries without an id take the next ones from the manifest's first_row_id, in file order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    given = files.get("first_row_id")
    given = pa.nulls(n, pa.int64()) if given is None else given.cast(pa.int64())
    firsts = [m.first_row_id if format_version >= 3 and m.content == ManifestContent.DATA else None
              for m in manifests]
    if all(f is None for f in firsts) or n == 0:
        return given
    start = pa.array(firsts, pa.int64()).take(k)
    assign = pc.and_(pc.and_(pc.and_(pc.is_null(given), pc.equal(content, pa.scalar(0, pa.int8()))),
                             pc.not_equal(status, pa.scalar(2, pa.int8()))), pc.is_valid(start))
    record_count = files["record_count"]
    if record_count.null_count:
        raise NotArrowRepresentable("a null record_count")
    taken = pc.if_else(assign, record_count.cast(pa.int64()), pa.scalar(0, pa.int64())).to_numpy(zero_copy_only=False)
    with np.errstate(over="ignore"):  # wraps as the one-manifest kernels do
        running = np.concatenate([[0], np.cumsum(taken, dtype=np.int64)])
        before = running[:-1] - running[starts[:-1]][k.to_numpy(zero_copy_only=False)]
    ids = pc.add(pa.array(before, pa.int64()), start)
    return pc.if_else(assign, ids, given)


__all__ = ["inherited_per_row", "manifest_tables"]
