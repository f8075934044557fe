"""validate's entry rules over many manifests at once, in Arrow columns: a screen.

:class:`~icectl.validate.manifest_rules.EntryChecker` checks one entry at a time, ~50 us each in
Python: 100 s for a table of 2 million entries. Here the manifests of a batch are decoded in one
native read (:func:`icectl.codec.avro_native.read_avro_joined`) and every entry rule is evaluated
with kernels over the whole batch. The screen never reports a finding: for each manifest it
either proves that no entry rule finds anything and gives what the later checks need of its
entries (:class:`Screened`: the counts, partition values, sequence numbers, live data files and
row-id ranges), or it answers None, and that manifest is checked entry by entry as before, which
reports exactly. Anything the kernels do not cover the same way as the per-entry code (a delete
file, a repeated map key, a bound of the wrong width, a value that does not fit its type) sends
the manifest there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from icectl.codec.avro import container_header
from icectl.codec.avro_native import native_enabled, read_avro_joined
from icectl.codec.manifest_arrow import distinct_partitions, native_columns, native_layout
from icectl.codec.manifest_batch import inherited_per_row
from icectl.codec.manifest_reader import read_manifest_metadata
from icectl.codec.metric_columns import impossible_rows, lookup_pairs, map_pairs
from icectl.spec.manifest import ManifestContent, ManifestEntryStatus, ManifestFile
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import IcebergType, PrimitiveType, Schema, StructType
from icectl.spec.transforms import BucketTransform, IdentityTransform
from icectl.storage.path_arrays import relative_mask
from icectl.validate import manifest_rules
from icectl.validate.context import Context, ManifestSummary
from icectl.validate.manifest_list_rules import EntryTotals, PartitionStats
from icectl.validate.rules import entry_name

if TYPE_CHECKING:
    import pyarrow as pa

_WIDTHS = {"int": "<i4", "date": "<i4", "long": "<i8", "time": "<i8", "timestamp": "<i8", "timestamptz": "<i8",
           "timestamp_ns": "<i8", "timestamptz_ns": "<i8", "float": "<f4", "double": "<f8"}
_BIG = 2**40  # counts above this could overflow int64 sums: such manifests are checked one by one


@dataclass
class Screened:
    """What the entry loop of ``manifest_rules._check_manifest`` gathers, for a manifest in
    which no entry rule finds anything."""

    entries: int
    files: list[int]  # by status code: ADDED, EXISTING, DELETED
    rows: list[int]
    min_live_sequence_number: int | None
    partitions: list[PartitionStats]
    max_file_sequence_number: int | None
    max_file_sequence_ordinal: int | None
    live_data_files: pa.Array | pa.ChunkedArray  # a slice of the batch's live data paths
    inherited_rows: int
    explicit_row_ids: list[tuple[int, int]]
    metadata: dict[str, str]  # the header's key-value metadata (the same for the whole batch)

    def apply(self, summary: ManifestSummary, totals: EntryTotals) -> None:
        """Fill ``summary`` and ``totals`` as the entry loop would have."""
        path = summary.manifest.manifest_path
        for status in ManifestEntryStatus:
            totals.files[status] = self.files[int(status)]
            totals.rows[status] = self.rows[int(status)]
        totals.min_live_sequence_number = self.min_live_sequence_number
        totals.partitions = self.partitions
        summary.entries = self.entries
        summary.max_file_sequence_number = self.max_file_sequence_number
        if self.max_file_sequence_ordinal is not None:
            summary.max_file_sequence_entry = entry_name(path, self.max_file_sequence_ordinal)
        summary.live_data_files = self.live_data_files
        summary.inherited_rows = self.inherited_rows
        summary.explicit_row_ids = self.explicit_row_ids


def usable(ctx: Context) -> bool:
    """Whether the screen applies to this run: tables before v4 (v4 leaves keep their own rules),
    without ``--deep`` (which keeps every live file), where the native decoder runs."""
    return ctx.metadata.format_version <= 3 and not ctx.deep and native_enabled()


def screen_manifests(ctx: Context, items: Sequence[tuple[ManifestFile, bytes]]) -> list[Screened | None]:
    """For each (listed manifest, its bytes): its :class:`Screened`, or None to check it entry by entry."""
    out: list[Screened | None] = [None] * len(items)
    groups: dict[tuple[bytes, int], list[int]] = {}
    for i, (m, data) in enumerate(items):
        if ctx.metadata.spec_by_id(m.partition_spec_id) is None:
            continue
        try:
            end, _sync, _meta = container_header(data)
        except Exception:  # the reader names the damage
            continue
        groups.setdefault((data[:end - 16], m.partition_spec_id), []).append(i)
    for (_meta_bytes, _spec_id), members in groups.items():
        try:
            screened = _screen_group(ctx, [items[i][0] for i in members], [items[i][1] for i in members])
        except Exception:  # NotNative, NotArrowRepresentable, the decoder's error: one by one
            continue
        for i, s in zip(members, screened, strict=True):
            out[i] = s
    return out


def _screen_group(ctx: Context, manifests: list[ManifestFile], datas: list[bytes]) -> list[Screened | None]:
    md = ctx.metadata
    spec = md.spec_by_id(manifests[0].partition_spec_id)
    assert spec is not None
    ptype = md.partition_type(spec)
    kv = read_manifest_metadata(datas[0])
    schema = ctx.manifest_schema(kv.get("schema")) or md.schema()
    layout = native_layout(datas[0], ptype, md.format_version)
    raw, rows = read_avro_joined(datas, layout.schema)
    batch = _Batch(ctx, manifests, rows, raw, layout, spec, ptype, schema)
    batch.metadata = kv
    return batch.screen()


class _Batch:
    """One joined read's entries: per row its manifest (``k``), ordinal and inherited values."""

    def __init__(self, ctx: Context, manifests: list[ManifestFile], rows: list[int], raw: pa.Table, layout: Any,
                 spec: PartitionSpec, ptype: StructType, schema: Schema) -> None:
        import pyarrow as pa

        self.ctx, self.manifests, self.layout, self.spec, self.ptype, self.schema = \
            ctx, manifests, layout, spec, ptype, schema
        self.metadata: dict[str, str] = {}
        self.n = n = raw.num_rows
        self.counts = np.asarray(rows, dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)
        self.k = np.repeat(np.arange(len(manifests), dtype=np.int64), self.counts)
        self.ordinal = np.arange(n, dtype=np.int64) - self.starts[self.k]
        entries, self.files, self.part = native_columns(raw, layout)
        for name in ("file_path", "record_count", "file_size_in_bytes"):
            if name not in self.files or self.files[name].null_count:
                raise ValueError(f"{name} missing or null")  # the reader decides what that is
        self.status = entries["status"].to_numpy(zero_copy_only=False).astype(np.int64)
        self.content = self.files["content"].to_numpy(zero_copy_only=False).astype(np.int64)
        self.live = self.status != int(ManifestEntryStatus.DELETED)
        self.record_count = self.files["record_count"].to_numpy(zero_copy_only=False)
        k = pa.array(self.k)
        # the reader's inheritance, with each row's own manifest (as the batched Arrow form has it)
        inherited = inherited_per_row(entries, entries["status"], manifests, k, n)
        self.snapshot_id, self.seq, self.fseq = (inherited[name] for name in
                                                 ("snapshot_id", "sequence_number", "file_sequence_number"))
        self.m_snap = pa.array([m.added_snapshot_id for m in manifests], pa.int64()).take(k)

    def screen(self) -> list[Screened | None]:
        m_count = len(self.manifests)
        bad = self._row_rules()
        bad_manifest = np.zeros(m_count, dtype=bool)
        np.logical_or.at(bad_manifest, self.k[bad], True)
        partitions = self._partitions(bad_manifest)
        if self.ctx.reporter.on(manifest_rules.ENTRY_VALUES):
            bad_manifest |= self._impossible_values()
        if self.ctx.reporter.any_on(manifest_rules.BOUNDS_DECODE, manifest_rules.BOUNDS_ORDER,
                                    manifest_rules.IDENTITY_BOUNDS, manifest_rules.BUCKET_BOUNDS):
            bad_manifest |= _Bounds(self).bad_manifests()
        return self._results(bad_manifest, partitions)

    def _row_rules(self) -> np.ndarray:
        """Rows an entry rule (or the delete rules, not screened) would look at more closely."""
        import pyarrow.compute as pc

        v = self.ctx.metadata.format_version
        bad = self.content != 0  # delete files: their rules read Puffin files, one by one
        bad |= relative_mask(self.files["file_path"]).to_numpy(zero_copy_only=False)
        is_data = np.asarray([m.content == ManifestContent.DATA for m in self.manifests], dtype=bool)[self.k]
        bad |= (self.content == 0) != is_data
        seq_null = self.seq.is_null().to_numpy(zero_copy_only=False)
        fseq_null = self.fseq.is_null().to_numpy(zero_copy_only=False)
        if v >= 2:
            bad |= (self.status != int(ManifestEntryStatus.ADDED)) & (seq_null | fseq_null)
        bad |= pc.fill_null(pc.greater(self.seq, self.fseq), False).to_numpy(zero_copy_only=False)
        same = pc.fill_null(pc.equal(self.snapshot_id, self.m_snap),
                            pc.and_(pc.is_null(self.snapshot_id), pc.is_null(self.m_snap)))
        bad |= (self.status == int(ManifestEntryStatus.ADDED)) & ~same.to_numpy(zero_copy_only=False)
        bad |= (self.record_count > _BIG) | (self.record_count < -_BIG)
        return bad

    def _partitions(self, bad_manifest: np.ndarray) -> list[list[PartitionStats]]:
        """Each manifest's partition statistics as ``PartitionStats.update`` over its entries gives
        them. Distinct tuples are converted (and checked against the spec's types) once; a tuple
        that does not fit marks the manifests that hold it."""
        groups, _firsts, tuples = distinct_partitions(self.part, self.layout, self.ptype, self.n)
        self.groups = groups.to_numpy(zero_copy_only=False).astype(np.int64)
        self.tuples = tuples
        types = [f.field_type for f in self.ptype.fields]
        m_count, g_count = len(self.manifests), len(tuples)
        misfit = np.asarray([len(v) != len(types) or not all(manifest_rules.value_fits(t, x)
                                                             for t, x in zip(types, v, strict=False))
                             for v in tuples], dtype=bool)
        np.logical_or.at(bad_manifest, self.k[misfit[self.groups]], True)
        # each manifest's distinct tuples, in order of first appearance
        pair = self.k * max(1, g_count) + self.groups
        unique, first = np.unique(pair, return_index=True)
        order = np.argsort(first, kind="stable")
        pair_k, pair_g = (unique[order] // max(1, g_count)), (unique[order] % max(1, g_count))
        stats = [[PartitionStats() for _ in types] for _ in range(m_count)]
        for pos in range(len(types)):
            values = [v[pos] if not misfit[g] else None for g, v in enumerate(tuples)]
            if not _fill_ranked(stats, pos, values, pair_k, pair_g):
                for km, g in zip(pair_k.tolist(), pair_g.tolist(), strict=True):
                    if not misfit[g]:
                        stats[km][pos].update(values[g])
        return stats

    def _impossible_values(self) -> np.ndarray:
        """Manifests where :func:`icectl.spec.manifest.impossible_values` could find something."""
        bad = impossible_rows(self.files, self.record_count, self.ctx.single_valued_ids)
        out = np.zeros(len(self.manifests), dtype=bool)
        np.logical_or.at(out, self.k[bad], True)
        return out

    def _results(self, bad_manifest: np.ndarray, partitions: list[list[PartitionStats]]) -> list[Screened | None]:
        m_count = len(self.manifests)
        files = np.bincount(self.k * 3 + self.status, minlength=3 * m_count).reshape(m_count, 3)
        row_sums = np.zeros(3 * m_count, dtype=np.int64)
        np.add.at(row_sums, self.k * 3 + self.status, self.record_count)
        rows = row_sums.reshape(m_count, 3)
        seq_valid = self.seq.is_valid().to_numpy(zero_copy_only=False)
        seq = self.seq.fill_null(0).to_numpy(zero_copy_only=False)
        min_live = _segment_extreme(self.k, m_count, seq, seq_valid & self.live, lowest=True)
        fseq_arr = self.fseq.fill_null(self.seq.fill_null(0))
        fseq_valid = (self.fseq.is_valid().to_numpy(zero_copy_only=False) | seq_valid)
        fseq = fseq_arr.to_numpy(zero_copy_only=False)
        top = _segment_extreme(self.k, m_count, fseq, fseq_valid, lowest=False)
        top_ordinal = _first_at(self.k, m_count, fseq_valid & (fseq == np.asarray(
            [t if t is not None else 0 for t in top], dtype=np.int64)[self.k]), self.ordinal)
        live_data = self.live & (self.content == 0)
        paths = self.files["file_path"].filter(live_data)  # stays Arrow: 10 million paths as str are 1.6 GB
        per = np.bincount(self.k[live_data], minlength=m_count)
        ends = np.cumsum(per)
        inherited, explicit = self._row_ids(live_data, m_count)
        out: list[Screened | None] = []
        for i in range(m_count):
            if bad_manifest[i]:
                out.append(None)
                continue
            lo, hi = int(ends[i] - per[i]), int(ends[i])
            out.append(Screened(int(self.counts[i]), files[i].tolist(), rows[i].tolist(), min_live[i], partitions[i],
                                top[i], top_ordinal[i] if top[i] is not None else None, paths[lo:hi],
                                inherited[i], explicit.get(i, []), self.metadata))
        return out

    def _row_ids(self, live_data: np.ndarray, m_count: int) -> tuple[list[int], dict[int, list[tuple[int, int]]]]:
        """Rows inheriting row ids, and the ranges of files written with their own first_row_id
        (sorted, touching ranges merged, as ``manifest_rules._merge_adjacent``)."""
        import pyarrow as pa

        given = self.files.get("first_row_id")
        given = pa.nulls(self.n, pa.int64()) if given is None else given
        has = given.is_valid().to_numpy(zero_copy_only=False) & live_data
        inherits = live_data & ~has
        inherited = np.zeros(m_count, dtype=np.int64)
        np.add.at(inherited, self.k[inherits], self.record_count[inherits])
        explicit: dict[int, list[tuple[int, int]]] = {}
        if has.any():
            starts = given.fill_null(0).to_numpy(zero_copy_only=False)[has]
            if np.abs(starts).max() > 2**62:
                raise ValueError("row ids near the int64 limit")  # Python's own sums decide
            ends = starts + self.record_count[has]
            ks = self.k[has]
            order = np.lexsort((ends, starts, ks))
            ks, starts, ends = ks[order], starts[order], ends[order]
            new = np.ones(len(ks), dtype=bool)
            new[1:] = (ks[1:] != ks[:-1]) | (starts[1:] != ends[:-1])
            last = np.append(np.flatnonzero(new)[1:] - 1, len(ks) - 1)
            for km, s, e in zip(ks[new].tolist(), starts[new].tolist(), ends[last].tolist(), strict=True):
                explicit.setdefault(km, []).append((s, e))
        return inherited.tolist(), explicit


def _fill_ranked(stats: list[list[PartitionStats]], pos: int, values: list[Any], pair_k: np.ndarray,
                 pair_g: np.ndarray) -> bool:
    """``PartitionStats.update`` of field ``pos`` over each manifest's tuples, by rank, where the
    values are all ints, all strings or all booleans (equal values are then the same value, so
    the lowest and highest do not depend on the order seen); False otherwise."""
    present = [v for v in values if v is not None]
    kinds = {type(v) for v in present}
    if len(kinds) > 1 or not kinds <= {int, str, bool}:
        return False
    distinct = sorted(set(present))
    rank = {v: i for i, v in enumerate(distinct)}
    ranks = np.asarray([rank[v] if v is not None else -1 for v in values], dtype=np.int64)[pair_g]
    m_count = len(stats)
    null = np.zeros(m_count, dtype=bool)
    null[pair_k[ranks < 0]] = True
    valid = ranks >= 0
    low = np.full(m_count, len(distinct), dtype=np.int64)
    high = np.full(m_count, -1, dtype=np.int64)
    np.minimum.at(low, pair_k[valid], ranks[valid])
    np.maximum.at(high, pair_k[valid], ranks[valid])
    for km in range(m_count):
        s = stats[km][pos]
        s.has_null = bool(null[km])
        if high[km] >= 0:
            s.lower, s.upper = distinct[low[km]], distinct[high[km]]
    return True


def _segment_extreme(k: np.ndarray, m_count: int, values: np.ndarray, valid: np.ndarray,
                     lowest: bool) -> list[int | None]:
    """Per manifest, the lowest (or highest) of its valid values; None where it has none."""
    fill = np.iinfo(np.int64).max if lowest else np.iinfo(np.int64).min
    out = np.full(m_count, fill, dtype=np.int64)
    (np.minimum if lowest else np.maximum).at(out, k[valid], values[valid])
    any_valid = np.bincount(k[valid], minlength=m_count) > 0
    return [int(v) if a else None for v, a in zip(out.tolist(), any_valid.tolist(), strict=True)]


def _first_at(k: np.ndarray, m_count: int, mask: np.ndarray, ordinal: np.ndarray) -> list[int]:
    """Per manifest, the ordinal of its first row in ``mask`` (0 where none: unused)."""
    out = np.zeros(m_count, dtype=np.int64)
    rows = np.flatnonzero(mask)
    ks, first = np.unique(k[rows], return_index=True)
    out[ks] = ordinal[rows[first]]
    return out.tolist()


class _Bounds:
    """The bound rules (``EntryChecker._bounds``) over a batch: decoding, order, and identity and
    bucket partition values against exact bounds."""

    def __init__(self, batch: _Batch) -> None:
        self.b = batch
        self.bad = np.zeros(batch.n, dtype=bool)
        self._types: dict[int, IcebergType | None] = {}

    def type_of(self, field_id: int) -> IcebergType | None:
        """``EntryChecker._type``: the manifest's schema, then the table's, newest first."""
        if field_id not in self._types:
            t = self.b.schema.find_type(field_id)
            if t is None:
                for s in reversed(self.b.ctx.metadata.schemas):
                    t = s.find_type(field_id)
                    if t is not None:
                        break
            self._types[field_id] = t
        return self._types[field_id]

    def bad_manifests(self) -> np.ndarray:
        b = self.b
        lower, upper = map_pairs(b.files.get("lower_bounds")), map_pairs(b.files.get("upper_bounds"))
        decoded: dict[tuple[str, int], tuple[np.ndarray, Any]] = {}
        for label, pairs in (("lower", lower), ("upper", upper)):
            if pairs is None:
                continue
            rows, keys, raw = pairs
            for fid in np.unique(keys).tolist():
                t = self.type_of(fid)
                if t is None or not t.is_primitive:
                    continue
                at = np.flatnonzero(keys == fid)
                decoded[(label, fid)] = (rows[at], self._decode(t, rows[at], raw.take(at)))
        for (label, fid), (rows, lo) in decoded.items():
            if label == "lower" and ("upper", fid) in decoded:
                self._order(fid, rows, lo, *decoded[("upper", fid)])
        self._derived(decoded)
        out = np.zeros(len(b.manifests), dtype=bool)
        np.logical_or.at(out, b.k[self.bad], True)
        return out

    def _decode(self, t: IcebergType, rows: np.ndarray, raw: pa.Array) -> Any:
        """The values of one column's bounds: a numpy array (numbers), an Arrow string array, or a
        list of Python values; rows that would not decode are marked."""
        import pyarrow as pa

        name = t.name if isinstance(t, PrimitiveType) else ""
        if name in _WIDTHS:
            dtype = np.dtype(_WIDTHS[name])
            if not pa.types.is_binary(raw.type):
                raise ValueError(f"bounds of Arrow type {raw.type}")
            offsets = np.frombuffer(raw.buffers()[1], dtype=np.int32, count=len(raw) + 1, offset=raw.offset * 4)
            widths = np.diff(offsets)
            if np.any(widths != dtype.itemsize):
                self.bad[rows[widths != dtype.itemsize]] = True  # from_bytes decides (promotion, errors)
                return None
            data = raw.buffers()[2]
            start = int(offsets[0]) if len(offsets) else 0
            return np.frombuffer(data, dtype=dtype, count=len(raw), offset=start) if len(raw) else \
                np.zeros(0, dtype=dtype)
        if name == "string":
            try:
                return raw.cast(pa.string())
            except pa.ArrowInvalid:
                self.bad[rows] = True
                return None
        decode = manifest_rules.bound_decoder(t)
        values: list[Any] = []
        for i, v in enumerate(raw.to_pylist()):
            try:
                values.append(decode(v))
            except Exception:  # a finding (or an error) of the per-entry rules
                self.bad[rows[i]] = True
                values.append(None)
        return values

    def _order(self, fid: int, lo_rows: np.ndarray, lo: Any, hi_rows: np.ndarray, hi: Any) -> None:
        """Lower bound above upper bound, as ``EntryChecker._bounds`` orders them."""
        import pyarrow as pa
        import pyarrow.compute as pc

        t = self.type_of(fid)
        if lo is None or hi is None or not (isinstance(t, PrimitiveType) and t.name in manifest_rules.ORDERED):
            return
        found, at = lookup_pairs(hi_rows, np.zeros(len(hi_rows), np.int64), lo_rows, np.zeros(len(lo_rows), np.int64))
        li = np.flatnonzero(found)
        hj = at[found]
        rows = lo_rows[li]
        if isinstance(lo, np.ndarray):
            self.bad[rows[lo[li] > hi[hj]]] = True  # NaN compares false: skipped, as there
        elif isinstance(lo, pa.Array):
            a, z = lo.take(pa.array(li)), hi.take(pa.array(hj))
            ascii_pair = pc.and_(pc.string_is_ascii(a), pc.string_is_ascii(z)).to_numpy(zero_copy_only=False)
            self.bad[rows[pc.greater(a, z).to_numpy(zero_copy_only=False) & ascii_pair]] = True
            for r, x, y in zip(rows[~ascii_pair].tolist(), a.filter(pa.array(~ascii_pair)).to_pylist(),
                               z.filter(pa.array(~ascii_pair)).to_pylist(), strict=True):
                if x.encode("utf-16-be") > y.encode("utf-16-be"):
                    self.bad[r] = True
        else:
            for r, i, j in zip(rows.tolist(), li.tolist(), hj.tolist(), strict=True):
                x, y = lo[i], hi[j]
                if x is not None and y is not None and not (isinstance(x, float) and (x != x or y != y)) and x > y:
                    self.bad[r] = True

    def _derived(self, decoded: dict[tuple[str, int], tuple[np.ndarray, Any]]) -> None:
        """Identity and bucket partition values against a column's exact bound (lower == upper)."""
        b = self.b
        derived = [(i, f.source_id, f.transform) for i, f in enumerate(b.spec.fields)
                   if isinstance(f.transform, (IdentityTransform, BucketTransform))]
        for pos, source_id, transform in derived:
            t = self.type_of(source_id)
            if t is None or getattr(t, "name", "") in ("float", "double") or ("lower", source_id) not in decoded \
                    or ("upper", source_id) not in decoded:
                continue
            lo_rows, lo = decoded[("lower", source_id)]
            hi_rows, hi = decoded[("upper", source_id)]
            if lo is None or hi is None:
                continue  # rows already marked
            if isinstance(transform, IdentityTransform) and self._identity(pos, lo_rows, lo, hi_rows, hi):
                continue
            rows, los = _exact(lo_rows, lo, hi_rows, hi)
            values = [b.tuples[g][pos] if pos < len(b.tuples[g]) else None for g in b.groups[rows].tolist()]
            memo: dict[Any, Any] = {}
            for r, value, bound in zip(rows.tolist(), values, los, strict=True):
                if isinstance(transform, IdentityTransform):
                    expected = bound
                else:
                    key = (type(bound), bound)
                    if key not in memo:
                        try:
                            memo[key] = transform.apply(bound, t)
                        except (ValueError, TypeError):
                            memo[key] = _SKIP
                    expected = memo[key]
                    if expected is _SKIP:
                        continue
                if value != expected:
                    self.bad[r] = True

    def _identity(self, pos: int, lo_rows: np.ndarray, lo: Any, hi_rows: np.ndarray, hi: Any) -> bool:
        """The identity rule with kernels where the partition values are all ints (bounds as numbers)
        or all strings (bounds as text), so ``!=`` means what it means in Python; False otherwise."""
        import pyarrow as pa
        import pyarrow.compute as pc

        b = self.b
        values = [t[pos] if pos < len(t) else None for t in b.tuples]
        kinds = {type(v) for v in values if v is not None}
        found, at = lookup_pairs(hi_rows, np.zeros(len(hi_rows), np.int64), lo_rows, np.zeros(len(lo_rows), np.int64))
        li, hj = np.flatnonzero(found), at[found]
        if kinds <= {int} and isinstance(lo, np.ndarray) and lo.dtype.kind == "i":
            exact = lo[li] == hi[hj]
            rows, bound = lo_rows[li[exact]], lo[li[exact]]
            ints = np.asarray([v if v is not None and abs(v) < 2**62 else 2**62 for v in values], dtype=np.int64)
            nulls = np.asarray([v is None or abs(v) >= 2**62 for v in values], dtype=bool)
            g = b.groups[rows]
            self.bad[rows[nulls[g] | (ints[g] != bound)]] = True
            return True
        if kinds <= {str} and isinstance(lo, pa.Array):
            a = lo.take(pa.array(li))
            exact = pc.fill_null(pc.equal(a, hi.take(pa.array(hj))), False).to_numpy(zero_copy_only=False)
            rows = lo_rows[li[exact]]
            given = pa.array(values, pa.string()).take(pa.array(b.groups[rows]))
            same = pc.fill_null(pc.equal(given, a.filter(pa.array(exact))), False).to_numpy(zero_copy_only=False)
            self.bad[rows[~same]] = True
            return True
        return False


_SKIP = object()


def _exact(lo_rows: np.ndarray, lo: Any, hi_rows: np.ndarray, hi: Any) -> tuple[np.ndarray, list[Any]]:
    """The rows whose lower and upper bound are equal (and not None), with that bound as Python values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    zeros_hi, zeros_lo = np.zeros(len(hi_rows), np.int64), np.zeros(len(lo_rows), np.int64)
    found, at = lookup_pairs(hi_rows, zeros_hi, lo_rows, zeros_lo)
    li, hj = np.flatnonzero(found), at[found]
    if isinstance(lo, np.ndarray):
        same = lo[li] == hi[hj]
        return lo_rows[li[same]], lo[li[same]].tolist()
    if isinstance(lo, pa.Array):
        a = lo.take(pa.array(li))
        same = pc.fill_null(pc.equal(a, hi.take(pa.array(hj))), False)
        return lo_rows[li[same.to_numpy(zero_copy_only=False)]], a.filter(same).to_pylist()
    pick = [(int(lo_rows[i]), lo[i]) for i, j in zip(li.tolist(), hj.tolist(), strict=True)
            if lo[i] is not None and lo[i] == hi[j]]
    return np.asarray([r for r, _ in pick], dtype=np.int64), [v for _, v in pick]


__all__ = ["Screened", "screen_manifests", "usable"]
