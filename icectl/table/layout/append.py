"""What an append writes before its commit, for either layout (add-files, a cherry-picked append).

v1-v3 (:class:`ManifestListLayout`): one manifest of ADDED entries per partition spec,
``<commit>-m<i>.avro`` with ``i`` from 0, listed as the layout's ``added`` manifests. v4
(:class:`RootLayout`, layout page section 8): the files as ADDED root-level entries, or, past
``write.v4.root-max-added-files``, one new leaf per partition spec referenced from the root.
Row ids are the commit's (no ``first_row_id`` on the entries).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from icectl.codec.manifest_writer import UNASSIGNED_SEQ, write_manifest
from icectl.codec.root_manifest import content_entry_of
from icectl.spec.manifest import DataFile, ManifestContent, ManifestEntry, ManifestEntryStatus
from icectl.spec.metadata import TableMetadata
from icectl.storage import FileIO, join
from icectl.table.layout import SnapshotLayout
from icectl.table.layout.manifest_list import ManifestListLayout, manifest_list_path, manifest_path
from icectl.table.layout.root import NewLeaf, RootLayout, root_max_added_files, write_leaf


def appends_to_leaf(md: TableMetadata, file_count: int) -> bool:
    """Whether a v4 append of ``file_count`` files goes into new leaves rather than the root."""
    return file_count > root_max_added_files(md)


def write_appended(io: FileIO, md: TableMetadata, folder: str, layout: SnapshotLayout,
                   files: Mapping[int, Sequence[DataFile]], snapshot_id: int, written: list[str]) -> None:
    """Write the manifests (v1-v3) or leaves (a large v4 append) that list ``files`` (partition
    spec id -> data files) and set them on ``layout``; every path goes into ``written`` before
    its file is written, so a half-written one is cleaned up with the rest."""
    specs = sorted(files.items())
    if isinstance(layout, ManifestListLayout):
        added = []
        for i, (spec_id, fs) in enumerate(specs):
            spec = md.spec_by_id(spec_id)
            assert spec is not None
            path = manifest_path(folder, layout.commit_id, i)
            written.append(path)
            entries = [ManifestEntry(ManifestEntryStatus.ADDED, snapshot_id, None, None, f) for f in fs]
            result = write_manifest(entries, schema=md.schema(), spec=spec, partition_type=md.partition_type(spec),
                                    format_version=md.format_version, content=ManifestContent.DATA,
                                    snapshot_id=snapshot_id)
            io.write(path, result.data)
            added.append(result.to_manifest_file(path, len(result.data), spec_id, snapshot_id, UNASSIGNED_SEQ))
        layout.added = added
        return
    assert isinstance(layout, RootLayout)
    to_leaf = appends_to_leaf(md, sum(map(len, files.values())))
    for spec_id, fs in specs:
        ptype = md.partition_type(spec_id)
        root_entries = [content_entry_of(ManifestEntry(ManifestEntryStatus.ADDED, None, None, None, f), spec_id, ptype)
                        for f in fs]
        if not to_leaf:
            layout.added.extend(root_entries)
            continue
        path = join(folder, f"{uuid.uuid4()}-m{len(layout.new_leaves)}.avro")
        written.append(path)
        leaf = write_leaf(io, md, path, root_entries, ManifestContent.DATA, spec_id)
        assert leaf.manifest_stats is not None
        layout.new_leaves.append(NewLeaf(leaf, leaf.manifest_stats.added_rows_count))


def appended_paths(md: TableMetadata, folder: str, layout: SnapshotLayout, files: Mapping[int, Sequence[DataFile]],
                   snapshot_id: int, *, more_manifests: int = 0) -> list[str]:
    """What :func:`write_appended` and the layout would write, for a dry run (``<uuid>`` where the
    name is drawn at write time); ``more_manifests`` rewritten manifests go after the added ones."""
    if isinstance(layout, RootLayout):
        leaves = len(files) if appends_to_leaf(md, sum(map(len, files.values()))) else 0
        return [*(join(folder, f"<uuid>-m{i}.avro") for i in range(leaves)),
                join(folder, f"root-{snapshot_id}-<uuid>.avro")]
    assert isinstance(layout, ManifestListLayout)
    return [*(manifest_path(folder, layout.commit_id, i) for i in range(len(files) + more_manifests)),
            manifest_list_path(folder, snapshot_id, 1, layout.commit_id)]


__all__ = ["appended_paths", "appends_to_leaf", "write_appended"]
