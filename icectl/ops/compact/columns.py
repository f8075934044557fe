"""Compaction's plan over the Arrow form (manifest-list tables, read on this machine).

The entries of the manifests being replaced are never turned into Python objects all at once:
each group holds its live rows as one Arrow table (:func:`icectl.table.scan.iter_manifest_tables`,
inheritance applied), clustered with a sort over kernels, and a bin is a slice of it. Entries are
made only where the writer needs them, one bin at a time (:func:`existing_entries`), and for the
few rows the checks flag. The result is the plan the entry path makes (``plan.cluster`` and
``plan.roll`` over :class:`~icectl.spec.manifest.ManifestEntry`, still used by v4 and by the Spark
engine): the same bins, in the same order, with the same entries (the tests compare the two).

At 2 million entries the entry path held about 6 GB of objects; the rows take a tenth of that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from icectl.codec.arrow_types import distinct_rows
from icectl.codec.manifest_arrow import TABLE_COLUMNS, entries_from_table, partition_values
from icectl.codec.metric_columns import impossible_rows
from icectl.errors import IcectlError
from icectl.ops.compact.plan import SAMPLE_ENTRIES, Bin, GroupPlan, ManifestShape, refuse_uncopyable, value_key
from icectl.spec.manifest import ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.schema import StructType
from icectl.storage import FileIO
from icectl.table.layout.manifest_list import as_existing
from icectl.table.manifest_read import ReadOptions, manifest_arrow
from icectl.table.scan import iter_manifest_tables

if TYPE_CHECKING:
    import pyarrow as pa

# Columns the plan adds to a group's rows: where each row came from (the error messages name the
# manifest and the entry's ordinal, as the entry path does).
ORDINAL, MANIFEST = "_ordinal", "_manifest"
_DELETED = int(ManifestEntryStatus.DELETED)


def read_live_rows(md: TableMetadata, io: FileIO, groups: Sequence[GroupPlan], single: frozenset[int]) -> bool:
    """Fill each group's ``rows`` with the live rows of its manifests (in manifest-list order),
    count its DELETED entries and its live entries per manifest, and refuse values no writer
    records and (v2+) live entries without a sequence number, naming the first such entry in
    reading order as the entry path does. False, with the groups untouched, when a manifest has
    no Arrow table (the caller then reads entries)."""
    import pyarrow as pa

    todo = [(g, m) for g in groups for m in g.manifests]
    index = {id(g): i for i, g in enumerate(groups)}
    parts: list[list[pa.Table]] = [[] for _ in groups]
    sizes: list[list[tuple[int, int]]] = [[] for _ in groups]  # (manifest index, entries) per group
    # Read-through without filling the cache: these manifests are about to be replaced.
    tables = iter_manifest_tables(md, io, [m for _, m in todo], fill_cache=False)
    for i, ((g, _), (_m, got)) in enumerate(zip(todo, tables, strict=True)):
        if isinstance(got, list):
            return False
        parts[index[id(g)]].append(got)
        sizes[index[id(g)]].append((i, got.num_rows))
    for gi, g in enumerate(groups):
        # one copy of the group (the manifests' tables are slices of the joined reads), one filter
        rows = pa.concat_tables(parts[gi]).combine_chunks() if parts[gi] else None
        parts[gi] = []
        which = np.asarray([i for i, _ in sizes[gi]], dtype=np.int64)
        counts = np.asarray([n for _, n in sizes[gi]], dtype=np.int64)
        k = np.repeat(which, counts)
        ordinal = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        status = rows.column("status").to_numpy() if rows is not None else np.zeros(0, np.int8)
        live = status != _DELETED
        per = np.bincount(np.repeat(np.arange(len(which)), counts)[live], minlength=len(which))
        g.deleted_entries += int((~live).sum())
        for (i, _), n in zip(sizes[gi], per.tolist(), strict=True):
            if n:  # as the entry path counts: a manifest with no live entry is not listed
                path = todo[i][1].manifest_path
                g.live_per_manifest[path] = g.live_per_manifest.get(path, 0) + n
        if rows is not None and not live.all():
            rows, k, ordinal = rows.filter(pa.array(live)), k[live], ordinal[live]
        if rows is None:
            continue
        g.rows = rows.append_column(ORDINAL, pa.array(ordinal)).append_column(MANIFEST, pa.array(k))
        g.live_entries = g.rows.num_rows
    _check_rows(md, groups, [m for _, m in todo], single)
    return True


def _check_rows(md: TableMetadata, groups: Sequence[GroupPlan], manifests: list[ManifestFile],
                single: frozenset[int]) -> None:
    """The entry path's checks (:func:`~icectl.ops.compact.plan.refuse_uncopyable`) on the rows a screen
    flags, in reading order: the first entry that fails raises the entry path's error."""
    flagged: list[tuple[int, int, GroupPlan, int]] = []  # (manifest, ordinal, group, row)
    for g in groups:
        if g.rows is None or g.rows.num_rows == 0:
            continue
        bad = np.concatenate([_flagged(md, g.rows.slice(start, _CHECK_ROWS), single)
                              for start in range(0, g.rows.num_rows, _CHECK_ROWS)])
        rows = g.rows
        at = np.flatnonzero(bad)
        k = rows.column(MANIFEST).to_numpy()[at]
        ordinal = rows.column(ORDINAL).to_numpy()[at]
        flagged.extend(zip(k.tolist(), ordinal.tolist(), [g] * len(at), at.tolist(), strict=True))
    for k, ordinal, g, row in sorted(flagged, key=lambda f: (f[0], f[1])):
        m = manifests[k]
        assert g.rows is not None
        e = entries_from_table(g.rows.slice(row, 1), partition_type=md.partition_type(g.spec_id))[0]
        refuse_uncopyable(md, e, single, m.manifest_path, ordinal)


_CHECK_ROWS = 65_536  # rows screened at a time: the screen's pair arrays stay small


def _flagged(md: TableMetadata, rows: pa.Table, single: frozenset[int]) -> np.ndarray:
    """Rows of one slice the per-entry checks must look at."""
    files = {name: rows.column(name).chunk(0) for name in TABLE_COLUMNS if rows.column(name).num_chunks}
    record_count = files["record_count"].to_numpy(zero_copy_only=False)
    try:
        bad = impossible_rows(files, record_count, single)
    except ValueError:  # a map the screen cannot read: every row gets the per-entry check
        bad = np.ones(rows.num_rows, dtype=bool)
    if md.format_version >= 2:
        bad |= rows.column("sequence_number").is_null().to_numpy(zero_copy_only=False)
    return bad


def cluster_rows(rows: pa.Table, positions: Sequence[int], partition_type: StructType) -> pa.Table:
    """:func:`icectl.ops.compact.plan.cluster` over rows: by partition value (``positions`` first,
    each value ordered by :func:`~icectl.ops.compact.plan.value_key`), then sequence number, path
    and content offset, stable. Distinct partition tuples are decoded and ranked in Python; the
    rows are sorted by kernels."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = rows.num_rows
    if n == 0:
        return rows
    rank = pa.array(np.zeros(n, dtype=np.int64))
    if partition_type.fields:
        part = rows.column("partition").combine_chunks()
        decode = partition_values(partition_type)
        try:
            groups, firsts = distinct_rows([pc.list_element(part, i) for i in range(len(partition_type.fields))], n)
            tuples = [decode(v) for v in part.take(firsts).to_pylist()]
            row_group = groups.to_numpy(zero_copy_only=False).astype(np.int64)
        except OverflowError:  # too many distinct combinations to key: one tuple per row
            tuples = [decode(v) for v in part.to_pylist()]
            row_group = np.arange(n, dtype=np.int64)
        keys = [tuple(value_key(t[i]) for i in positions) for t in tuples]
        # equal keys (0.0 and -0.0, 1.0 and 1.00) share a rank: the stable sort keeps their order
        order = {key: r for r, key in enumerate(sorted(set(keys)))}
        rank = pa.array(np.asarray([order[key] for key in keys], dtype=np.int64)[row_group])
    keyed = pa.table({
        "rank": rank,
        "seq": pc.fill_null(rows.column("sequence_number"), 0),
        "path": rows.column("file_path"),
        "offset": pc.fill_null(rows.column("content_offset"), 0),
    })
    order_idx = pc.sort_indices(keyed, sort_keys=[("rank", "ascending"), ("seq", "ascending"),
                                                  ("path", "ascending"), ("offset", "ascending")])
    return rows.take(order_idx)


def existing_entries(rows: pa.Table, partition_type: StructType) -> list[ManifestEntry]:
    """The rows as a rewritten manifest holds them (:func:`~icectl.table.layout.manifest_list.as_existing`)."""
    return [as_existing(e) for e in entries_from_table(rows, partition_type=partition_type)]


def roll_rows(rows: pa.Table, shape: ManifestShape, target: int) -> tuple[list[Bin], int]:
    """:func:`icectl.ops.compact.plan.roll` over clustered rows: bins are slices of ``rows``."""
    if rows.num_rows == 0:
        return [], 1
    header = len(shape.encode([]))
    sample = existing_entries(rows.slice(0, SAMPLE_ENTRIES), shape.partition_type)
    per_entry = max(1.0, (len(shape.encode(sample)) - header) / len(sample))
    capacity = max(1, int((target - header) / per_entry))
    bins = []
    for start in range(0, rows.num_rows, capacity):
        chunk = rows.slice(start, capacity)
        bins.append(Bin([], header + int(per_entry * chunk.num_rows), chunk))
    return bins, capacity


def verify_rows(md: TableMetadata, io: FileIO, group: GroupPlan, written: Sequence[Any]) -> None:
    """``verify_group`` for a group planned over rows: each new manifest read back from the file
    as readers will (inheritance included) holds EXISTING entries only, as many as written, and
    together, in bin order, the group's clustered rows, every column but the status equal."""
    import pyarrow as pa
    import pyarrow.compute as pc

    assert group.rows is not None
    seq = md.last_sequence_number + 1 if md.format_version >= 2 else 0
    ptype = md.partition_type(group.spec_id)
    got: list[pa.Table] = []
    for w in written:
        m = replace(w.manifest, sequence_number=seq, min_sequence_number=seq)
        table = manifest_arrow(io, m, partition_type=ptype, format_version=md.format_version,
                               options=ReadOptions(use_cache=False))
        if isinstance(table, list):  # our own writer's manifest always has the Arrow form
            raise IcectlError(f"manifest {m.manifest_path} does not read back as written", path=m.manifest_path)
        existing = int(ManifestEntryStatus.EXISTING)
        if table.num_rows != w.entries or pc.any(pc.not_equal(table.column("status"),
                                                                pa.scalar(existing, pa.int8()))).as_py():
            raise IcectlError(f"manifest {m.manifest_path} does not hold what was written", path=m.manifest_path)
        got.append(table)
    columns = [c for c in TABLE_COLUMNS if c != "status"]
    back = pa.concat_tables(got).select(columns) if got else None
    want = group.rows.select(columns)
    if back is None or not back.equals(want):
        raise IcectlError(f"the rewritten manifests of spec {group.spec_id} ({group.content_name}) do not hold the "
                          "same live files as the manifests they replace; nothing was committed")


__all__ = ["cluster_rows", "existing_entries", "read_live_rows", "roll_rows", "verify_rows"]
