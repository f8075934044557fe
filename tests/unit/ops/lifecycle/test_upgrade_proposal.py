"""A v4 table in the proposal layout that earlier icectl versions wrote (Avro ``content_entry`` roots
and leaves, DVs as content_type 1 root entries, manifest DVs as content_type 5 entries) reads as
before, refuses writes, and ``icectl upgrade --to 4`` rewrites it into the spec layout in one
commit: every live file, sequence number and row id the same, DVs colocated, the old roots and
leaves unreferenced (expire removes them, and only them)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from icectl.codec.puffin import deletion_vector_blob, write_puffin
from icectl.codec.v4_manifest import is_parquet
from icectl.codec.v4_proposal import (
    ContentEntry,
    ContentType,
    DeletionVectorRef,
    VersionInfo,
    manifest_dv_entry,
    write_v4_manifest,
)
from icectl.errors import ExitCode
from icectl.spec.manifest import ManifestEntryStatus
from icectl.spec.snapshots import Snapshot
from icectl.spec.updates import snapshot_change
from icectl.table import load_table
from icectl.table.commit import commit, new_snapshot_id
from unit.ops.expire.test_expire_v4 import proposal_entries, table_files
from unit.ops.lifecycle.test_upgrade import icectl, parquet

ADDED, EXISTING = ManifestEntryStatus.ADDED, ManifestEntryStatus.EXISTING


def _file(path: str, rows: int, first_row_id: int, sid: int, seq: int, day: int) -> ContentEntry:
    return ContentEntry(ContentType.DATA, path, "parquet", 0, rows, VersionInfo(EXISTING, sid, seq, seq),
                        partition={1000: 19783 + day}, file_size_in_bytes=os.path.getsize(path),
                        first_row_id=first_row_id)


@pytest.fixture
def proposal_table(tmp_path: Path) -> dict[str, Any]:
    """v3 table (two v1-v3 manifests) upgraded, then rewritten by hand into the proposal layout: a
    root over the two manifests, a proposal v4 leaf (Avro) of three files with an inline manifest
    DV removing its second row, a root-level file with a DV in a Puffin file, and a root-level
    file without one."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--partition-by", "days(ts)",
           "--format-version", "3")
    (d / "data").mkdir(parents=True, exist_ok=True)
    for i in range(2):
        icectl("add-files", str(d), parquet(d / "data" / f"a{i}.parquet", range(i * 10, i * 10 + 5), 1))
    icectl("upgrade", str(d), "--to", "4", "--yes")
    t = load_table(str(d))
    md = t.metadata
    head = md.current_snapshot()
    assert head is not None and head.root_manifest
    base = proposal_entries(head.root_manifest)
    sid, seq = new_snapshot_id(md), md.last_sequence_number + 1
    row = md.next_row_id
    leaf_files = [parquet(d / "data" / f"l{i}.parquet", range(100 + i * 10, 103 + i * 10), 2) for i in range(3)]
    leaf_rows = [_file(p, 3, row + 3 * i, sid, seq, 2) for i, p in enumerate(leaf_files)]
    leaf_path = d / "metadata" / "proposal-leaf-m0.avro"
    written = write_v4_manifest(leaf_rows, content="data", partition_type=md.unified_partition_type())
    leaf_path.write_bytes(written.data)
    leaf = ContentEntry(ContentType.DATA_MANIFEST, str(leaf_path), "avro", 0, 9, VersionInfo(ADDED, sid, seq, seq),
                        file_size_in_bytes=len(written.data), manifest_stats=written.stats, first_row_id=row)
    r_dv, r_plain = (parquet(d / "data" / f"r{i}.parquet", range(200 + i * 10, 204 + i * 10), 3) for i in range(2))
    root_files = [_file(r_dv, 4, row + 9, sid, seq, 3), _file(r_plain, 4, row + 13, sid, seq, 3)]
    puffin = write_puffin([deletion_vector_blob(r_dv, [1, 3])])
    pf = d / "data" / "dv.puffin"
    pf.write_bytes(puffin.data)
    (blob,) = puffin.metadata.blobs
    dv = ContentEntry(ContentType.POSITION_DELETE, str(pf), "puffin", 0, 2, VersionInfo(ADDED, sid, seq, seq),
                      deletion_vector=DeletionVectorRef(blob.offset, blob.length), partition={1000: 19786},
                      file_size_in_bytes=len(puffin.data), referenced_file=r_dv)
    mdv = manifest_dv_entry(str(leaf_path), len(written.data), [1], snapshot_id=sid, sequence_number=seq)
    root_path = d / "metadata" / f"root-{sid}-proposal.avro"
    root_path.write_bytes(write_v4_manifest([*base, leaf, *root_files, dv, mdv], content="root",
                                            partition_type=md.unified_partition_type(), snapshot_id=sid,
                                            sequence_number=seq, parent_snapshot_id=head.snapshot_id).data)
    snap = Snapshot(sid, head.timestamp_ms + 1, head.snapshot_id, seq, root_manifest=str(root_path),
                    summary={"operation": "append"}, schema_id=md.current_schema_id, first_row_id=row,
                    added_rows=17)
    commit(t, lambda b: snapshot_change(dataclasses.replace(b, next_row_id=row + 17), snap))
    return {"d": d, "leaf": str(leaf_path), "root": str(root_path), "removed_by_mdv": leaf_files[1],
            "puffin": str(pf), "r_dv": r_dv}


def _live(d: Path) -> list[tuple[Any, ...]]:
    rows = icectl("inspect", "entries", str(d))["rows"]
    out = []
    for r in rows:
        if r["status"] == 2:
            continue
        f = r["data_file"]
        out.append((f["file_path"], f["content"], f.get("referenced_data_file"), f.get("content_offset"),
                    f.get("content_size_in_bytes"), f["record_count"], f["partition"],
                    f.get("first_row_id") if f["content"] == 0 else None, r["sequence_number"] if f["content"] == 0
                    else None))
    return sorted(out, key=repr)


def test_a_proposal_layout_table_reads_refuses_writes_and_migrates(proposal_table: dict[str, Any]) -> None:
    d = proposal_table["d"]
    before = _live(d)
    paths = [r[0] for r in before]
    assert proposal_table["removed_by_mdv"] not in paths  # the proposal's manifest DV applies on read
    assert (proposal_table["puffin"], 1, proposal_table["r_dv"]) in [r[:3] for r in before]
    assert len([r for r in before if r[1] == 0]) == 6  # a0, a1, two leaf files, two root files
    findings = icectl("validate", str(d))  # a warning: the table reads whole
    assert {(r["rule"], r["severity"]) for r in findings["rows"] if r["rule"].startswith("v4.")} == {
        ("v4.spec-layout", "warning")}
    icectl("remove-files", str(d), proposal_table["r_dv"], expect=ExitCode.REFUSED)  # no write on the old layout
    files_before = table_files(d)

    plan = icectl("upgrade", str(d), "--to", "4", "--dry-run")
    assert plan["from_version"] == plan["to_version"] == 4 and len(plan["branches"]) == 1
    assert table_files(d) == files_before  # the dry run wrote nothing
    out = icectl("upgrade", str(d), "--to", "4", "--yes")
    assert out["committed"] and out["branches"][0]["live_files"] == len(before)
    head = load_table(str(d)).metadata.current_snapshot()
    assert head is not None and head.root_manifest and is_parquet(Path(head.root_manifest).read_bytes())
    assert head.summary["operation"] == "replace" and head.added_rows == 0
    assert _live(d) == before  # the same files, DV blobs, partitions, row ids and data sequence numbers
    tree = icectl("inspect", "tree", str(d))
    by = tree["by_type_and_status"]
    assert by == {"DATA/EXISTING": 1, "DATA_MANIFEST/ADDED": 1}, by  # the DV'd file at the root, the rest in a leaf
    (root_file,) = [r for r in tree["rows"] if r["content_type"] == "DATA"]
    assert root_file["location"] == proposal_table["r_dv"] and root_file["referenced_file"] == proposal_table["puffin"]
    (leaf_row,) = [r for r in tree["rows"] if r["content_type"] == "DATA_MANIFEST"]
    assert leaf_row["location"].endswith(".parquet") and pq.read_metadata(leaf_row["location"]).num_rows == 5
    assert icectl("validate", str(d))["rows"] == []
    # Nothing is committed twice: a second upgrade has nothing to do.
    assert icectl("upgrade", str(d), "--to", "4", "--yes")["committed"] is False
    # Expiring everything before the head removes the proposal root and leaf (and the older roots and
    # lists), never a data file, the Puffin file, or the v1-v3 manifests the old root shared.
    gone_before = table_files(d)
    expired = icectl("expire-snapshots", str(d), "--older-than", "0s", "--retain-last", "1")
    gone = gone_before - table_files(d)
    assert proposal_table["root"] in gone and proposal_table["leaf"] in gone
    assert not {p for p in gone if "/data/" in p}, gone
    assert expired["deleted_data_files_count"] == 0
    assert _live(d) == before
