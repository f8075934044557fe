"""The v4 read path: a root's leaves (with their manifest DVs applied) and root-level files as manifests.

The table's history is made with icectl's commands; what each snapshot must show is worked out from
those commands (which files were added where, which were removed) and leaf row order is read with
pyarrow by the spec's field id of ``location`` (Avro leaves carried over from v2: fastavro), not
through icectl's reader.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import fastavro
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

from icectl.errors import CorruptInputError
from icectl.spec.manifest import DataFileContent, ManifestContent, ManifestEntryStatus
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.spec.snapshots import Snapshot
from icectl.table import load_table
from icectl.table.scan import iter_entries, manifests_of
from icectl.table.scan_v4 import read_leaf, read_root, read_tree_entries, tree_files, tree_manifests
from unit.ops.lifecycle.test_upgrade import icectl, parquet

ADDED, EXISTING, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING, ManifestEntryStatus.DELETED


LOCATION_FIELD_ID = b"100"  # tracked_file.location in the spec


def _leaf_paths(path: str) -> list[str]:
    if path.endswith(".parquet"):
        t = pq.read_table(path)
        (i,) = [i for i, f in enumerate(t.schema) if (f.metadata or {}).get(b"PARQUET:field_id") == LOCATION_FIELD_ID]
        return [str(p) for p in t.column(i).to_pylist()]
    with open(path, "rb") as f:
        return [r["data_file"]["file_path"] for r in fastavro.reader(f)]


@pytest.fixture
def history(tmp_path: Path) -> dict:
    """v2 -> v4 with three one-file leaves; then a three-file leaf (``leaf``), a root-level file ``g``
    (snapshot ``g_sid``), and one removal of ``g`` and of the leaf's second file (snapshot ``removal``)."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
           "--format-version", "2", "--property", f"{V4_ROOT_MAX_ADDED_FILES.name}=2")
    old = [parquet(tmp_path / f"f{day}.parquet", range(day * 10, day * 10 + 5), day) for day in (1, 2, 3)]
    for p in old:
        icectl("add-files", str(d), p)
    icectl("upgrade", str(d), "--to", "4", "--yes")
    leaf_files = [parquet(tmp_path / f"h{i}.parquet", range(100 + 10 * i, 104 + 10 * i), 5) for i in range(3)]
    assert icectl("add-files", str(d), *leaf_files)["layout"] == "new leaf"
    g = parquet(tmp_path / "g.parquet", range(500, 507), 6)
    g_sid = icectl("add-files", str(d), g)["snapshot_id"]
    removal = icectl("remove-files", str(d), g, leaf_files[1])["snapshot_id"]
    return {"dir": d, "old": old, "leaf_files": leaf_files, "g": g, "g_sid": g_sid, "removal": removal}


def _snapshot(d: Path, sid: int) -> Snapshot:
    s = load_table(str(d)).metadata.snapshot_by_id(sid)
    assert s is not None and s.root_manifest is not None
    return s


def test_root_level_files_are_one_group_per_content_and_inherit_from_the_snapshot(history: dict) -> None:
    d, g, g_sid = history["dir"], history["g"], history["g_sid"]
    md = load_table(str(d)).metadata
    snap = _snapshot(d, g_sid)
    manifests = tree_manifests(md, snap, load_table(str(d)).io)
    leaves, groups = [m for m in manifests if not m.is_root_group], [m for m in manifests if m.is_root_group]
    assert manifests == [*leaves, *groups]  # leaves first, then the root-level groups
    assert len(leaves) == 4 and all(m.deleted_positions is None for m in leaves)
    assert len(groups) == 1
    group = groups[0]
    assert (group.manifest_path, group.content, group.added_files_count, group.added_rows_count) == (
        snap.root_manifest, ManifestContent.DATA, 1, 7)
    assert (group.existing_files_count, group.deleted_files_count) == (0, 0)
    assert group.manifest_length == Path(snap.root_manifest).stat().st_size
    assert (group.sequence_number, group.min_sequence_number, group.added_snapshot_id) == (
        snap.sequence_number, snap.sequence_number, g_sid)
    (entry,) = group.root_entries or ()
    # An ADDED root entry has the snapshot's id and sequence number (written explicitly in the spec layout).
    assert (entry.status, entry.data_file.file_path, entry.snapshot_id, entry.sequence_number,
            entry.file_sequence_number) == (ADDED, g, g_sid, snap.sequence_number, snap.sequence_number)
    assert tree_files(md, snap, load_table(str(d)).io).files == ((g, DataFileContent.DATA),)


def test_a_removal_shows_as_a_manifest_dv_and_a_deleted_root_entry(history: dict) -> None:
    d, g, leaf_files, removal = history["dir"], history["g"], history["leaf_files"], history["removal"]
    table = load_table(str(d))
    snap = _snapshot(d, removal)
    manifests = tree_manifests(table.metadata, snap, table.io)
    dvs = {m.manifest_path: m.deleted_positions for m in manifests if not m.is_root_group}
    (leaf,) = [p for p, dv in dvs.items() if dv is not None]
    rows = _leaf_paths(leaf)
    assert sorted(rows) == sorted(leaf_files) and dvs[leaf] == BitMap64([rows.index(leaf_files[1])])
    entries = [(e.status, e.data_file.file_path, e.snapshot_id) for _, e in iter_entries(
        table.metadata, table.io, manifests_of(table.metadata, snap, table.io))]
    assert (DELETED, g, removal) in entries  # the root keeps the removed file as DELETED, by the removal
    assert leaf_files[1] not in [p for _, p, _ in entries]  # a manifest DV drops the row altogether
    live = {p for _, e in iter_entries(table.metadata, table.io, manifests_of(table.metadata, snap, table.io),
                                       live_only=True) for p in [e.data_file.file_path]}
    assert live == {*history["old"], leaf_files[0], leaf_files[2]}
    (group,) = [m for m in manifests if m.is_root_group]
    assert (group.deleted_files_count, group.deleted_rows_count, group.added_files_count) == (1, 7, 0)
    g_seq = _snapshot(d, history["g_sid"]).sequence_number
    deleted = next(e for e in group.root_entries or () if e.data_file.file_path == g)
    assert deleted.sequence_number == g_seq < snap.sequence_number  # its data sequence number stays
    files = tree_files(table.metadata, snap, table.io)
    assert files.root == snap.root_manifest and files.files == () and files.manifest_dv_files == ()  # inline DV
    assert {m.manifest_path: dv for m, dv in files.leaves} == dvs


def test_a_dv_past_the_leaf_and_a_tree_deeper_than_two_are_corrupt(history: dict) -> None:
    d, removal = history["dir"], history["removal"]
    table = load_table(str(d))
    snap = _snapshot(d, removal)
    manifests = tree_manifests(table.metadata, snap, table.io)
    leaf = next(m for m in manifests if m.deleted_positions is not None)
    ptype = table.metadata.partition_type(leaf.partition_spec_id)
    kept = [e.data_file.file_path for e in read_tree_entries(table.metadata, table.io, leaf, ptype)]
    rows = _leaf_paths(leaf.manifest_path)
    assert kept == [p for i, p in enumerate(rows) if i not in leaf.deleted_positions]
    past = dataclasses.replace(leaf, deleted_positions=BitMap64([len(rows)]))
    with pytest.raises(CorruptInputError, match=f"manifest DV position {len(rows)} is past the {len(rows)} rows"):
        read_tree_entries(table.metadata, table.io, past, ptype)
    # A tree deeper than two: a leaf that references manifests (the root, read as a leaf).
    as_leaf = dataclasses.replace(leaf, manifest_path=snap.root_manifest, deleted_positions=None)
    with pytest.raises(CorruptInputError, match="a v4 leaf manifest cannot hold DATA_MANIFEST entries") as err:
        read_leaf(table.metadata, table.io, as_leaf, ptype)
    assert err.value.path == snap.root_manifest
    # A leaf named as a snapshot's root: the spec's key-value metadata (schema-id, format-version) no
    # longer says root or leaf, and a leaf of data files has the shape of a root, so the reader takes
    # it; what tells it apart is that its data files lack the first_row_id every root data file must
    # carry (validate reports that: v4.spec-first-row-id).
    as_root = read_root(table.metadata, dataclasses.replace(snap, root_manifest=leaf.manifest_path), table.io)
    assert [(e.location, e.first_row_id) for e in as_root.entries] == [(p, None) for p in rows]
    assert as_root.metadata == {"schema-id": str(snap.schema_id), "format-version": "4"}
    with pytest.raises(CorruptInputError, match="has no root-manifest"):
        read_root(table.metadata, dataclasses.replace(snap, root_manifest=None), table.io)
