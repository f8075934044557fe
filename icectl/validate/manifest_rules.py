"""Rules on manifests and their entries (spec "Manifests", "Manifest Entry Fields", Appendix B and D)."""

from __future__ import annotations

import dataclasses
import decimal
import struct
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from icectl.codec.manifest_reader import read_manifest, read_manifest_metadata
from icectl.errors import CorruptInputError, IcectlError, UnsupportedError
from icectl.spec.manifest import (
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    impossible_values,
)
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import IcebergType, PrimitiveType, Schema, StructType
from icectl.spec.transforms import BucketTransform, IdentityTransform
from icectl.spec.values import from_bytes
from icectl.storage import is_relative_path
from icectl.validate import delete_rules
from icectl.validate.context import Context, LiveFile, ManifestSummary
from icectl.validate.manifest_list_rules import (
    EntryTotals,
    ListRules,
    PartitionStats,
    check_against_entries,
    report_unreadable,
)
from icectl.validate.rules import Rule, Severity, entry_name, rule

if TYPE_CHECKING:
    from icectl.validate.entry_columns import Screened

E, W = Severity.ERROR, Severity.WARNING

READABLE = rule("manifest.readable", E,
                "every listed manifest reads whole: Avro magic, header, schema and every entry decode (Java "
                "fails on it: 'Not an Avro data file')", "Manifests")
ENTRY_VALUES = rule("manifest.entry-values", E,
                    "file_size_in_bytes, record_count and column sizes/counts are not negative; a column's value, "
                    "null and NaN counts are within record_count (columns outside lists and maps) and its null and "
                    "NaN counts within its value count; a DV's blob lies within its file", "Manifest Entry Fields")
SCHEMA_ID_KEY = rule("manifest.schema-id-key", W,
                     "the manifest's metadata has a 'schema-id' key (Iceberg Java does not write one)", "Manifests")
METADATA_KEYS = rule("manifest.metadata-keys", E,
                     "the manifest's metadata has schema, partition-spec, partition-spec-id and, from v2, "
                     "format-version and content", "Manifests")
SPEC_ID = rule("manifest.partition-spec-id", E,
               "the manifest's partition-spec-id equals the manifest list's partition_spec_id", "Manifests")
CONTENT = rule("manifest.content", E, "a data manifest holds only data files, a delete manifest only delete files",
               "Manifests")
PARTITION_TUPLE = rule("manifest.partition-tuple", E,
                       "every entry's partition tuple has the spec's fields with values of their types",
                       "Partitioning; Manifests")
EXPLICIT_SEQUENCE = rule("manifest.explicit-sequence-numbers", E,
                         "EXISTING and DELETED entries carry explicit data and file sequence numbers (v2+)",
                         "Sequence Number Inheritance")
SEQUENCE_ORDER = rule("manifest.sequence-number-order", E,
                      "data sequence number <= file sequence number <= the snapshot's sequence number",
                      "Sequence Numbers")
ADDED_SNAPSHOT = rule("manifest.added-by-snapshot", E,
                      "ADDED entries belong to the snapshot that added the manifest", "Manifest Entry Fields")
BOUNDS_DECODE = rule("manifest.bounds-decode", E,
                     "lower and upper bounds decode as values of their column's type", "Appendix D")
BOUNDS_ORDER = rule("manifest.bounds-order", E, "every column's lower bound is <= its upper bound",
                    "Manifest Entry Fields")
IDENTITY_BOUNDS = rule("manifest.identity-partition-bounds", E,
                       "an identity partition value equals its column's bounds when they are exact (lower == upper)",
                       "Partition Transforms")
ABSOLUTE_PATHS = rule("manifest.absolute-paths", E,
                      "before v4, every entry names its data or delete file by an absolute path, the full URI "
                      "the spec asks for (a relative one would resolve against each reader's working directory)",
                      "Manifests")
BUCKET_BOUNDS = rule("manifest.bucket-partition-bounds", E,
                     "a bucket partition value equals the bucket (Murmur3) of its column's exact bound",
                     "Bucket Transform Details; Appendix B")

_MISSING = object()
_INTS = {"int", "long", "date", "time", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"}
ORDERED = _INTS | {"float", "double", "string", "binary", "fixed", "decimal", "boolean"}


def value_fits(t: IcebergType, v: Any) -> bool:
    if v is None:
        return True
    name = t.name if isinstance(t, PrimitiveType) else ""
    if name == "boolean":
        return isinstance(v, bool)
    if name in _INTS:
        return isinstance(v, int) and not isinstance(v, bool)
    if name in ("float", "double"):
        return isinstance(v, float)
    if name == "string":
        return isinstance(v, str)
    if name in ("binary", "fixed"):
        return isinstance(v, (bytes, bytearray))
    if name == "decimal":
        return isinstance(v, decimal.Decimal)
    if name == "uuid":
        return isinstance(v, uuid.UUID)
    return name != "unknown"


def check_manifest(ctx: Context, list_path: str | None, m: ManifestFile, ordinal: int, data: bytes,
                   list_rules: ListRules | None = None, entries: list[ManifestEntry] | None = None,
                   screened: Screened | None = None) -> ManifestSummary | None:
    """Every entry rule over one manifest, then the list row against the entries; entries are not kept.
    ``None`` when the manifest does not decode (a ``manifest.readable`` finding; the entries read
    before the damage were checked).

    ``list_rules``: the rules the list row's checks report under (a v4 root's manifest entries
    have their own ids). ``entries``: the manifest's entries as written (:func:`as_written`) when the
    caller has them from the manifest cache, decoded from these very bytes in an earlier run.
    ``screened``: these very bytes' entries found clean by :mod:`.entry_columns`, with what the
    entry loop would have gathered (the loop is not run)."""
    try:
        return _check_manifest(ctx, list_path, m, ordinal, data, list_rules, entries, screened)
    except UnsupportedError:
        raise  # readable by others (a codec icectl lacks): not a finding about the table
    except CorruptInputError as e:
        report_unreadable(ctx, READABLE, m.manifest_path, e, entry=f"{list_path}#{ordinal}",
                          what=f"manifest {m.manifest_path}", manifest_path=m.manifest_path)
        return None


def as_written(m: ManifestFile) -> ManifestFile:
    """``m`` without its first_row_id: entries read with it show the first_row_id they were written
    with (no entry rule uses the inherited value), and a null one draws on the manifest's range."""
    return dataclasses.replace(m, first_row_id=None)


def _check_manifest(ctx: Context, list_path: str | None, m: ManifestFile, ordinal: int, data: bytes,
                    list_rules: ListRules | None, entries: Iterable[ManifestEntry] | None,
                    screened: Screened | None = None) -> ManifestSummary:
    md, rep = ctx.metadata, ctx.reporter
    path = m.manifest_path
    summary = ManifestSummary(m)
    try:
        kv = screened.metadata if screened is not None else read_manifest_metadata(data)
    except IcectlError as err:
        raise err.in_file(path) from None
    if "schema-id" not in kv:
        rep.report(SCHEMA_ID_KEY, path, "manifest metadata has no 'schema-id' key", key="schema-id")
    required = ["schema", "partition-spec", "partition-spec-id"]
    # The manifest's own version decides: upgraded tables keep the manifests older versions wrote
    # (Java's v1 writer has no 'content' key), and a v4 root may name v1 leaves (no key: v1).
    declared = kv.get("format-version")
    own = int(declared) if declared and declared.isdigit() else (1 if md.format_version >= 4 else md.format_version)
    if 2 <= md.format_version <= 3:
        required.append("format-version")
    if own >= 2:
        required.append("content")
    for key in required:
        if key not in kv:
            rep.report(METADATA_KEYS, path, f"manifest metadata lacks the {key!r} key", key=key)
    if "partition-spec-id" in kv and kv["partition-spec-id"] != str(m.partition_spec_id):
        rep.report(SPEC_ID, path, f"manifest says partition-spec-id {kv['partition-spec-id']}, the manifest list "
                   f"says {m.partition_spec_id}", manifest=kv["partition-spec-id"], listed=m.partition_spec_id)
    ptype = md.partition_type(m.partition_spec_id)
    spec = md.spec_by_id(m.partition_spec_id)
    assert spec is not None  # checked by check_manifest_file
    schema = ctx.manifest_schema(kv.get("schema")) or md.schema()
    totals = EntryTotals(partitions=[PartitionStats() for _ in ptype.fields])
    if screened is not None:
        screened.apply(summary, totals)
        check_against_entries(ctx, list_path, m, ordinal, totals, ptype, kv.get("content"), list_rules)
        summary.totals = totals
        return summary
    checker = EntryChecker(ctx, m, spec, ptype, schema, summary, totals)
    if entries is None:
        entries = read_manifest(data, manifest=as_written(m), partition_type=ptype, format_version=md.format_version)
    try:
        for i, e in enumerate(entries):
            checker.check(i, e)
            df = e.data_file
            # DELETED entries neither take ids nor advance the range (spec "First Row ID Inheritance")
            if df.content == DataFileContent.DATA and e.is_live:
                if df.first_row_id is None:
                    summary.inherited_rows += df.record_count
                else:
                    summary.explicit_row_ids.append((df.first_row_id, df.first_row_id + df.record_count))
    except IcectlError as err:
        raise err.in_file(path) from None
    check_against_entries(ctx, list_path, m, ordinal, totals, ptype, kv.get("content"), list_rules)
    summary.totals = totals
    summary.explicit_row_ids = _merge_adjacent(summary.explicit_row_ids)
    return summary


def _merge_adjacent(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Touching ranges as one (a manifest's files usually hold one run of ids); overlaps stay apart
    so the per-snapshot check still sees them."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and out[-1][1] == start:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def bound_less(a: Any, b: Any) -> bool:
    """a < b as Java orders bounds (strings by UTF-16 code units); False when they do not compare."""
    try:
        if isinstance(a, str):
            # ASCII strings order alike either way; others by their UTF-16 code units.
            return a < b if a.isascii() and b.isascii() else a.encode("utf-16-be") < b.encode("utf-16-be")
        return a < b
    except (TypeError, AttributeError):
        return False


_STRUCTS = {"int": (4, struct.Struct("<i")), "date": (4, struct.Struct("<i")), "long": (8, struct.Struct("<q")),
            "double": (8, struct.Struct("<d")), "float": (4, struct.Struct("<f")),
            "time": (8, struct.Struct("<q")), "timestamptz": (8, struct.Struct("<q")),
            "timestamptz_ns": (8, struct.Struct("<q")), "timestamp": (8, struct.Struct("<q")),
            "timestamp_ns": (8, struct.Struct("<q"))}


def bound_decoder(t: IcebergType) -> Callable[[bytes], Any]:
    """``from_bytes`` for one column type, with its common cases (a fixed-width number of the
    type's own width, UTF-8 text) decoded directly; anything else, errors included, goes through
    ``from_bytes`` itself, so values and error messages are its own."""
    name = t.name if isinstance(t, PrimitiveType) else ""
    if name in _STRUCTS:
        width, unpack = _STRUCTS[name][0], _STRUCTS[name][1].unpack

        def number(raw: bytes) -> Any:
            return unpack(raw)[0] if len(raw) == width else from_bytes(t, raw)
        return number
    if name == "string":
        def text(raw: bytes) -> Any:
            try:
                return raw.decode("utf-8") if type(raw) is bytes else from_bytes(t, raw)
            except UnicodeDecodeError:
                return from_bytes(t, raw)  # raises its own error
        return text
    return lambda raw: from_bytes(t, raw)


@dataclasses.dataclass(frozen=True)
class ColumnInfo:
    """What the bound rules need of one column id, worked out once per manifest."""

    type: IcebergType | None
    primitive: bool  # bounds of other types are not decoded
    ordered: bool  # a primitive type whose bounds compare (aggregated and order-checked)
    decode: Callable[[bytes], Any]


class EntryChecker:
    """The entry rules, one entry at a time (v1-v3 manifests; v4 leaves and root-level files as
    converted entries, whose version_info explicitness a ``v4`` rule checks: ``explicit`` None)."""

    def __init__(self, ctx: Context, m: ManifestFile, spec: PartitionSpec, ptype: StructType, schema: Schema,
                 summary: ManifestSummary, totals: EntryTotals, explicit: Rule | None = EXPLICIT_SEQUENCE) -> None:
        self.ctx, self.rep, self.m = ctx, ctx.reporter, m
        self.explicit = explicit
        self.ptype, self.schema, self.summary, self.totals = ptype, schema, summary, totals
        self.version = ctx.metadata.format_version
        self.types = [f.field_type for f in ptype.fields]
        # (position in the tuple, source column id, transform) of identity and bucket fields
        self.derived = [(i, f.source_id, f.transform) for i, f in enumerate(spec.fields)
                        if isinstance(f.transform, (IdentityTransform, BucketTransform))]
        self._types: dict[int, IcebergType | None] = {}
        self._columns: dict[int, ColumnInfo] = {}
        self.on_bounds = self.rep.any_on(BOUNDS_DECODE, BOUNDS_ORDER, IDENTITY_BOUNDS, BUCKET_BOUNDS)
        self.on_values = self.rep.on(ENTRY_VALUES)

    def _type(self, field_id: int) -> IcebergType | None:
        if field_id in self._types:  # asked once per bound of every entry: cache
            return self._types[field_id]
        t = self.schema.find_type(field_id)
        if t is None:
            for s in reversed(self.ctx.metadata.schemas):
                t = s.find_type(field_id)
                if t is not None:
                    break
        self._types[field_id] = t
        return t

    def _column(self, field_id: int) -> ColumnInfo:
        info = self._columns.get(field_id)
        if info is None:
            t = self._type(field_id)
            primitive = t is not None and t.is_primitive
            ordered = isinstance(t, PrimitiveType) and t.name in ORDERED
            decode = bound_decoder(t) if t is not None and primitive else bytes  # never called: not primitive
            info = self._columns[field_id] = ColumnInfo(t, primitive, ordered, decode)
        return info

    def check(self, i: int, e: ManifestEntry) -> None:
        rep, m, df, path = self.rep, self.m, e.data_file, self.m.manifest_path
        where = entry_name(path, i)
        totals = self.totals
        totals.files[e.status] += 1
        self.summary.entries += 1
        totals.rows[e.status] += df.record_count
        if e.is_live and e.sequence_number is not None and (
                totals.min_live_sequence_number is None or e.sequence_number < totals.min_live_sequence_number):
            totals.min_live_sequence_number = e.sequence_number
        if self.version < 4 and is_relative_path(df.file_path):
            rep.report(ABSOLUTE_PATHS, path, f"{df.file_path!r} is a relative path", entry=where,
                       file_path=df.file_path)
        is_data = df.content == DataFileContent.DATA
        if is_data != (m.content == ManifestContent.DATA):
            rep.report(CONTENT, path, f"{m.content.name.lower()} manifest holds a {df.content.name} file "
                       f"{df.file_path}", entry=where, manifest_content=m.content.name, file_content=df.content.name)
        partition = df.partition or ()
        if len(partition) != len(self.types) or not all(
                value_fits(t, v) for t, v in zip(self.types, partition, strict=False)):
            rep.report(PARTITION_TUPLE, path, f"partition {partition!r} of {df.file_path} does not match the "
                       f"spec's type {self.ptype}", entry=where, partition=list(partition),
                       partition_type=str(self.ptype))
        else:
            for stats, v in zip(totals.partitions, partition, strict=True):
                stats.update(v)
        if self.explicit is not None and self.version >= 2 and e.status != ManifestEntryStatus.ADDED and (
                e.sequence_number is None or e.file_sequence_number is None):
            rep.report(self.explicit, path, f"{e.status.name} entry for {df.file_path} has no explicit "
                       "sequence number", entry=where, status=e.status.name, sequence_number=e.sequence_number,
                       file_sequence_number=e.file_sequence_number)
        if e.sequence_number is not None and e.file_sequence_number is not None \
                and e.sequence_number > e.file_sequence_number:
            rep.report(SEQUENCE_ORDER, path, f"data sequence number {e.sequence_number} of {df.file_path} is above "
                       f"its file sequence number {e.file_sequence_number}", entry=where,
                       sequence_number=e.sequence_number, file_sequence_number=e.file_sequence_number)
        fseq = e.file_sequence_number if e.file_sequence_number is not None else e.sequence_number
        s = self.summary
        if fseq is not None and (s.max_file_sequence_number is None or fseq > s.max_file_sequence_number):
            s.max_file_sequence_number, s.max_file_sequence_entry = fseq, where
        if e.status == ManifestEntryStatus.ADDED and e.snapshot_id != m.added_snapshot_id:
            rep.report(ADDED_SNAPSHOT, path, f"ADDED entry for {df.file_path} has snapshot_id {e.snapshot_id}, the "
                       f"manifest was added by {m.added_snapshot_id}", entry=where, snapshot_id=e.snapshot_id,
                       added_snapshot_id=m.added_snapshot_id)
        if self.on_values:
            problems = impossible_values(df, self.ctx.single_valued_ids)
            if problems:
                rep.report(ENTRY_VALUES, path, f"{df.file_path}: {'; '.join(problems)}", entry=where,
                           problems=problems)
        if self.on_bounds:
            self._bounds(e, where, partition)
        if e.is_live:
            if is_data:
                s.live_data_files.append(df.file_path)  # a list in the entry loop
            if self.ctx.deep:
                s.live_files.append(LiveFile(df.file_path, df.file_size_in_bytes, df.record_count,
                                             df.file_format, int(df.content), where))
        if not is_data:
            s.delete_entries += 1
            delete_rules.check_delete_entry(self.ctx, e, where, s, self.schema)

    def _aggregate(self, lowers: dict[int, Any], uppers: dict[int, Any]) -> None:
        """Widen the manifest's per-column bounds by one live entry's (NaN and unordered types left out)."""
        totals = self.totals
        if totals.lowers is None or totals.uppers is None:
            totals.lowers, totals.uppers = {}, {}
        columns = self._columns  # filled by _bounds for every id here
        for values, acc, below in ((lowers, totals.lowers, True), (uppers, totals.uppers, False)):
            for fid, v in values.items():
                if isinstance(v, float) and v != v:
                    continue
                if not columns[fid].ordered:
                    continue
                seen = acc.get(fid, _MISSING)
                if seen is _MISSING or (bound_less(v, seen) if below else bound_less(seen, v)):
                    acc[fid] = v

    def _bounds(self, e: ManifestEntry, where: str, partition: tuple[Any, ...]) -> None:
        rep, df, path = self.rep, e.data_file, self.m.manifest_path
        lowers: dict[int, Any] = {}
        uppers: dict[int, Any] = {}
        columns = self._columns
        for label, raw_bounds, out in (("lower", df.lower_bounds, lowers), ("upper", df.upper_bounds, uppers)):
            for fid, raw in (raw_bounds or {}).items():
                column = columns.get(fid) or self._column(fid)
                if not column.primitive:
                    continue
                t = column.type
                try:
                    out[fid] = column.decode(raw)
                except (IcectlError, ValueError) as err:
                    rep.report(BOUNDS_DECODE, path, f"{label} bound of column {fid} in {df.file_path} is not a {t}: "
                               f"{getattr(err, 'message', err)}", entry=where, field_id=fid, type=str(t),
                               bound=bytes(raw).hex())
        if e.is_live:
            self._aggregate(lowers, uppers)
        for fid, lo in lowers.items():
            hi = uppers.get(fid)
            if hi is None or not columns[fid].ordered:
                continue
            if isinstance(lo, float) and (lo != lo or hi != hi):  # NaN bounds compare with nothing
                continue
            # Java orders strings by UTF-16 code units (Comparators.charSequences), not code points:
            # the same order as Python's for ASCII.
            if isinstance(lo, str) and not (lo.isascii() and hi.isascii()):
                wrong = lo.encode("utf-16-be") > hi.encode("utf-16-be")
            else:
                wrong = lo > hi
            if wrong:
                rep.report(BOUNDS_ORDER, path, f"column {fid} of {df.file_path}: lower bound {lo!r} > upper bound "
                           f"{hi!r}", entry=where, field_id=fid, lower=lo, upper=hi)
        if len(partition) != len(self.types):
            return
        for pos, source_id, transform in self.derived:
            lo, hi = lowers.get(source_id), uppers.get(source_id)
            value = partition[pos]
            source_type = self._type(source_id)
            if lo is None or lo != hi or source_type is None or getattr(source_type, "name", "") in ("float", "double"):
                continue
            if isinstance(transform, IdentityTransform):
                if value != lo:
                    rep.report(IDENTITY_BOUNDS, path, f"identity partition value {value!r} of {df.file_path} differs "
                               f"from column {source_id}'s exact bound {lo!r}", entry=where, partition_value=value,
                               bound=lo, field_id=source_id)
            else:
                try:
                    expected = transform.apply(lo, source_type)
                except (ValueError, TypeError):
                    continue
                if value != expected:
                    rep.report(BUCKET_BOUNDS, path, f"bucket partition value {value!r} of {df.file_path} is not "
                               f"{transform}({lo!r}) = {expected}", entry=where, partition_value=value,
                               expected=expected, bound=lo, field_id=source_id)
