"""Manifest entry columns the spec derives from the manifest, computed with Arrow kernels over a
whole manifest at once: inherited snapshot ids and sequence numbers (spec "Sequence Number
Inheritance") and v3 first row ids (spec "Row Lineage"). The per-entry forms are
:func:`icectl.spec.manifest.inherit_from_manifest` and the reader's running row id; the tests hold
the two equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icectl.spec.manifest import ManifestContent, ManifestFile

if TYPE_CHECKING:
    import pyarrow as pa


def inherited_columns(entries: dict[str, pa.Array], status: pa.Array, manifest: ManifestFile,
               n: int) -> dict[str, pa.Array]:
    """Snapshot id and sequence numbers with the manifest's values inherited, as the reader does:
    the snapshot id when null; sequence numbers when null for ADDED entries (any entry under
    sequence number 0)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    m_snap, m_seq = manifest.added_snapshot_id, manifest.sequence_number
    out: dict[str, pa.Array] = {}
    snap = entries.get("snapshot_id")
    snap = pa.nulls(n, pa.int64()) if snap is None else snap.cast(pa.int64())
    out["snapshot_id"] = snap if m_snap is None else pc.fill_null(snap, pa.scalar(m_snap, pa.int64()))
    inherit = pc.equal(status, pa.scalar(1, pa.int8())) if m_seq != 0 else pa.array([True] * n, pa.bool_())
    for name in ("sequence_number", "file_sequence_number"):
        column = entries.get(name)
        column = pa.nulls(n, pa.int64()) if column is None else column.cast(pa.int64())
        if m_seq is not None:
            fill = pc.and_(inherit, pc.is_null(column))
            column = pc.if_else(fill, pa.scalar(m_seq, pa.int64()), column)
        out[name] = column
    return out


def first_row_ids(files: dict[str, pa.Array], status: pa.Array, content: pa.Array, manifest: ManifestFile,
                   format_version: int, n: int) -> pa.Array:
    """v3 row lineage: data entries that are not DELETED and have no first_row_id get the next ids
    from the manifest's first_row_id, in file order, each taking its record count."""
    import pyarrow as pa
    import pyarrow.compute as pc

    given = files.get("first_row_id")
    given = pa.nulls(n, pa.int64()) if given is None else given.cast(pa.int64())
    start = manifest.first_row_id if format_version >= 3 and manifest.content == ManifestContent.DATA else None
    if start is None or n == 0:
        return given
    assign = pc.and_(pc.and_(pc.is_null(given), pc.equal(content, pa.scalar(0, pa.int8()))),
                     pc.not_equal(status, pa.scalar(2, pa.int8())))
    counts = pc.if_else(assign, files["record_count"].cast(pa.int64()), pa.scalar(0, pa.int64()))
    before = pc.subtract(pc.cumulative_sum(counts), counts)  # ids taken by the entries before
    return pc.if_else(assign, pc.add(before, pa.scalar(start, pa.int64())), given)
