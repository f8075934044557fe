"""Manifest delete vectors of a v4 root (layout page section 5): reference, blob, cardinality, target, bounds.

A manifest DV removes rows (by ordinal) from one leaf of its root: inline in the root (``location`` =
``referenced_file`` = the leaf) or a ``deletion-vector-v1`` blob of a Puffin file. :func:`manifest_dvs`
checks a root's live ones and returns their positions, which :func:`without` applies to a leaf's
summary so per-snapshot rules see what that snapshot sees.
"""

from __future__ import annotations

import dataclasses

from pyroaring import BitMap64

from icectl.codec.puffin import DELETION_VECTOR_V1, decode_deletion_vector
from icectl.errors import IcectlError
from icectl.spec.manifest import ManifestFile
from icectl.spec.v4_proposal import ContentEntry
from icectl.validate.context import Context, ManifestSummary
from icectl.validate.rules import Severity, entry_name, rule

E = Severity.ERROR

DV_REFERENCE = rule("v4.manifest-dv-reference", E,
                    "a manifest DV names its leaf in referenced_file and is either inline (location = the leaf, no "
                    "offset/size) or a deletion-vector-v1 blob of its Puffin file (offset, size_in_bytes)", "Layout 5")
DV_TARGET = rule("v4.manifest-dv-target", E, "a live manifest DV names a live leaf of its root", "Layout 5, 7")
ONE_DV = rule("v4.one-manifest-dv-per-leaf", E, "a root has at most one live manifest DV per leaf", "Layout 5")
DV_POSITIONS = rule("v4.manifest-dv-positions", E,
                    "a manifest DV's positions are below its leaf's row count", "Layout 5")
DV_BLOB = rule("v4.manifest-dv-blob", E,
               "a manifest DV blob (inline or in Puffin) has a valid length, magic and CRC-32", "Layout 5")
DV_CARDINALITY = rule("v4.manifest-dv-cardinality", E,
                      "a manifest DV's cardinality (and its Puffin 'cardinality' property) equals its record_count",
                      "Layout 5")


def _dv_positions(ctx: Context, root: str, i: int, e: ContentEntry) -> BitMap64 | None:
    """A manifest DV's positions, or None (and findings) when its reference or blob is bad."""
    rep, where, dv = ctx.reporter, entry_name(root, i), e.deletion_vector
    if dv is None:
        return None  # v4.deletion-vector
    inline = dv.inline_content is not None
    puffin = dv.offset is not None and dv.size_in_bytes is not None
    problem = None
    if e.referenced_file is None:
        problem = "has no referenced_file"
    elif inline == (dv.offset is not None or dv.size_in_bytes is not None) or not (inline or puffin):
        problem = "is neither inline nor a Puffin range (offset and size_in_bytes)"
    elif inline and e.location != e.referenced_file:
        problem = f"is inline but its location {e.location} is not its leaf {e.referenced_file}"
    if problem:
        rep.report(DV_REFERENCE, root, f"manifest DV for {e.referenced_file} {problem}", entry=where,
                   location=e.location, referenced_file=e.referenced_file, offset=dv.offset,
                   size_in_bytes=dv.size_in_bytes, inline=inline)
        return None
    blob_bytes = dv.inline_content
    if not inline:
        footer = ctx.puffin_footer(e.location)
        if isinstance(footer, IcectlError):
            rep.report(DV_REFERENCE, root, f"manifest DV for {e.referenced_file}: cannot read the Puffin footer of "
                       f"{e.location} ({footer.message})", entry=where, puffin=e.location)
            return None
        blob = next((b for b in footer.blobs if b.offset == dv.offset), None)
        if blob is None or blob.length != dv.size_in_bytes or blob.type != DELETION_VECTOR_V1:
            rep.report(DV_REFERENCE, root, f"manifest DV for {e.referenced_file}: no {DELETION_VECTOR_V1} blob of "
                       f"{dv.size_in_bytes} bytes at offset {dv.offset} in {e.location}", entry=where,
                       puffin=e.location, offset=dv.offset, size_in_bytes=dv.size_in_bytes)
            return None
        prop = blob.properties.get("cardinality")
        if prop is not None and prop != str(e.record_count):
            rep.report(DV_CARDINALITY, root, f"manifest DV for {e.referenced_file}: blob property cardinality "
                       f"{prop} differs from record_count {e.record_count}", entry=where, cardinality=prop,
                       record_count=e.record_count)
        blob_bytes = ctx.io.read_range(e.location, dv.offset or 0, dv.size_in_bytes or 0)
    try:
        positions = decode_deletion_vector(blob_bytes or b"")
    except IcectlError as err:
        rep.report(DV_BLOB, root if inline else e.location, f"manifest DV for {e.referenced_file}: {err.message}",
                   entry=where, inline=inline)
        return None
    if len(positions) != e.record_count:
        rep.report(DV_CARDINALITY, root, f"manifest DV for {e.referenced_file} holds {len(positions)} positions, "
                   f"record_count is {e.record_count}", entry=where, cardinality=len(positions),
                   record_count=e.record_count)
    return positions


def manifest_dvs(ctx: Context, root: str, entries: list[ContentEntry],
                  leaves: dict[str, tuple[int, ManifestFile]]) -> dict[str, BitMap64]:
    """Leaf -> positions of its live manifest DV (checked: reference, blob, cardinality, one per leaf, bounds)."""
    rep = ctx.reporter
    out: dict[str, BitMap64] = {}
    seen: dict[str, int] = {}
    live_leaves = {e.location for e in entries if e.is_manifest and e.is_live}
    for i, e in enumerate(entries):
        if not (e.is_manifest_dv and e.is_live):
            continue
        where = entry_name(root, i)
        target = e.referenced_file
        if target is not None and target in seen:
            rep.report(ONE_DV, root, f"a second live manifest DV for {target} (the first is {root}#{seen[target]})",
                       entry=where, leaf=target, first=entry_name(root, seen[target]))
        elif target is not None:
            seen[target] = i
        if target is not None and target not in live_leaves:
            rep.report(DV_TARGET, root, f"live manifest DV for {target}, which is not a live leaf of the root",
                       entry=where, leaf=target)
        positions = _dv_positions(ctx, root, i, e)
        if positions is None or target is None:
            continue
        rows = ctx.summaries[target].entries if target in leaves and target in ctx.summaries else None
        if positions and rows is not None and positions.max() >= rows:
            rep.report(DV_POSITIONS, root, f"manifest DV position {positions.max()} is past the {rows} rows of "
                       f"{target}", entry=where, leaf=target, max_position=positions.max(), rows=rows)
        out[target] = positions | out.get(target, BitMap64())
    return out


def without(s: ManifestSummary, dv: BitMap64 | None) -> ManifestSummary:
    """A leaf's summary as one snapshot sees it: rows at its manifest DV's positions dropped."""
    if not dv:
        return s

    def keep(where: str) -> bool:
        return int(where.rsplit("#", 1)[1]) not in dv

    data = [(p, o) for p, o in zip(s.live_data_files, s.live_data_ordinals, strict=True) if o not in dv]
    return dataclasses.replace(
        s, live_data_files=[p for p, _ in data], live_data_ordinals=[o for _, o in data],
        dv_targets=[t for t in s.dv_targets if keep(t[1])],
        position_delete_targets=[t for t in s.position_delete_targets if keep(t[1])],
        live_files=[f for f in s.live_files if keep(f.entry)])
