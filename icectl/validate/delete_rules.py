"""Rules on delete files and deletion vectors (spec "Delete Formats", "Deletion Vectors", Puffin spec)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from icectl.codec.puffin import DELETION_VECTOR_V1, decode_deletion_vector
from icectl.errors import IcectlError, NotFoundError
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile
from icectl.spec.schema import Schema
from icectl.spec.snapshots import Snapshot
from icectl.storage.path_arrays import member_mask
from icectl.validate.context import Context, ManifestSummary
from icectl.validate.rules import Severity, rule

if TYPE_CHECKING:
    import pyarrow as pa

E, W = Severity.ERROR, Severity.WARNING

NO_V3_POSITION_FILES = rule("deletes.no-v3-position-delete-files", E,
                            "v3 snapshots add deletion vectors, not position delete files", "Position Delete Files")
DV_BLOB = rule("deletes.dv-blob-matches", E,
               "a DV's referenced_data_file, content_offset and content_size_in_bytes match a "
               "deletion-vector-v1 blob in its Puffin footer", "Deletion Vectors")
DV_PAYLOAD = rule("deletes.dv-blob-valid", E, "a DV blob's length, magic and CRC-32 are valid", "Deletion Vectors")
DV_CARDINALITY = rule("deletes.dv-cardinality", E,
                      "a DV's cardinality (blob and 'cardinality' property) equals its record_count",
                      "Deletion Vectors")
ONE_DV = rule("deletes.one-dv-per-data-file", E, "a snapshot has at most one live DV per data file",
              "Deletion Vectors")
DV_TARGET_LIVE = rule("deletes.dv-target-live", E, "every live DV refers to a live data file of the snapshot",
                      "Deletion Vectors")
POSITION_TARGET_LIVE = rule("deletes.position-delete-target-live", W,
                            "a live position delete file naming one data file names a live one (Java leaves "
                            "such dangling files until they are rewritten)", "Position Delete Files")
DV_VERSION = rule("deletes.dv-format-version", E, "deletion vectors appear only in format v3+ tables",
                  "Deletion Vectors; Appendix E")
DV_REPLACES_POSITION = rule("deletes.dv-replaces-position-deletes", E,
                            "no live position delete file names a data file that has a DV in the same snapshot",
                            "Deletion Vectors")
PUFFIN_READABLE = rule("deletes.puffin-readable", E,
                       "every live DV's Puffin file exists and its footer reads (magic, footer length, footer JSON)",
                       "Deletion Vectors; Puffin file format")
EQUALITY_IDS = rule("deletes.equality-ids", E,
                    "equality delete files list equality_ids, each a primitive column of the schema",
                    "Equality Delete Files")


def check_delete_entry(ctx: Context, e: ManifestEntry, where: str, summary: ManifestSummary, schema: Schema) -> None:
    rep, md, df = ctx.reporter, ctx.metadata, e.data_file
    path = summary.manifest.manifest_path
    if df.content == DataFileContent.POSITION_DELETES and not df.is_dv:
        added_by = md.snapshot_by_id(e.snapshot_id) if e.snapshot_id is not None else None
        # A v3 snapshot carries first-row-id; older snapshots of an upgraded table may add position files.
        if (md.format_version >= 3 and e.status == ManifestEntryStatus.ADDED and added_by is not None
                and added_by.first_row_id is not None):
            rep.report(NO_V3_POSITION_FILES, path, f"v3 snapshot {e.snapshot_id} adds position delete file "
                       f"{df.file_path}", entry=where, snapshot_id=e.snapshot_id, file_format=df.file_format)
        if e.is_live and df.referenced_data_file is not None:
            summary.position_delete_targets.append((df.referenced_data_file, where))
    if df.content == DataFileContent.EQUALITY_DELETES:
        ids = df.equality_ids or ()
        missing = [i for i in ids if not any((s.find_type(i) or schema.find_type(i)) is not None
                                             for s in (schema, *md.schemas))]
        if not ids or missing:
            rep.report(EQUALITY_IDS, path, f"equality delete file {df.file_path} has equality_ids {list(ids)}"
                       + (f"; not in the schema: {missing}" if missing else ""), entry=where,
                       equality_ids=list(ids), missing=missing)
    if df.is_dv and md.format_version < 3:
        rep.report(DV_VERSION, path, f"deletion vector {df.file_path} in a format v{md.format_version} table",
                   entry=where, format_version=md.format_version, file_format=df.file_format)
    if df.is_dv and e.is_live:
        if df.referenced_data_file is not None:
            summary.dv_targets.append((df.referenced_data_file, where))
        _check_dv(ctx, e, where, path)


def _check_dv(ctx: Context, e: ManifestEntry, where: str, path: str) -> None:
    rep, df = ctx.reporter, e.data_file
    if df.referenced_data_file is None or df.content_offset is None or df.content_size_in_bytes is None:
        rep.report(DV_BLOB, path, f"DV {df.file_path} lacks referenced_data_file, content_offset or "
                   "content_size_in_bytes", entry=where, referenced_data_file=df.referenced_data_file,
                   content_offset=df.content_offset, content_size_in_bytes=df.content_size_in_bytes)
        return
    if not rep.any_on(DV_BLOB, DV_PAYLOAD, DV_CARDINALITY, PUFFIN_READABLE):
        return
    footer = ctx.puffin_footer(df.file_path)
    if isinstance(footer, IcectlError):
        what = "does not exist" if isinstance(footer, NotFoundError) else "cannot be read"
        rep.report(PUFFIN_READABLE, df.file_path, f"Puffin file {df.file_path} of the DV for "
                   f"{df.referenced_data_file} {what} ({footer.message})", entry=where, puffin=df.file_path,
                   error=footer.message)
        return
    blob = next((b for b in footer.blobs if b.offset == df.content_offset), None)
    problem = None
    if blob is None:
        problem = f"no blob starts at content_offset {df.content_offset}"
    elif blob.length != df.content_size_in_bytes:
        problem = f"blob at {blob.offset} is {blob.length} bytes, content_size_in_bytes is {df.content_size_in_bytes}"
    elif blob.type != DELETION_VECTOR_V1:
        problem = f"blob at {blob.offset} has type {blob.type!r}"
    elif blob.properties.get("referenced-data-file") != df.referenced_data_file:
        problem = (f"blob's referenced-data-file is {blob.properties.get('referenced-data-file')!r}, the manifest "
                   f"says {df.referenced_data_file!r}")
    if problem or blob is None:
        rep.report(DV_BLOB, path, f"DV {df.file_path}: {problem}", entry=where, puffin=df.file_path,
                   content_offset=df.content_offset, content_size_in_bytes=df.content_size_in_bytes,
                   referenced_data_file=df.referenced_data_file)
        return
    prop = blob.properties.get("cardinality")
    if prop is not None and prop != str(df.record_count):
        rep.report(DV_CARDINALITY, path, f"DV {df.file_path} blob property cardinality {prop} differs from "
                   f"record_count {df.record_count}", entry=where, cardinality=prop, record_count=df.record_count)
    try:
        payload = ctx.io.read_range(df.file_path, df.content_offset, df.content_size_in_bytes)
        positions = decode_deletion_vector(payload)
    except IcectlError as err:
        rep.report(DV_PAYLOAD, df.file_path, f"DV blob at {df.content_offset} for {df.referenced_data_file}: "
                   f"{err.message}", entry=where, content_offset=df.content_offset)
        return
    if len(positions) != df.record_count:
        rep.report(DV_CARDINALITY, path, f"DV {df.file_path} holds {len(positions)} positions, record_count is "
                   f"{df.record_count}", entry=where, cardinality=len(positions), record_count=df.record_count)


def live_among(targets: set[str], live_paths: list[list[str] | pa.Array | pa.ChunkedArray]) -> set[str]:
    """The ``targets`` that are among the live data files: the few targets probed against each
    manifest's paths (Arrow ones with :func:`~icectl.storage.path_arrays.member_mask`, which hashes
    the small side), never a set of every live path."""
    found: set[str] = set()
    for paths in live_paths:
        if isinstance(paths, list):
            found.update(targets.intersection(paths))
        elif len(paths) and targets:
            import pyarrow as pa

            if pa.types.is_string_view(paths.type):  # is_in has no kernel for views
                paths = paths.cast(pa.large_string())
            wanted = pa.array(sorted(targets), pa.large_string()).cast(paths.type)
            found.update(wanted.filter(member_mask(wanted, paths)).to_pylist())
    return found


def check_snapshot_deletes(ctx: Context, snap: Snapshot, manifests: list[ManifestFile],
                           summaries: list[ManifestSummary] | None = None) -> None:
    """Per snapshot: one DV per data file, and deletes aimed at live data files only.

    ``summaries``: the manifests' summaries as the snapshot sees them (a v4 snapshot's leaves with
    their manifest DVs applied); by default those of ``manifests``."""
    rep = ctx.reporter
    if not any(m.content == ManifestContent.DELETES for m in manifests):
        return
    # A data manifest that could not be read (reported) hides live files: which targets are live is unknown.
    complete = True
    if summaries is None:
        summaries = [ctx.summaries[m.manifest_path] for m in manifests if m.manifest_path in ctx.summaries]
        complete = all(m.manifest_path in ctx.summaries for m in manifests if m.content == ManifestContent.DATA)
    deletes = [s for s in summaries if s.manifest.content == ManifestContent.DELETES]
    if not any(s.dv_targets or s.position_delete_targets for s in deletes):
        return
    dvs = [t for s in deletes for t in s.dv_targets]
    targets = {t for t, _ in dvs} | {t for s in deletes for t, _ in s.position_delete_targets}
    live = live_among(targets, [s.live_data_files for s in summaries if s.manifest.content == ManifestContent.DATA])
    counts = Counter(target for target, _ in dvs)
    for target, where in dvs:
        manifest_path = where.rsplit("#", 1)[0]
        if counts[target] > 1:
            rep.report(ONE_DV, manifest_path, f"snapshot {snap.snapshot_id} has {counts[target]} live DVs for "
                       f"{target}", entry=where, snapshot_id=snap.snapshot_id, data_file=target,
                       dvs=counts[target])
        if complete and target not in live:
            rep.report(DV_TARGET_LIVE, manifest_path, f"DV for {target} in snapshot {snap.snapshot_id}, which has "
                       "no such live data file", entry=where, snapshot_id=snap.snapshot_id, data_file=target)
    for s in deletes:
        for target, where in s.position_delete_targets:
            if target in counts:
                rep.report(DV_REPLACES_POSITION, s.manifest.manifest_path, f"position delete file for {target} is "
                           f"still live in snapshot {snap.snapshot_id}, which has a DV for it", entry=where,
                           snapshot_id=snap.snapshot_id, data_file=target)
            if complete and target not in live:
                rep.report(POSITION_TARGET_LIVE, s.manifest.manifest_path, f"position delete file for {target} in "
                           f"snapshot {snap.snapshot_id}, which has no such live data file", entry=where,
                           snapshot_id=snap.snapshot_id, data_file=target)
