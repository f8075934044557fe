"""Rules on manifest lists: each manifest_file row against the manifest it describes (spec "Manifest Lists")."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from icectl.errors import CorruptInputError, IcectlError, NotFoundError, UnsupportedError
from icectl.spec.manifest import ManifestContent, ManifestEntryStatus, ManifestFile
from icectl.spec.schema import StructType
from icectl.spec.snapshots import Snapshot
from icectl.spec.values import from_bytes_or_none
from icectl.storage import is_relative_path
from icectl.table.scan import manifests_of
from icectl.validate.context import Context
from icectl.validate.rules import Rule, Severity, rule

E, W = Severity.ERROR, Severity.WARNING

LIST_EXISTS = rule("manifest-list.exists", E, "every snapshot's manifest list exists", "Snapshots")
LIST_READABLE = rule("manifest-list.readable", E,
                     "every snapshot's manifest list (v4: root manifest) reads whole: Avro magic, header and every "
                     "row decode (Java fails on it: 'Not an Avro data file')", "Manifest Lists")
MANIFEST_EXISTS = rule("manifest-list.manifest-exists", E, "every manifest the list names exists", "Manifest Lists")
MANIFEST_LENGTH = rule("manifest-list.manifest-length", E, "manifest_length equals the manifest's size in bytes",
                       "Manifest Lists")
SPEC_EXISTS = rule("manifest-list.partition-spec-exists", E,
                   "partition_spec_id names a partition spec of the table", "Manifest Lists")
COUNTS = rule("manifest-list.counts", E,
              "added/existing/deleted file and row counts equal the manifest's entries", "Manifest Lists")
MIN_SEQUENCE_NUMBER = rule("manifest-list.min-sequence-number", E,
                           "min_sequence_number equals the lowest data sequence number of the live entries",
                           "Manifest Lists")
SEQUENCE_NUMBER = rule("manifest-list.sequence-number", E,
                       "a manifest's sequence_number is <= the snapshot's, and equal to it for manifests "
                       "the snapshot added", "Sequence Numbers")
CONTENT = rule("manifest-list.content", E, "content equals the manifest's own 'content' metadata (v2+)",
               "Manifest Lists")
PARTITION_SUMMARIES = rule("manifest-list.partition-summaries", E,
                           "partition field summaries cover every entry's partition values (nulls, NaNs, bounds)",
                           "Manifest Lists")
ABSOLUTE_PATHS = rule("manifest-list.absolute-paths", E,
                      "before v4, a snapshot names its manifest list and the list its manifests by absolute "
                      "paths (a relative one would resolve against each reader's working directory)",
                      "Snapshots; Manifest Lists")
FIRST_ROW_ID = rule("manifest-list.first-row-ids", E,
                    "v3: data manifests have a first_row_id and their row-id ranges do not overlap",
                    "First Row ID Assignment")


@dataclass
class PartitionStats:
    """One partition field's values over a manifest's entries, as a summary must cover them."""

    has_null: bool = False
    has_nan: bool = False
    lower: Any = None
    upper: Any = None

    def update(self, value: Any) -> None:
        if value is None:
            self.has_null = True
        elif isinstance(value, float) and math.isnan(value):
            self.has_nan = True
        else:
            try:
                if self.lower is None or value < self.lower:
                    self.lower = value
                if self.upper is None or value > self.upper:
                    self.upper = value
            except TypeError:  # a mistyped value; manifest.partition-tuple reports it
                pass


@dataclass
class EntryTotals:
    """Counts the manifest list must agree with, gathered while the entries stream by."""

    files: dict[ManifestEntryStatus, int] = field(default_factory=lambda: dict.fromkeys(ManifestEntryStatus, 0))
    rows: dict[ManifestEntryStatus, int] = field(default_factory=lambda: dict.fromkeys(ManifestEntryStatus, 0))
    min_live_sequence_number: int | None = None
    partitions: list[PartitionStats] = field(default_factory=list)
    # Lowest lower and highest upper bound of each column over the live entries, for a v4 root
    # entry's aggregated content_stats (None: the bounds rules did not run)
    lowers: dict[int, Any] | None = None
    uppers: dict[int, Any] | None = None


def read_list(ctx: Context, snap: Snapshot, data: bytes | NotFoundError | None = None) -> list[ManifestFile] | None:
    """A snapshot's manifests; None (and a finding) when its manifest list is missing.

    ``data`` is the manifest list's bytes when the caller fetched them ahead (or the error it met).
    A relative path (before v4) is a finding, and the list is not read through it.
    """
    relative = [p for p in (snap.manifest_list, *(snap.manifests or ())) if p and is_relative(ctx, p)]
    for p in relative:
        what = "manifest list" if p == snap.manifest_list else "manifest"
        ctx.reporter.report(ABSOLUTE_PATHS, ctx.metadata_location, f"snapshot {snap.snapshot_id} names its {what} "
                            f"by the relative path {p!r}", entry=f"snapshot {snap.snapshot_id}", path=p)
    if relative:
        return None
    try:
        if isinstance(data, NotFoundError):
            raise data
        if data is None or snap.manifest_list is None:
            return manifests_of(ctx.metadata, snap, ctx.io, use_cache=not ctx.deep)
        try:
            return list(ctx.lists.read(data))
        except IcectlError as e:
            raise e.in_file(snap.manifest_list) from None
    except NotFoundError as e:
        ctx.reporter.report(LIST_EXISTS, snap.manifest_list, f"snapshot {snap.snapshot_id}'s manifest list "
                            f"is missing ({e.message})", entry=f"snapshot {snap.snapshot_id}",
                            snapshot_id=snap.snapshot_id)
        return None
    except UnsupportedError:
        raise  # readable by others (a codec icectl lacks): not a finding about the table
    except CorruptInputError as e:
        report_unreadable(ctx, LIST_READABLE, snap.manifest_list, e, entry=f"snapshot {snap.snapshot_id}",
                          what=f"snapshot {snap.snapshot_id}'s manifest list", snapshot_id=snap.snapshot_id)
        return None


def is_relative(ctx: Context, path: str) -> bool:
    """A relative path where the format wants an absolute one (before v4; v4 resolves it against the location)."""
    return ctx.metadata.format_version < 4 and is_relative_path(path)


def report_unreadable(ctx: Context, r: Rule, path: str | None, e: IcectlError, *, entry: str | None, what: str,
                      **values: Any) -> None:
    """A file that does not decode, as a finding naming it (validation goes on with the rest)."""
    reason = e.message.replace(f" in {path}", "") if path else e.message
    ctx.reporter.report(r, path, f"{what} cannot be read: {reason}", entry=entry, error=reason, **values)


def check_manifest_file(ctx: Context, list_path: str | None, m: ManifestFile, ordinal: int) -> bool:
    """Existence, length and spec of one listed manifest; False when its entries cannot be read."""
    rep = ctx.reporter
    entry = f"{list_path}#{ordinal}"
    if is_relative(ctx, m.manifest_path):
        rep.report(ABSOLUTE_PATHS, list_path, f"manifest {m.manifest_path!r} is named by a relative path",
                   entry=entry, manifest_path=m.manifest_path)
        return False
    try:
        size = ctx.io.size(m.manifest_path)
    except (NotFoundError, FileNotFoundError):
        rep.report(MANIFEST_EXISTS, list_path, f"manifest {m.manifest_path} is missing", entry=entry,
                   manifest_path=m.manifest_path)
        return False
    if size != m.manifest_length:
        rep.report(MANIFEST_LENGTH, list_path, f"manifest {m.manifest_path} is {size} bytes, the list says "
                   f"{m.manifest_length}", entry=entry, manifest_length=m.manifest_length, actual=size)
    if ctx.metadata.spec_by_id(m.partition_spec_id) is None:
        rep.report(SPEC_EXISTS, list_path, f"manifest {m.manifest_path} has partition_spec_id "
                   f"{m.partition_spec_id}, which the table lacks", entry=entry, partition_spec_id=m.partition_spec_id)
        return False
    return True


@dataclass(frozen=True)
class ListRules:
    """The rules a listed manifest's row is checked under (a v4 root entry's manifest_stats has its own)."""

    counts: Rule = COUNTS
    min_sequence_number: Rule = MIN_SEQUENCE_NUMBER
    content: Rule = CONTENT


def check_against_entries(ctx: Context, list_path: str | None, m: ManifestFile, ordinal: int,
                          totals: EntryTotals, ptype: StructType, manifest_content: str | None,
                          rules: ListRules | None = None) -> None:
    """The list row against what the manifest itself holds."""
    rep = ctx.reporter
    rules = rules or ListRules()
    entry = f"{list_path}#{ordinal}"
    names = (("added", ManifestEntryStatus.ADDED), ("existing", ManifestEntryStatus.EXISTING),
             ("deleted", ManifestEntryStatus.DELETED))
    for word, status in names:
        for kind, counted in (("files", totals.files[status]), ("rows", totals.rows[status])):
            listed = getattr(m, f"{word}_{kind}_count")
            if listed is not None and listed != counted:
                rep.report(rules.counts, list_path, f"manifest {m.manifest_path}: {word}_{kind}_count is {listed}, "
                           f"the entries have {counted}", entry=entry, field=f"{word}_{kind}_count",
                           listed=listed, actual=counted)
    if ctx.metadata.format_version >= 2 and totals.min_live_sequence_number is not None \
            and m.min_sequence_number != totals.min_live_sequence_number:
        rep.report(rules.min_sequence_number, list_path, f"manifest {m.manifest_path}: min_sequence_number is "
                   f"{m.min_sequence_number}, the live entries' lowest is {totals.min_live_sequence_number}",
                   entry=entry, listed=m.min_sequence_number, actual=totals.min_live_sequence_number)
    if manifest_content is not None:
        expected = "data" if m.content == ManifestContent.DATA else "deletes"
        if manifest_content != expected:
            rep.report(rules.content, list_path, f"manifest {m.manifest_path}: the list says content {expected}, the "
                       f"manifest's metadata says {manifest_content}", entry=entry, listed=expected,
                       manifest=manifest_content)
    _summaries(ctx, list_path, m, entry, totals, ptype)


def _summaries(ctx: Context, list_path: str | None, m: ManifestFile, entry: str, totals: EntryTotals,
               ptype: StructType) -> None:
    if m.partitions is None:
        return
    rep = ctx.reporter
    if len(m.partitions) != len(ptype.fields):
        rep.report(PARTITION_SUMMARIES, list_path, f"manifest {m.manifest_path} has {len(m.partitions)} partition "
                   f"summaries for {len(ptype.fields)} partition fields", entry=entry,
                   summaries=len(m.partitions), fields=len(ptype.fields))
        return
    for summary, stats, pf in zip(m.partitions, totals.partitions, ptype.fields, strict=False):
        problems: list[str] = []
        if stats.has_null and not summary.contains_null:
            problems.append("contains_null is false but an entry's value is null")
        if stats.has_nan and summary.contains_nan is False:
            problems.append("contains_nan is false but an entry's value is NaN")
        lower = from_bytes_or_none(pf.field_type, summary.lower_bound)
        upper = from_bytes_or_none(pf.field_type, summary.upper_bound)
        try:
            if stats.lower is not None and (lower is None or stats.lower < lower):
                problems.append(f"lower_bound {lower!r} is above the value {stats.lower!r}")
            if stats.upper is not None and (upper is None or stats.upper > upper):
                problems.append(f"upper_bound {upper!r} is below the value {stats.upper!r}")
        except TypeError:
            problems.append("bounds do not compare with the values")
        for p in problems:
            rep.report(PARTITION_SUMMARIES, list_path, f"manifest {m.manifest_path} partition field {pf.name!r}: {p}",
                       entry=entry, field=pf.name, lower_bound=lower, upper_bound=upper,
                       min_value=stats.lower, max_value=stats.upper)


@dataclass
class Listing:
    """The lowest-sequence-number snapshot that lists a manifest: the bound every listing must meet."""

    sequence_number: int
    snapshot: Snapshot
    ordinal: int
    manifest: ManifestFile


def note_listings(snap: Snapshot, manifests: list[ManifestFile], lowest: dict[str, Listing]) -> None:
    """Remember, per manifest, the listing snapshot with the lowest sequence number (checked once at the end:
    a bound met by the lowest listing snapshot is met by all)."""
    seq = snap.sequence_number
    for i, m in enumerate(manifests):
        seen = lowest.get(m.manifest_path)
        if seen is None or seq < seen.sequence_number:
            lowest[m.manifest_path] = Listing(seq, snap, i, m)


def check_sequence_bounds(ctx: Context, lowest: dict[str, Listing]) -> None:
    if ctx.metadata.format_version < 2:
        return
    for listing in lowest.values():
        m, snap = listing.manifest, listing.snapshot
        if m.sequence_number > snap.sequence_number:
            path = snap.manifest_list
            ctx.reporter.report(SEQUENCE_NUMBER, path, f"manifest {m.manifest_path} has sequence_number "
                                f"{m.sequence_number} above snapshot {snap.snapshot_id}'s {snap.sequence_number}",
                                entry=f"{path}#{listing.ordinal}", sequence_number=m.sequence_number,
                                snapshot_sequence_number=snap.sequence_number)


def check_snapshot_list(ctx: Context, snap: Snapshot, manifests: list[ManifestFile]) -> None:
    """Rules over one snapshot's whole list: its own manifests' sequence numbers, row-id ranges."""
    rep, md = ctx.reporter, ctx.metadata
    path = snap.manifest_list
    if md.format_version >= 2:
        sid, seq = snap.snapshot_id, snap.sequence_number
        for i, m in enumerate(manifests):
            if m.added_snapshot_id == sid and m.sequence_number != seq:
                rep.report(SEQUENCE_NUMBER, path, f"manifest {m.manifest_path} added by snapshot {sid} has "
                           f"sequence_number {m.sequence_number}, not the snapshot's {seq}", entry=f"{path}#{i}",
                           sequence_number=m.sequence_number, snapshot_sequence_number=seq)
    if md.format_version < 3 or snap.first_row_id is None:
        return
    # Every row id the snapshot's live data files have: the ids each manifest hands out by
    # inheritance (rows of files written without a first_row_id; a compaction's manifest, whose
    # files all kept theirs, hands out none) and the ids files carry themselves. No two may meet.
    ranges: list[tuple[int, int, int]] = []
    for i, m in enumerate(manifests):
        if m.content != ManifestContent.DATA:
            continue
        if m.first_row_id is None:
            rep.report(FIRST_ROW_ID, path, f"data manifest {m.manifest_path} has no first_row_id in a v3 snapshot",
                       entry=f"{path}#{i}", first_row_id=None)
            continue
        summary = ctx.summaries.get(m.manifest_path)
        if summary is None:  # unreadable (reported elsewhere): the list's counts stand in
            rows = (m.added_rows_count or 0) + (m.existing_rows_count or 0)
            explicit: list[tuple[int, int]] = []
        else:
            rows, explicit = summary.inherited_rows, summary.explicit_row_ids
        if rows:
            ranges.append((m.first_row_id, m.first_row_id + rows, i))
        ranges.extend((start, end, i) for start, end in explicit)
    ranges.sort()
    reported: set[int] = set()
    widest: tuple[int, int, int] | None = None  # the range reaching furthest so far
    for b_start, b_end, b_i in ranges:
        if widest is not None and b_start < widest[1] and b_i not in reported:
            a_start, a_end, a_i = widest
            reported.add(b_i)
            rep.report(FIRST_ROW_ID, path, f"row ids [{b_start}, {b_end}) of {manifests[b_i].manifest_path} "
                       f"overlap [{a_start}, {a_end}) of {manifests[a_i].manifest_path}", entry=f"{path}#{b_i}",
                       range=[b_start, b_end], overlaps=[a_start, a_end])
        if widest is None or b_end > widest[1]:
            widest = (b_start, b_end, b_i)
