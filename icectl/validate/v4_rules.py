"""Rules of icectl's v4 layout: root manifests, v4 leaves and manifest delete vectors.

The layout is the "Single File Commits" proposal made exact by the project's layout page
(``v4-layout.md``); rule sections name the page's sections ("Layout 3") or the proposal's
headings. A v4 snapshot is checked through its root: the root's own rules, then each leaf it
lists (read once however many roots list it; v1-v3 leaves by the v1-v3 manifest rules, v4
leaves by the same entry rules on their decoded entries), then the per-snapshot rules with each
leaf's live manifest DV applied (manifest DV rules: :mod:`icectl.validate.v4_manifest_dvs`).
Rules of v1-v3 that mean the same thing on a v4 tree report under their own ids (a root's
manifest entry naming a missing leaf is ``manifest-list.manifest-exists``, a root-level DV whose
blob does not match is ``deletes.dv-blob-matches``, ...), with the root as the file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from icectl.codec.manifest_reader import read_manifest_metadata
from icectl.codec.v4_manifest import is_parquet
from icectl.codec.v4_proposal import read_v4_manifest, v4_format_version
from icectl.errors import CorruptInputError, IcectlError, NotFoundError, UnsupportedError
from icectl.spec.manifest import (
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    inherit_from_manifest,
)
from icectl.spec.schema import IcebergType
from icectl.spec.snapshots import Snapshot
from icectl.spec.v4_proposal import (
    DATA,
    DELETES,
    FILE_TYPES,
    PUFFIN,
    ROOT,
    ContentEntry,
    ContentType,
    data_file_of,
    manifest_entry_of,
    with_inherited,
)
from icectl.spec.values import from_bytes
from icectl.table.scan_v4 import partition_field_types
from icectl.threads import ordered_map
from icectl.validate import delete_rules, manifest_rules, v4_spec_rules
from icectl.validate.context import Context, LiveFile, ManifestSummary
from icectl.validate.manifest_list_rules import (
    LIST_READABLE,
    SPEC_EXISTS,
    EntryTotals,
    Listing,
    ListRules,
    PartitionStats,
    check_against_entries,
    check_manifest_file,
    report_unreadable,
)
from icectl.validate.manifest_rules import bound_less
from icectl.validate.rules import Reporter, Severity, entry_name, rule
from icectl.validate.v4_manifest_dvs import manifest_dvs, without

E, W = Severity.ERROR, Severity.WARNING

SNAPSHOT_KEY = rule("v4.snapshot-manifest-key", E,
                    "a snapshot has exactly one of manifest-list and root-manifest; root-manifest only in v4 tables, "
                    "and a snapshot whose parent has a root has one too", "Layout 1; Root Manifests")
ROOT_EXISTS = rule("v4.root-exists", E, "every v4 snapshot's root manifest exists", "Layout 1; Root Manifests")
MANIFEST_METADATA = rule("v4.manifest-metadata", E,
                         "a v4 manifest's key-value metadata has format-version 4 and content root (a root) or "
                         "data/deletes (a leaf)", "Layout 2; V4 Manifest Key Value Metadata")
ROOT_SNAPSHOT_KEYS = rule("v4.root-snapshot-keys", W,
                          "a root's snapshot-id, sequence-number and parent-snapshot-id keys (icectl writes them for "
                          "humans; readers use the table metadata), when present, are its snapshot's", "Layout 2")
CONTENT_TYPES = rule("v4.content-types", E,
                     "content types by level: 3, 4 and 5 only in a root; a data leaf holds only DATA, a delete leaf "
                     "only POSITION_DELETE/EQUALITY_DELETE, as its root entry's type says; no root is a leaf "
                     "(depth 2)", "Layout 2, 3 (content_type); Root Manifests")
MANIFEST_STATS = rule("v4.manifest-stats", E, "manifest_stats is set exactly for DATA_MANIFEST and "
                      "DELETE_MANIFEST entries", "Layout 3 (manifest_stats)")
MANIFEST_STATS_MATCH = rule("v4.manifest-stats-match", E,
                            "a manifest entry's manifest_stats (file and row counts by status, min_sequence_number) "
                            "equal its leaf's entries", "Layout 3, 8; V4 content entry structure")
CONTENT_STATS = rule("v4.content-stats", E,
                     "content_stats is set on data file and manifest entries (a manifest's: aggregated over its "
                     "leaf)", "Layout 4; Root Manifests (all stats present)")
CONTENT_STATS_BOUNDS = rule("v4.content-stats-bounds", E,
                            "a manifest entry's content_stats bounds cover its leaf's live entries (lower bound <= "
                            "theirs, upper bound >= theirs)", "Layout 4")
DELETION_VECTOR = rule("v4.deletion-vector", E,
                       "deletion_vector is set exactly for manifest DVs and DVs (POSITION_DELETE in Puffin), "
                       "whose file_format is puffin", "Layout 3 (deletion_vector)")
ENTRY_FIELDS = rule("v4.entry-fields", E,
                    "per-type fields: file_size_in_bytes always; partition null for manifests and manifest DVs; "
                    "sort_order_id only on DATA; equality_ids exactly on EQUALITY_DELETE; referenced_file on DVs; "
                    "split_offsets ascending", "Layout 3")
VERSION_INFO = rule("v4.version-info", E,
                    "EXISTING and DELETED entries carry snapshot_id, sequence_number and file_sequence_number",
                    "Layout 6; V4 content entry version_info struct")
SEQUENCE_NUMBERS = rule("v4.sequence-numbers", E,
                        "root entries: sequence numbers <= the snapshot's; sequence_number = file_sequence_number "
                        "for manifests; an ADDED entry's file_sequence_number is the snapshot's",
                        "Layout 3 (version_info), 6; Sequence Numbers")
DELETED_PARENT = rule("v4.deleted-needs-parent", E,
                      "a root has DELETED entries only when its snapshot has a parent",
                      "V4 content entry version_info struct (status)")
FIRST_ROW_IDS = rule("v4.first-row-ids", E,
                     "live root-level data files and data manifests have a first_row_id, and the row-id ranges of "
                     "a root do not overlap", "Layout 3 (first_row_id), 6; Row Lineage")

# A root's manifest entries compare with their leaves under v4 ids.
LEAF_RULES = ListRules(counts=MANIFEST_STATS_MATCH, min_sequence_number=MANIFEST_STATS_MATCH, content=CONTENT_TYPES)
_KIND = {DATA: ManifestContent.DATA, DELETES: ManifestContent.DELETES}


@dataclass
class V4State:
    """Per run: leaves checked (with their 'content' key), the lowest-sequence root listing each leaf,
    and --deep's live files."""

    leaves: dict[str, str | None] = field(default_factory=dict)
    lowest: dict[str, Listing] = field(default_factory=dict)
    files: dict[str, LiveFile] = field(default_factory=dict)
    roots: int = 0
    entries: int = 0


# --------------------------------------------------------------------------- snapshots (metadata JSON)


def check_raw_snapshots(rep: Reporter, raw: Any, path: str) -> None:
    """Which of manifest-list/root-manifest each snapshot has (on the JSON: the model keeps both)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("snapshots"), list):
        return
    version = raw.get("format-version")
    snaps = [s for s in raw["snapshots"] if isinstance(s, dict)]
    has_root = {s.get("snapshot-id"): s.get("root-manifest") is not None for s in snaps}
    for i, s in enumerate(raw["snapshots"]):
        if not isinstance(s, dict):
            continue
        sid, where = s.get("snapshot-id"), f"snapshots[{i}]"
        listed = s.get("manifest-list") is not None or s.get("manifests") is not None
        rooted = s.get("root-manifest") is not None
        problem = None
        if rooted and isinstance(version, int) and version < 4:
            problem = f"has root-manifest in a format v{version} table"
        elif rooted and listed:
            problem = "has both manifest-list and root-manifest"
        elif listed and has_root.get(s.get("parent-snapshot-id")):
            problem = f"has a manifest list but its parent {s.get('parent-snapshot-id')} has a root manifest"
        if problem:
            rep.report(SNAPSHOT_KEY, path, f"snapshot {sid} {problem}", entry=where, snapshot_id=sid,
                       manifest_list=s.get("manifest-list"), root_manifest=s.get("root-manifest"))


# --------------------------------------------------------------------------- entry rules shared by roots and leaves


def _is_dv(e: ContentEntry) -> bool:
    return e.is_manifest_dv or (e.content_type == ContentType.POSITION_DELETE
                                and (e.file_format or "").lower() == PUFFIN)


def _entry_rules(ctx: Context, e: ContentEntry, path: str, i: int, level: str) -> None:
    """Field-presence rules of one raw (not inherited) entry of a root or a v4 leaf."""
    rep, where = ctx.reporter, entry_name(path, i)
    what = f"{e.content_type.name} entry {e.location}"
    allowed = (FILE_TYPES | {ContentType.DATA_MANIFEST, ContentType.DELETE_MANIFEST, ContentType.MANIFEST_DV}
               if level == ROOT else {DATA: {ContentType.DATA},
                                      DELETES: {ContentType.POSITION_DELETE, ContentType.EQUALITY_DELETE}}[level])
    if e.content_type not in allowed:
        rep.report(CONTENT_TYPES, path, f"{what} in a '{level}' manifest", entry=where,
                   content_type=e.content_type.name, level=level)
    if (e.manifest_stats is not None) != e.is_manifest:
        rep.report(MANIFEST_STATS, path, f"{what} {'lacks' if e.is_manifest else 'has'} manifest_stats", entry=where,
                   content_type=e.content_type.name, manifest_stats=e.manifest_stats is not None)
    if e.content_stats is None and (e.is_manifest or e.content_type == ContentType.DATA):
        rep.report(CONTENT_STATS, path, f"{what} has no content_stats", entry=where,
                   content_type=e.content_type.name)
    dv = _is_dv(e)
    if (e.deletion_vector is not None) != dv or (e.is_manifest_dv and (e.file_format or "").lower() != PUFFIN):
        rep.report(DELETION_VECTOR, path, f"{what} (file_format {e.file_format}) "
                   f"{'has' if e.deletion_vector is not None else 'lacks'} deletion_vector", entry=where,
                   content_type=e.content_type.name, file_format=e.file_format,
                   deletion_vector=e.deletion_vector is not None)
    problems = []
    if e.file_size_in_bytes is None:
        problems.append("file_size_in_bytes is null")
    if e.partition is not None and not e.is_file:
        problems.append("partition is set")
    if e.sort_order_id is not None and e.content_type != ContentType.DATA:
        problems.append("sort_order_id is set")
    if (e.equality_ids is not None) != (e.content_type == ContentType.EQUALITY_DELETE):
        problems.append("equality_ids is " + ("set" if e.equality_ids is not None else "null"))
    if dv and e.referenced_file is None:
        problems.append("referenced_file is null")
    if e.split_offsets is not None and list(e.split_offsets) != sorted(e.split_offsets):
        problems.append("split_offsets are not ascending")
    for p in problems:
        rep.report(ENTRY_FIELDS, path, f"{what}: {p}", entry=where, content_type=e.content_type.name, problem=p)
    vi = e.version_info
    if vi.status != ManifestEntryStatus.ADDED and None in (vi.snapshot_id, vi.sequence_number,
                                                          vi.file_sequence_number):
        rep.report(VERSION_INFO, path, f"{vi.status.name} {what} lacks an explicit snapshot_id or sequence number",
                   entry=where, status=vi.status.name, snapshot_id=vi.snapshot_id,
                   sequence_number=vi.sequence_number, file_sequence_number=vi.file_sequence_number)


def _metadata_rules(ctx: Context, kv: dict[str, str], path: str, level: str, snap: Snapshot | None) -> bool:
    """The key-value metadata of a root (``snap`` given) or a v4 leaf; False when entries cannot be decoded."""
    rep = ctx.reporter
    content = kv.get("content")
    if kv.get("format-version") != "4" or content not in (ROOT, DATA, DELETES):
        rep.report(MANIFEST_METADATA, path, f"v4 {level} manifest has format-version {kv.get('format-version')!r} "
                   f"and content {content!r}", key="content", format_version=kv.get("format-version"),
                   content=content)
        return False
    if (level == ROOT) != (content == ROOT):
        rule_ = MANIFEST_METADATA if level == ROOT else CONTENT_TYPES
        rep.report(rule_, path, f"a {level} manifest has content {content!r}", key="content", content=content)
    if snap is not None:
        expected = {"snapshot-id": str(snap.snapshot_id), "sequence-number": str(snap.sequence_number),
                    "parent-snapshot-id": "null" if snap.parent_snapshot_id is None else str(snap.parent_snapshot_id)}
        for key, value in expected.items():
            if key in kv and kv[key] != value:
                rep.report(ROOT_SNAPSHOT_KEYS, path, f"root says {key} {kv[key]}, its snapshot {snap.snapshot_id} "
                           f"has {value}", key=key, manifest=kv[key], snapshot=value)
    return True


def _manifest_file(e: ContentEntry) -> ManifestFile:
    """The manifest-list row a root's manifest entry (inheritance applied) stands for."""
    ms, vi = e.manifest_stats, e.version_info
    counts: dict[str, Any] = dataclasses.asdict(ms) if ms is not None else {}
    min_seq = counts.pop("min_sequence_number", vi.sequence_number or 0)
    return ManifestFile(
        manifest_path=e.location, manifest_length=e.file_size_in_bytes or 0, partition_spec_id=e.partition_spec_id,
        content=ManifestContent.DATA if e.content_type == ContentType.DATA_MANIFEST else ManifestContent.DELETES,
        sequence_number=vi.sequence_number or 0, min_sequence_number=min_seq, added_snapshot_id=vi.snapshot_id,
        key_metadata=e.key_metadata, first_row_id=e.first_row_id, **counts)


def _check_v4_leaf(ctx: Context, root: str, ordinal: int, m: ManifestFile, kv: dict[str, str],
                   data: bytes) -> ManifestSummary:
    md = ctx.metadata
    path = m.manifest_path
    summary = ManifestSummary(m)
    declared = kv.get("content", "")
    level = declared if declared in (DATA, DELETES) else (
        DATA if m.content == ManifestContent.DATA else DELETES)
    if not _metadata_rules(ctx, kv, path, level, None) or kv.get("content") == ROOT:
        return summary
    try:
        leaf = read_v4_manifest(data, partition_types=partition_field_types(md))
    except IcectlError as err:
        raise err.in_file(path) from None
    ptype = md.partition_type(m.partition_spec_id)
    spec = md.spec_by_id(m.partition_spec_id)
    assert spec is not None  # checked by check_manifest_file
    totals = EntryTotals(partitions=[PartitionStats() for _ in ptype.fields])
    checker = manifest_rules.EntryChecker(ctx, m, spec, ptype, md.schema(), summary, totals, explicit=None)
    next_row_id = m.first_row_id if m.content == ManifestContent.DATA else None
    for j, e in enumerate(leaf.entries):
        _entry_rules(ctx, e, path, j, level)
        if not e.is_file:
            continue
        if e.partition_spec_id != m.partition_spec_id:
            ctx.reporter.report(manifest_rules.SPEC_ID, path, f"entry {e.location} has partition_spec_id "
                                f"{e.partition_spec_id}, its root entry says {m.partition_spec_id}",
                                entry=entry_name(path, j), manifest=e.partition_spec_id, listed=m.partition_spec_id)
        vi = e.version_info
        content = DataFileContent(int(e.content_type))
        inherited = inherit_from_manifest(
            m, status=vi.status, content=content, snapshot_id=vi.snapshot_id, sequence_number=vi.sequence_number,
            file_sequence_number=vi.file_sequence_number, first_row_id=e.first_row_id,
            record_count=e.record_count, next_row_id=next_row_id)
        next_row_id = inherited.next_row_id
        checker.check(j, ManifestEntry(vi.status, inherited.snapshot_id, inherited.sequence_number,
                                       inherited.file_sequence_number, data_file_of(e, ptype)))
        if content == DataFileContent.DATA and e.is_live:
            if e.first_row_id is None:
                summary.inherited_rows += e.record_count
            else:
                summary.explicit_row_ids.append((e.first_row_id, e.first_row_id + e.record_count))
    summary.entries = len(leaf.entries)  # every row counts for manifest DV positions
    check_against_entries(ctx, root, m, ordinal, totals, ptype, kv.get("content"), LEAF_RULES)
    summary.totals = totals
    return summary


def _read_leaves(ctx: Context, todo: list[tuple[int, ManifestFile]]) -> Iterator[tuple[int, ManifestFile, bytes]]:
    """Leaves' bytes, read a few ahead in threads."""
    for (i, m), data in zip(todo, ordered_map(lambda t: ctx.io.read(t[1].manifest_path), todo), strict=True):
        yield i, m, data


def _check_leaf(ctx: Context, state: V4State, root: str, i: int, m: ManifestFile, data: bytes) -> None:
    try:
        kv = read_manifest_metadata(data)
        version = v4_format_version(kv)
        summary = (_check_v4_leaf(ctx, root, i, m, kv, data) if version >= 4
                   else manifest_rules.check_manifest(ctx, root, m, i, data, LEAF_RULES))
    except UnsupportedError as err:
        raise err.in_file(m.manifest_path) from None
    except CorruptInputError as err:  # a finding; the other leaves are still checked
        report_unreadable(ctx, manifest_rules.READABLE, m.manifest_path, err, entry=f"{root}#{i}",
                          what=f"leaf {m.manifest_path}", manifest_path=m.manifest_path)
        return
    if summary is None:  # unreadable, reported
        return
    ctx.summaries[m.manifest_path] = summary
    state.leaves[m.manifest_path] = kv.get("content")


# --------------------------------------------------------------------------- roots


def check_root_snapshot(ctx: Context, state: V4State, snap: Snapshot,
                        data: bytes | NotFoundError | None) -> None:
    """Every v4 rule of one snapshot: its root, the leaves no earlier root listed, the per-snapshot rules."""
    md, rep = ctx.metadata, ctx.reporter
    root = snap.root_manifest or ""
    if data is None:
        try:
            data = ctx.io.read(root)
        except NotFoundError as err:
            data = err
    if isinstance(data, NotFoundError):
        rep.report(ROOT_EXISTS, root, f"snapshot {snap.snapshot_id}'s root manifest is missing ({data.message})",
                   entry=f"snapshot {snap.snapshot_id}", snapshot_id=snap.snapshot_id)
        return
    if is_parquet(data):  # the merged spec's layout
        state.roots += 1
        state.entries += v4_spec_rules.check_spec_root(ctx, snap, data)
        return
    rep.report(v4_spec_rules.SPEC_LAYOUT, root, f"snapshot {snap.snapshot_id}'s root is in icectl's earlier v4 "
               "layout (the proposal); run 'icectl upgrade --to 4' to rewrite it", entry=f"snapshot {snap.snapshot_id}")
    try:
        kv = read_manifest_metadata(data)
        if not _metadata_rules(ctx, kv, root, ROOT, snap):
            return
        raw = read_v4_manifest(data, partition_types=partition_field_types(md)).entries
    except UnsupportedError as err:
        raise err.in_file(root) from None
    except CorruptInputError as err:  # a finding; the other snapshots are still checked
        report_unreadable(ctx, LIST_READABLE, root, err, entry=f"snapshot {snap.snapshot_id}",
                          what=f"snapshot {snap.snapshot_id}'s root manifest", snapshot_id=snap.snapshot_id)
        return
    except IcectlError as err:
        raise err.in_file(root) from None
    state.roots += 1
    state.entries += len(raw)
    sid, seq = snap.snapshot_id, snap.sequence_number
    entries = [with_inherited(e, sid, seq) for e in raw]
    for i, (r, e) in enumerate(zip(raw, entries, strict=True)):
        _entry_rules(ctx, r, root, i, ROOT)
        _root_entry_rules(ctx, snap, root, i, r, e)
    leaves = _root_leaves(ctx, state, snap, root, entries)
    dvs = manifest_dvs(ctx, root, entries, leaves)
    groups = _root_files(ctx, snap, root, len(data), entries)
    summaries: list[ManifestSummary] = []
    for path, (i, m) in leaves.items():
        s = ctx.summaries.get(path)
        if s is not None:
            _stats_cover(ctx, root, i, entries[i], s)
            summaries.append(without(s, dvs.get(path)))
            if path not in state.lowest or seq < state.lowest[path].sequence_number:
                state.lowest[path] = Listing(seq, snap, i, m)
    summaries += groups
    delete_rules.check_snapshot_deletes(ctx, snap, [s.manifest for s in summaries], summaries)
    _first_row_ids(ctx, root, entries, summaries)
    if ctx.deep:
        for s in summaries:
            for f in s.live_files:
                state.files.setdefault(f.path, f)


def _column_type(ctx: Context, field_id: int) -> IcebergType | None:
    for schema in (ctx.metadata.schema(), *reversed(ctx.metadata.schemas)):
        t = schema.find_type(field_id)
        if t is not None:
            return t
    return None


def _stats_cover(ctx: Context, root: str, i: int, e: ContentEntry, s: ManifestSummary) -> None:
    """The manifest entry's aggregated bounds against the leaf's live entries' (layout section 4)."""
    totals, cs = s.totals, e.content_stats
    if totals is None or totals.lowers is None or totals.uppers is None or cs is None:
        return  # the bounds rules were skipped, or v4.content-stats says it
    for label, raw, leaf, wrong in (("lower", cs.lower_bounds, totals.lowers, lambda a, b: bound_less(b, a)),
                                    ("upper", cs.upper_bounds, totals.uppers, bound_less)):
        for fid, value in (raw or {}).items():
            t = _column_type(ctx, fid)
            if fid not in leaf or t is None or not t.is_primitive:
                continue
            try:
                mine = from_bytes(t, value)
            except (IcectlError, ValueError):
                mine = None
            if mine is None or wrong(mine, leaf[fid]):
                ctx.reporter.report(CONTENT_STATS_BOUNDS, root, f"{e.content_type.name} entry {e.location}: "
                                    f"{label} bound of column {fid} is {mine!r}, its leaf's live entries reach "
                                    f"{leaf[fid]!r}", entry=entry_name(root, i), field_id=fid, bound=label,
                                    stats=mine, leaf=leaf[fid])


def _root_entry_rules(ctx: Context, snap: Snapshot, root: str, i: int, raw: ContentEntry, e: ContentEntry) -> None:
    rep, where = ctx.reporter, entry_name(root, i)
    vi = e.version_info
    what = f"{e.content_type.name} entry {e.location}"
    if raw.status == ManifestEntryStatus.DELETED and snap.parent_snapshot_id is None:
        rep.report(DELETED_PARENT, root, f"{what} is DELETED in snapshot {snap.snapshot_id}, which has no parent",
                   entry=where, snapshot_id=snap.snapshot_id)
    problems = []
    if e.is_manifest and vi.sequence_number != vi.file_sequence_number:
        problems.append(f"sequence_number {vi.sequence_number} differs from file_sequence_number "
                        f"{vi.file_sequence_number}")
    for name, value in (("sequence_number", vi.sequence_number), ("file_sequence_number", vi.file_sequence_number)):
        if value is not None and value > snap.sequence_number:
            problems.append(f"{name} {value} is above snapshot {snap.snapshot_id}'s {snap.sequence_number}")
    if vi.status == ManifestEntryStatus.ADDED and vi.file_sequence_number not in (None, snap.sequence_number):
        problems.append(f"ADDED with file_sequence_number {vi.file_sequence_number}, not the snapshot's "
                        f"{snap.sequence_number}")
    for p in problems:
        rep.report(SEQUENCE_NUMBERS, root, f"{what}: {p}", entry=where, sequence_number=vi.sequence_number,
                   file_sequence_number=vi.file_sequence_number, snapshot_sequence_number=snap.sequence_number)
    if not e.is_file and vi.status == ManifestEntryStatus.ADDED and vi.snapshot_id != snap.snapshot_id:
        rep.report(manifest_rules.ADDED_SNAPSHOT, root, f"ADDED {what} has snapshot_id {vi.snapshot_id}, the root "
                   f"is snapshot {snap.snapshot_id}'s", entry=where, snapshot_id=vi.snapshot_id,
                   added_snapshot_id=snap.snapshot_id)


def _root_leaves(ctx: Context, state: V4State, snap: Snapshot, root: str,
                 entries: list[ContentEntry]) -> dict[str, tuple[int, ManifestFile]]:
    """Check the root's live leaves (each read once per run); leaf path -> (root ordinal, row)."""
    live: dict[str, tuple[int, ManifestFile]] = {}
    todo: list[tuple[int, ManifestFile]] = []
    for i, e in enumerate(entries):
        if not (e.is_manifest and e.is_live):
            continue
        m = _manifest_file(e)
        if not check_manifest_file(ctx, root, m, i):
            continue
        live[m.manifest_path] = (i, m)
        if m.manifest_path not in state.leaves and m.manifest_path not in ctx.summaries:
            state.leaves[m.manifest_path] = None  # claimed: a root naming it twice reads it once
            todo.append((i, m))
        else:
            _recheck_stats(ctx, state, root, i, m)
    for i, m, data in _read_leaves(ctx, todo):
        _check_leaf(ctx, state, root, i, m, data)
    return live


def _recheck_stats(ctx: Context, state: V4State, root: str, i: int, m: ManifestFile) -> None:
    """A leaf checked before (through another root or a manifest list): this root's row against it."""
    s = ctx.summaries.get(m.manifest_path)
    if s is None or s.totals is None:
        return  # claimed by an earlier entry of this root, or unreadable
    ptype = ctx.metadata.partition_type(m.partition_spec_id)
    check_against_entries(ctx, root, m, i, s.totals, ptype, state.leaves.get(m.manifest_path), LEAF_RULES)


def _root_files(ctx: Context, snap: Snapshot, root: str, size: int,
                entries: list[ContentEntry]) -> list[ManifestSummary]:
    """The entry rules on the root-level data and delete files, grouped by content and spec."""
    md = ctx.metadata
    groups: dict[tuple[ManifestContent, int], list[int]] = {}
    for i, e in enumerate(entries):
        if not e.is_file:
            continue
        if md.spec_by_id(e.partition_spec_id) is None:
            ctx.reporter.report(SPEC_EXISTS, root, f"{e.content_type.name} entry {e.location} has partition_spec_id "
                                f"{e.partition_spec_id}, which the table lacks", entry=entry_name(root, i),
                                partition_spec_id=e.partition_spec_id)
            continue
        kind = ManifestContent.DATA if e.content_type == ContentType.DATA else ManifestContent.DELETES
        groups.setdefault((kind, e.partition_spec_id), []).append(i)
    out = []
    for (kind, spec_id), ordinals in groups.items():
        spec = md.spec_by_id(spec_id)
        assert spec is not None
        ptype = md.partition_type(spec_id)
        m = ManifestFile(manifest_path=root, manifest_length=size, partition_spec_id=spec_id, content=kind,
                         sequence_number=snap.sequence_number, min_sequence_number=snap.sequence_number,
                         added_snapshot_id=snap.snapshot_id)
        summary = ManifestSummary(m)
        totals = EntryTotals(partitions=[PartitionStats() for _ in ptype.fields])
        checker = manifest_rules.EntryChecker(ctx, m, spec, ptype, md.schema(), summary, totals, explicit=None)
        for i in ordinals:
            checker.check(i, manifest_entry_of(entries[i], ptype))
        out.append(summary)
    return out


def _first_row_ids(ctx: Context, root: str, entries: list[ContentEntry], summaries: list[ManifestSummary]) -> None:
    """Row ids of a v4 snapshot: root-level data files carry theirs, data manifests hand out a range."""
    if ctx.metadata.format_version < 3:
        return
    rep = ctx.reporter
    ranges: list[tuple[int, int, int]] = []
    by_leaf = {s.manifest.manifest_path: s for s in summaries}
    for i, e in enumerate(entries):
        if not e.is_live or e.content_type not in (ContentType.DATA, ContentType.DATA_MANIFEST):
            continue
        s = by_leaf.get(e.location) if e.content_type == ContentType.DATA_MANIFEST else None
        if e.first_row_id is None:
            # A root-level file has nothing to inherit from; a leaf needs an id only for rows without one.
            if e.content_type == ContentType.DATA or (s is not None and s.inherited_rows > 0):
                rep.report(FIRST_ROW_IDS, root, f"live {e.content_type.name} entry {e.location} has no "
                           "first_row_id", entry=entry_name(root, i), first_row_id=None)
            if s is not None:
                ranges.extend((start, end, i) for start, end in s.explicit_row_ids)
            continue
        if e.content_type == ContentType.DATA:
            ranges.append((e.first_row_id, e.first_row_id + e.record_count, i))
            continue
        ms = e.manifest_stats
        rows = s.inherited_rows if s is not None else (
            (ms.added_rows_count + ms.existing_rows_count) if ms is not None else 0)
        if rows:
            ranges.append((e.first_row_id, e.first_row_id + rows, i))
        if s is not None:
            ranges.extend((start, end, i) for start, end in s.explicit_row_ids)
    ranges.sort()
    reported: set[int] = set()
    widest: tuple[int, int, int] | None = None
    for start, end, i in ranges:
        if widest is not None and start < widest[1] and i not in reported:
            reported.add(i)
            rep.report(FIRST_ROW_IDS, root, f"row ids [{start}, {end}) of {entries[i].location} overlap "
                       f"[{widest[0]}, {widest[1]}) of {entries[widest[2]].location}", entry=entry_name(root, i),
                       range=[start, end], overlaps=[widest[0], widest[1]])
        if widest is None or end > widest[1]:
            widest = (start, end, i)

