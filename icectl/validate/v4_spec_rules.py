"""The v4 rules of the merged spec (apache/iceberg#16025): roots and leaves as Parquet ``tracked_file``
manifests. Section names are the spec's (``format/spec.md`` v4 text as the shared reference page
reconstructs it); icectl's choices where the text is unsettled are ``codec/v4_schema.py``'s.

A root written in icectl's earlier proposal layout is checked by :mod:`icectl.validate.v4_rules`
and reported once as ``v4.spec-layout`` (run ``icectl upgrade --to 4``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from icectl.codec import v4_schema as ids
from icectl.codec.mumbling import decode_mumbling
from icectl.codec.v4_manifest import is_parquet, read_v4_manifest
from icectl.errors import CorruptInputError, IcectlError, NotFoundError, UnsupportedError
from icectl.spec.manifest import ManifestEntryStatus
from icectl.spec.snapshots import Snapshot
from icectl.spec.tracked_file import (
    FORMAT_VERSION,
    PRE_V4,
    ContentType,
    EntryStatus,
    TrackedFile,
    manifest_file_of,
    manifest_info_of,
    with_inherited,
)
from icectl.table.scan_v4 import column_field_types, partition_field_types, read_leaf
from icectl.validate import manifest_rules
from icectl.validate.context import Context
from icectl.validate.manifest_list_rules import ListRules, check_manifest_file
from icectl.validate.rules import Severity, rule

E, W = Severity.ERROR, Severity.WARNING

SPEC_LAYOUT = rule("v4.spec-layout", W,
                   "v4 roots are Parquet tracked_file manifests as the spec merged them; a root in icectl's earlier "
                   "proposal layout (Avro) is read but should be rewritten with 'icectl upgrade --to 4'",
                   "Manifests (v4: Parquet); Appendix E")
SPEC_READABLE = rule("v4.spec-readable", E,
                     "a v4 root or leaf reads whole by Parquet field id: every field has an id, no two share one, "
                     "content types and statuses are defined ones, required fields are set",
                     "Manifest Schema; tracked_file")
SPEC_KV = rule("v4.spec-kv-metadata", E,
               "a v4 manifest's key-value metadata has schema-id (a schema of the table) and format-version 4",
               "Manifests: key-value metadata")
SPEC_CONTENT_TYPES = rule("v4.spec-content-types", E,
                          "a root holds data files (0) and manifest references (3, 4); a v4 leaf holds data files "
                          "only; no position deletes (1) or equality deletes (2) in a v4 manifest",
                          "Manifests (manifest types); Equality deletes (prohibited in v4)")
SPEC_MANIFEST_INFO = rule("v4.spec-manifest-info", E,
                          "manifest_info is set exactly on manifest references, its format_version is 0 (a v1-v3 "
                          "manifest, Avro) or 4 (a v4 leaf, Parquet), and a v4 leaf's counts equal its rows",
                          "tracked_file (manifest_info)")
SPEC_TRACKING = rule("v4.spec-tracking", E,
                     "root rows carry snapshot_id and both sequence numbers (at most the snapshot's), EXISTING/"
                     "DELETED/REPLACED/MODIFIED rows everywhere too; a manifest's sequence_number equals its "
                     "file_sequence_number", "Inheritance; tracking")
SPEC_FIRST_ROW_ID = rule("v4.spec-first-row-id", E,
                         "live data files in a root and v4 data leaves carry first_row_id, and live root ranges do "
                         "not overlap", "First Row ID Assignment (v4)")
SPEC_COLOCATED_DV = rule("v4.spec-colocated-dv", E,
                         "a deletion_vector is only on a data file, its cardinality is between 1 and the file's "
                         "record_count", "deletion_vector; Applying deletes")
SPEC_MANIFEST_DV = rule("v4.spec-manifest-dv", E,
                        "manifest_info.dv is a valid Mumbling bitmap of positions below the leaf's row count; "
                        "deleted_positions and replaced_positions are disjoint subsets of it; a MODIFIED manifest "
                        "entry's modified_snapshot_id is its snapshot", "Manifest deletion vectors; Mumbling")
SPEC_NO_NEW_DELETES = rule("v4.spec-no-new-deletes", E,
                           "no position delete file, DV entry or equality delete file is added by a v4 snapshot: "
                           "the rows of carried-over v1-v3 delete manifests were added before the upgrade",
                           "Deletion vectors (v4: colocated); Equality deletes (prohibited in v4)")
SPEC_UNIQUE = rule("v4.spec-one-live-entry", E,
                   "each file has at most one live entry in a snapshot (root rows and leaf rows outside the manifest "
                   "DV)", "Content file uniqueness")


def check_spec_root(ctx: Context, snap: Snapshot, data: bytes) -> int:
    """Every spec rule of one v4 snapshot's root and its v4 leaves; returns the root's row count."""
    md, rep = ctx.metadata, ctx.reporter
    root = snap.root_manifest or ""
    where = f"snapshot {snap.snapshot_id}"
    try:
        decoded = read_v4_manifest(data, partition_types=partition_field_types(md),
                                   column_types=column_field_types(md), root=True)
    except UnsupportedError as err:
        raise err.in_file(root) from None
    except CorruptInputError as err:
        rule_ = SPEC_CONTENT_TYPES if "cannot hold" in err.message or "content_type" in err.message else SPEC_READABLE
        rep.report(rule_, root, f"{where}'s root manifest cannot be read: {err.message}", entry=where,
                   snapshot_id=snap.snapshot_id)
        return 0
    _kv_rules(ctx, root, decoded.metadata)
    rows = [with_inherited(e, snap.snapshot_id, snap.sequence_number) for e in decoded.entries]
    live: Counter[str] = Counter()
    ranges: list[tuple[int, int, str]] = []
    for i, (raw, e) in enumerate(zip(decoded.entries, rows, strict=True)):
        entry = f"{root}#{i}"
        _tracking_rules(ctx, snap, root, entry, raw)
        _row_rules(ctx, root, entry, e)
        if e.is_live and e.content_type == ContentType.DATA:
            live[e.location] += 1
            if e.tracking.first_row_id is None:
                rep.report(SPEC_FIRST_ROW_ID, root, f"live data file {e.location} in the root has no first_row_id",
                           entry=entry)
            else:
                ranges.append((e.tracking.first_row_id, e.tracking.first_row_id + e.record_count, e.location))
        if e.is_manifest and e.is_live and e.manifest_info is not None:  # no manifest_info: reported above
            live.update(_check_leaf(ctx, snap, root, entry, e))
            # A leaf's range is not checked here: its rows may carry their own, not contiguous, row ids.
    ranges.sort()
    reach = (-1, "")  # the furthest end so far, and whose: a long range can overlap several after it
    for start, end, name in ranges:
        if start < reach[0]:
            rep.report(SPEC_FIRST_ROW_ID, root, f"row ids of {name} (from {start}) overlap those of {reach[1]} "
                       f"(to {reach[0]})", entry=where)
        if end > reach[0]:
            reach = (end, name)
    for path, n in live.items():
        if n > 1:
            rep.report(SPEC_UNIQUE, root, f"{path} has {n} live entries in {where}", entry=where, file_path=path)
    return len(rows)


def _kv_rules(ctx: Context, path: str, kv: dict[str, str]) -> None:
    rep = ctx.reporter
    if kv.get(ids.KV_FORMAT_VERSION) != str(FORMAT_VERSION):
        rep.report(SPEC_KV, path, f"format-version is {kv.get(ids.KV_FORMAT_VERSION)!r}, expected '4'",
                   key=ids.KV_FORMAT_VERSION, value=kv.get(ids.KV_FORMAT_VERSION))
    sid = kv.get(ids.KV_SCHEMA_ID)
    if sid is None or not sid.lstrip("-").isdigit() or ctx.metadata.schema_by_id(int(sid)) is None:
        rep.report(SPEC_KV, path, f"schema-id is {sid!r}, not a schema of the table", key=ids.KV_SCHEMA_ID,
                   value=sid)


def _tracking_rules(ctx: Context, snap: Snapshot, root: str, entry: str, e: TrackedFile) -> None:
    t, rep = e.tracking, ctx.reporter
    if e.status != EntryStatus.ADDED and None in (t.snapshot_id, t.sequence_number, t.file_sequence_number):
        rep.report(SPEC_TRACKING, root, f"{e.status.name} row {e.location} lacks snapshot_id or sequence numbers",
                   entry=entry)
    for name, seq in (("sequence_number", t.sequence_number), ("file_sequence_number", t.file_sequence_number)):
        if seq is not None and seq > snap.sequence_number:
            rep.report(SPEC_TRACKING, root, f"{e.location}'s {name} {seq} is above its snapshot's "
                       f"{snap.sequence_number}", entry=entry)
    if e.is_manifest and t.sequence_number != t.file_sequence_number:
        rep.report(SPEC_TRACKING, root, f"manifest {e.location}: sequence_number {t.sequence_number} is not its "
                   f"file_sequence_number {t.file_sequence_number}", entry=entry)


def _row_rules(ctx: Context, path: str, entry: str, e: TrackedFile) -> None:
    rep = ctx.reporter
    if (e.manifest_info is not None) != e.is_manifest:
        rep.report(SPEC_MANIFEST_INFO, path, f"{e.content_type.name} row {e.location}: manifest_info must be set "
                   "exactly on manifest references", entry=entry)
    dv = e.deletion_vector
    if dv is not None and (e.content_type != ContentType.DATA or not 0 < dv.cardinality <= e.record_count):
        rep.report(SPEC_COLOCATED_DV, path, f"{e.location}: deletion vector of cardinality {dv.cardinality} on a "
                   f"{e.content_type.name} row of {e.record_count} records", entry=entry)


def _check_leaf(ctx: Context, snap: Snapshot, root: str, entry: str, e: TrackedFile) -> list[str]:
    """The manifest DV and (v4 leaves) the leaf's own rules; the live data files it holds."""
    rep, info = ctx.reporter, e.manifest_info
    assert info is not None
    if info.format_version not in (PRE_V4, FORMAT_VERSION):
        rep.report(SPEC_MANIFEST_INFO, root, f"{e.location}: manifest_info.format_version is "
                   f"{info.format_version} (0 or 4)", entry=entry)
        return []
    if e.content_type == ContentType.DATA_MANIFEST and info.format_version == FORMAT_VERSION \
            and e.tracking.first_row_id is None:
        rep.report(SPEC_FIRST_ROW_ID, root, f"v4 data leaf {e.location} has no first_row_id", entry=entry)
    dv: set[int] = set()
    try:
        if info.dv is not None:
            dv = set(decode_mumbling(info.dv))
        deleted = set(decode_mumbling(e.tracking.deleted_positions)) if e.tracking.deleted_positions else set()
        replaced = set(decode_mumbling(e.tracking.replaced_positions)) if e.tracking.replaced_positions else set()
    except CorruptInputError as err:
        rep.report(SPEC_MANIFEST_DV, root, f"manifest DV of {e.location}: {err.message}", entry=entry)
        return []
    if deleted & replaced or not (deleted | replaced) <= dv:
        rep.report(SPEC_MANIFEST_DV, root, f"{e.location}: deleted/replaced positions overlap or are not in its "
                   "manifest DV", entry=entry)
    if e.status == EntryStatus.MODIFIED and e.tracking.modified_snapshot_id != snap.snapshot_id:
        rep.report(SPEC_MANIFEST_DV, root, f"{e.location} is MODIFIED in snapshot {snap.snapshot_id} but its "
                   f"modified_snapshot_id is {e.tracking.modified_snapshot_id}", entry=entry)
    if info.format_version == PRE_V4:  # a v1-v3 manifest: existence, length and spec as in a list
        ordinal = int(entry.rsplit("#", 1)[1])
        if not check_manifest_file(ctx, root, manifest_file_of(e), ordinal):
            return []
    try:
        raw = ctx.io.read(e.location)
    except NotFoundError as err:
        rep.report(SPEC_READABLE, root, f"leaf manifest {e.location} is missing ({err.message})", entry=entry,
                   manifest_path=e.location)
        return []
    if info.format_version == PRE_V4:
        if is_parquet(raw):
            rep.report(SPEC_MANIFEST_INFO, root, f"{e.location} is Parquet but format_version 0 says v1-v3 (Avro)",
                       entry=entry)
            return []
        _carried_over(ctx, root, entry, e, raw)
        return []
    if not is_parquet(raw):
        rep.report(SPEC_MANIFEST_INFO, root, f"{e.location} has format_version 4 but is not Parquet", entry=entry)
        return []
    md = ctx.metadata
    try:
        leaf = read_v4_manifest(raw, partition_types=partition_field_types(md), column_types=column_field_types(md),
                                root=False)
    except (CorruptInputError, UnsupportedError) as err:
        r = SPEC_CONTENT_TYPES if "cannot hold" in err.message or "content_type" in err.message else SPEC_READABLE
        rep.report(r, e.location, f"leaf cannot be read: {err.message}", entry=entry)
        return []
    except IcectlError as err:
        raise err.in_file(e.location) from None
    _kv_rules(ctx, e.location, leaf.metadata)
    counts = manifest_info_of(leaf.entries)
    got = (counts.added_files_count, counts.existing_files_count, counts.deleted_files_count)
    want = (info.added_files_count, info.existing_files_count, info.deleted_files_count)
    if got != want:
        rep.report(SPEC_MANIFEST_INFO, root, f"{e.location}: manifest_info file counts {want} are not its rows' {got}",
                   entry=entry)
    if dv and max(dv) >= len(leaf.entries):
        rep.report(SPEC_MANIFEST_DV, root, f"manifest DV of {e.location} has position {max(dv)} past its "
                   f"{len(leaf.entries)} rows", entry=entry)
    out: list[str] = []
    for j, row in enumerate(leaf.entries):
        where: Any = f"{e.location}#{j}"
        if row.status != EntryStatus.ADDED:
            _tracking_rules(ctx, snap, e.location, where, row)
        _row_rules(ctx, e.location, where, row)
        if row.is_live and j not in dv:
            out.append(row.location)
    return out


def _no_new_deletes(ctx: Context, root: str, entry: str, e: TrackedFile, raw: bytes) -> None:
    """A carried-over delete manifest's live rows were all added by snapshots without a root."""
    md = ctx.metadata
    v4_snapshots = {s.snapshot_id for s in md.snapshots if s.root_manifest}
    m = manifest_file_of(e)
    try:
        rows = read_leaf(md, ctx.io, m, md.partition_type(m.partition_spec_id, used_by="v4 entry"), data=raw)
    except IcectlError:
        return  # an unreadable manifest is reported where the tree is read
    for r in rows:
        if r.is_live and r.status == ManifestEntryStatus.ADDED and r.snapshot_id in v4_snapshots:
            ctx.reporter.report(SPEC_NO_NEW_DELETES, root, f"delete file {r.data_file.file_path} is ADDED in "
                                f"{e.location} by v4 snapshot {r.snapshot_id}", entry=entry,
                                file_path=r.data_file.file_path, snapshot_id=r.snapshot_id)


# A carried-over manifest's counts and content are checked against its root entry under the v4 ids.
CARRIED_OVER = ListRules(counts=SPEC_MANIFEST_INFO, min_sequence_number=SPEC_MANIFEST_INFO, content=SPEC_CONTENT_TYPES)


def _carried_over(ctx: Context, root: str, entry: str, e: TrackedFile, raw: bytes) -> None:
    """The v1-v3 rules on a carried-over manifest (each read once per run), and no delete in it added in v4."""
    m = manifest_file_of(e)
    if m.manifest_path not in ctx.summaries:
        summary = manifest_rules.check_manifest(ctx, root, m, int(entry.rsplit("#", 1)[1]), raw, CARRIED_OVER)
        if summary is not None:
            ctx.summaries[m.manifest_path] = summary
    if e.content_type == ContentType.DELETE_MANIFEST:
        _no_new_deletes(ctx, root, entry, e, raw)
