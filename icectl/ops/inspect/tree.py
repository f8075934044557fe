"""`icectl inspect tree`: the metadata tree of a snapshot.

For a v4 snapshot, one row per root entry: leaves (DATA_MANIFEST/DELETE_MANIFEST) with their file
counts and the cardinality of their manifest DV, root-level data files with the cardinality of
their colocated DV (its Puffin file in ``referenced_file``); ``meta.by_type_and_status`` counts
root entries by content type and status. A snapshot from before the upgrade shows its manifest
list the same way (its rows are the root's leaves). A root in icectl's earlier proposal layout is
shown as that layout has it (manifest DVs as their own rows).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from icectl.codec.mumbling import mumbling_cardinality
from icectl.ops.inspect.result import TreeMeta
from icectl.results import Column, RowsResult
from icectl.spec.manifest import ManifestContent
from icectl.spec.tracked_file import ContentType, TrackedFile
from icectl.spec.v4_proposal import ContentEntry, live_manifest_dvs
from icectl.table import Table
from icectl.table import scan_v4_proposal as proposal
from icectl.table.scan import manifests_of
from icectl.table.scan_v4 import is_proposal_root, read_root

TREE_COLUMNS = ["ordinal", "content_type", "status", "location", "spec_id", "record_count", "added_files",
                "existing_files", "deleted_files", "dv_cardinality", "referenced_file", "snapshot_id",
                "sequence_number", "first_row_id"]
STATUS_NAMES = {0: "EXISTING", 1: "ADDED", 2: "DELETED", 3: "REPLACED", 4: "MODIFIED"}
TREE_INFO = {"ordinal": Column("count", "#"), "content_type": Column("text", "type"),
             "spec_id": Column("id", "spec"), "record_count": Column("count", "records"),
             "added_files": Column("count", "added files"), "existing_files": Column("count", "existing files"),
             "deleted_files": Column("count", "deleted files"), "dv_cardinality": Column("count", "dv cardinality"),
             "sequence_number": Column("count", "seq")}
TREE_TERMINAL = ["ordinal", "content_type", "status", "location", "record_count", "added_files", "existing_files",
                 "deleted_files", "dv_cardinality", "referenced_file", "snapshot_id", "spec_id"]


def _spec_row(i: int, e: TrackedFile) -> dict[str, Any]:
    mi, t, dv = e.manifest_info, e.tracking, e.deletion_vector
    return {
        "ordinal": i, "content_type": e.content_type.name, "status": STATUS_NAMES[int(t.status)],
        "location": e.location, "spec_id": e.spec_id, "record_count": e.record_count,
        "added_files": mi.added_files_count if mi else None,
        "existing_files": mi.existing_files_count if mi else None,
        "deleted_files": mi.deleted_files_count if mi else None,
        "dv_cardinality": ((mumbling_cardinality(mi.dv) if mi.dv else 0) if mi
                           else dv.cardinality if dv else None),
        "referenced_file": dv.location if dv else None, "snapshot_id": t.snapshot_id,
        "sequence_number": t.sequence_number, "first_row_id": t.first_row_id,
    }


def _root_row(i: int, e: ContentEntry, leaf_dv: dict[str, int]) -> dict[str, Any]:
    ms = e.manifest_stats
    vi = e.version_info
    return {
        "ordinal": i, "content_type": e.content_type.name, "status": STATUS_NAMES[int(vi.status)],
        "location": e.location, "spec_id": e.partition_spec_id, "record_count": e.record_count,
        "added_files": ms.added_files_count if ms else None,
        "existing_files": ms.existing_files_count if ms else None,
        "deleted_files": ms.deleted_files_count if ms else None,
        "dv_cardinality": (e.record_count if e.is_manifest_dv
                           else leaf_dv.get(e.location, 0) if e.is_manifest and e.is_live else None),
        "referenced_file": e.referenced_file, "snapshot_id": vi.snapshot_id,
        "sequence_number": vi.sequence_number, "first_row_id": e.first_row_id,
    }


def tree_rows(table: Table, *, snapshot_id: int | None = None, ref: str | None = None) -> RowsResult:
    """The root entries (v4) or manifest-list rows (v1-v3) of a snapshot, with counts."""
    md = table.metadata
    snap = table.snapshot(snapshot_id, ref)
    counts: Counter[str] = Counter()
    rows: list[dict[str, Any]] = []
    kind = "none"
    if snap is not None and snap.root_manifest:
        kind = "root-manifest"
        raw = table.io.read(snap.root_manifest)
        if is_proposal_root(raw):
            old = proposal.read_root(md, snap, table.io, raw)
            leaf_dv = {leaf: len(proposal.dv_positions(e, table.io))
                       for leaf, e in live_manifest_dvs(old.entries).items()}
            for i, o in enumerate(old.entries):
                counts[f"{o.content_type.name}/{STATUS_NAMES[int(o.status)]}"] += 1
                rows.append(_root_row(i, o, leaf_dv))
        else:
            for i, e in enumerate(read_root(md, snap, table.io, raw).entries):
                counts[f"{e.content_type.name}/{STATUS_NAMES[int(e.status)]}"] += 1
                rows.append(_spec_row(i, e))
    elif snap is not None:
        kind = "manifest-list" if snap.manifest_list else "manifests"
        for i, m in enumerate(manifests_of(md, snap, table.io)):
            t = ContentType.DATA_MANIFEST if m.content == ManifestContent.DATA else ContentType.DELETE_MANIFEST
            counts[f"{t.name}/-"] += 1
            rows.append({"ordinal": i, "content_type": t.name, "status": None, "location": m.manifest_path,
                         "spec_id": m.partition_spec_id,
                         "record_count": (m.added_rows_count or 0) + (m.existing_rows_count or 0),
                         "added_files": m.added_files_count, "existing_files": m.existing_files_count,
                         "deleted_files": m.deleted_files_count, "dv_cardinality": None, "referenced_file": None,
                         "snapshot_id": m.added_snapshot_id, "sequence_number": m.sequence_number,
                         "first_row_id": m.first_row_id})

    def stream() -> Iterator[dict[str, Any]]:
        yield from rows

    meta = TreeMeta(table=table.identifier, metadata_location=table.metadata_location,
                    snapshot_id=snap.snapshot_id if snap else None, kind=kind,
                    root=(snap.root_manifest or snap.manifest_list) if snap else None,
                    by_type_and_status=dict(sorted(counts.items())))
    return RowsResult("tree", f"Metadata tree of {table.identifier}", TREE_COLUMNS, stream(), meta,
                      column_info=TREE_INFO, terminal_columns=TREE_TERMINAL, location=md.location)
