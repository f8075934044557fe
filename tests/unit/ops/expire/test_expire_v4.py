"""`icectl expire-snapshots` on v4 tables (issue 7 part 5): reachability through roots, leaves,
manifest DVs (inline and in Puffin files), data DVs, root-level files and pre-upgrade manifest lists.

The files each test expects deleted are worked out from what the test did (which files it added,
removed, which roots and leaves appeared) and, for snapshots Spark wrote, by reading Spark's
manifest lists and manifests with fastavro directly, never through icectl's reader or expire.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from support.fixtures import FixtureTable
from support.forge import property_change, ref_change

from icectl.codec.puffin import deletion_vector_blob, write_puffin
from icectl.codec.v4_manifest import read_v4_manifest as read_spec_manifest
from icectl.codec.v4_proposal import (
    ContentEntry,
    ContentType,
    DeletionVectorRef,
    ManifestStats,
    VersionInfo,
    manifest_dv_entry,
    manifest_entry_of_manifest_file,
    write_v4_manifest,
)
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.spec.manifest import ManifestEntryStatus
from icectl.spec.properties import V4_ROOT_MAX_ADDED_FILES
from icectl.spec.snapshots import Snapshot, SnapshotRef
from icectl.spec.tracked_file import manifest_file_of
from icectl.spec.updates import snapshot_change
from icectl.table import load_table
from icectl.table.commit import commit, new_snapshot_id
from unit.ops.lifecycle.test_upgrade import icectl, parquet

EXISTING, ADDED, DELETED = ManifestEntryStatus.EXISTING, ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED


def norm(p: str) -> str:
    return os.path.normpath(p.removeprefix("file://").removeprefix("file:"))


def table_files(d: Path) -> set[str]:
    """Every file of the table that expire may delete (not table metadata JSON, hints, checksums)."""
    out = set()
    for root, _dirs, names in os.walk(d):
        for n in names:
            if not (n.endswith((".metadata.json", ".crc")) or n == "version-hint.text"):
                out.add(norm(os.path.join(root, n)))
    return out


def reached_by_icectl(d: Path, snapshot_ids: list[int]) -> set[str]:
    """The live files icectl reads for each snapshot (only to check they all still exist)."""
    out = set()
    for sid in snapshot_ids:
        for content in ("data", "deletes"):
            rows = icectl("inspect", "files", str(d), "--snapshot", str(sid), "--content", content)["rows"]
            out |= {norm(r["file_path"]) for r in rows}
    return out


def expire(d: Path, **policy: Any) -> dict[str, Any]:
    out = expire_snapshots(load_table(str(d)), ExpirePolicy(**policy))
    assert out.exit_code == 0, out.data
    return out.data


# --------------------------------------------------------------------------- manifest DVs in a Puffin file


def _leaf_paths(leaf: str) -> list[str]:
    with open(leaf, "rb") as f:
        return [r["data_file"]["file_path"] for r in fastavro.reader(f)]


def _commit_root(d: Path, entries: list[ContentEntry], sid: int | None = None) -> int:
    t = load_table(str(d))
    md = t.metadata
    head = md.current_snapshot()
    assert head is not None
    sid, seq = sid or new_snapshot_id(md), md.last_sequence_number + 1
    path = str(d / "metadata" / f"root-{sid}-test.avro")
    Path(path).write_bytes(write_v4_manifest(
        [e if e.version_info.status != ADDED else _vi(e, ADDED, sid, seq) for e in entries], content="root",
        partition_type=md.unified_partition_type(), snapshot_id=sid, sequence_number=seq,
        parent_snapshot_id=head.snapshot_id).data)
    snap = Snapshot(sid, head.timestamp_ms + 1, head.snapshot_id, seq, root_manifest=path,
                    summary={"operation": "delete"}, schema_id=md.current_schema_id, first_row_id=md.next_row_id,
                    added_rows=0)
    commit(t, lambda base: snapshot_change(base, snap))
    return sid


def proposal_entries(root: str) -> list[ContentEntry]:
    """The root entries of a just-upgraded table (spec layout: references to its v1-v3 manifests) as
    icectl's earlier proposal layout wrote them: these tests build proposal-layout histories (manifest
    DVs in Puffin files), which icectl still reads and expires."""
    spec_root = read_spec_manifest(Path(root).read_bytes(), partition_types={}, column_types={}, root=True)
    out = []
    for e in spec_root.entries:
        assert e.manifest_info is not None and e.manifest_info.format_version == 0
        m = manifest_file_of(e)
        info = e.manifest_info
        stats = ManifestStats(info.added_files_count, info.existing_files_count, info.deleted_files_count,
                              info.added_rows_count, info.existing_rows_count, info.deleted_rows_count,
                              info.min_sequence_number)
        out.append(manifest_entry_of_manifest_file(m, status=EXISTING, manifest_stats=stats, content_stats=None))
    return out


def _vi(e: ContentEntry, status: ManifestEntryStatus, sid: int, seq: int) -> ContentEntry:
    return dataclasses.replace(e, version_info=VersionInfo(status, sid, seq, seq))


@pytest.fixture
def puffin_history(tmp_path: Path) -> dict[str, Any]:
    """v2 -> v4 table with leaf LA (a0, a1, a2) and leaf LB (b0), then four snapshots:
    S1: LA's DV {a0} in Puffin P (blob 0); S2: that DV and LB's DV {b0} (P, blob 1);
    S3: LA's DV replaced inline by {a0, a1}, LB's stays in P; S4: LB's DV replaced inline."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--format-version", "2")
    (d / "data").mkdir(parents=True, exist_ok=True)
    a = [parquet(d / "data" / f"a{i}.parquet", range(i * 10, i * 10 + 2), 1) for i in range(3)]
    icectl("add-files", str(d), *a)
    b0 = parquet(d / "data" / "b0.parquet", range(50, 52), 1)
    icectl("add-files", str(d), b0)
    lists = [s.manifest_list for s in load_table(str(d)).metadata.snapshots]
    icectl("upgrade", str(d), "--to", "4", "--yes")
    md = load_table(str(d)).metadata
    up = md.current_snapshot()
    assert up is not None and up.root_manifest
    base = proposal_entries(up.root_manifest)
    leaves = {e.location: e for e in base if e.content_type == ContentType.DATA_MANIFEST}
    la = next(p for p in leaves if set(_leaf_paths(p)) == set(a))
    lb = next(p for p in leaves if _leaf_paths(p) == [b0])
    order = _leaf_paths(la)
    pos = {p: order.index(p) for p in a}
    puffin = write_puffin([deletion_vector_blob(la, [pos[a[0]]]), deletion_vector_blob(lb, [0])])
    pf = d / "metadata" / "manifest-dvs.puffin"
    pf.write_bytes(puffin.data)
    blob0, blob1 = puffin.metadata.blobs

    def in_puffin(leaf: str, blob: Any, n: int) -> ContentEntry:
        return ContentEntry(ContentType.MANIFEST_DV, str(pf), "puffin", 0, n, VersionInfo(ADDED),
                            deletion_vector=DeletionVectorRef(blob.offset, blob.length),
                            file_size_in_bytes=len(puffin.data), referenced_file=leaf)

    s1 = _commit_root(d, [*base, dva := in_puffin(la, blob0, 1)])
    seq1 = load_table(str(d)).metadata.last_sequence_number
    dva = _vi(dva, EXISTING, s1, seq1)
    s2 = _commit_root(d, [*base, dva, dvb := in_puffin(lb, blob1, 1)])
    seq2 = load_table(str(d)).metadata.last_sequence_number
    dvb = _vi(dvb, EXISTING, s2, seq2)
    sid3, seq3 = new_snapshot_id(load_table(str(d)).metadata), seq2 + 1
    union = manifest_dv_entry(la, leaves[la].file_size_in_bytes or 0, [pos[a[0]], pos[a[1]]], snapshot_id=sid3,
                              sequence_number=seq3)
    s3 = _commit_root(d, [*base, _vi(dva, DELETED, sid3, seq3), union, dvb], sid3)
    union = _vi(union, EXISTING, s3, seq3)
    inline_b = manifest_dv_entry(lb, leaves[lb].file_size_in_bytes or 0, [0], snapshot_id=0, sequence_number=0)
    sid4 = new_snapshot_id(load_table(str(d)).metadata)
    s4 = _commit_root(d, [*base, union, _vi(dvb, DELETED, sid4, seq3 + 1), inline_b], sid4)
    md = load_table(str(d)).metadata
    roots = {s.snapshot_id: norm(s.root_manifest) for s in md.snapshots if s.root_manifest}
    return {"d": d, "a": [norm(p) for p in a], "b0": norm(b0), "lists": [norm(p) for p in lists if p],
            "puffin": norm(str(pf)), "up": up.snapshot_id, "s": [s1, s2, s3, s4], "roots": roots,
            "ts": {s.snapshot_id: s.timestamp_ms for s in md.snapshots}, "leaves": {norm(la), norm(lb)}}


def test_puffin_manifest_dv_shared_between_snapshots(puffin_history: dict[str, Any]) -> None:
    h = puffin_history
    d, (s1, s2, s3, s4), roots = h["d"], h["s"], h["roots"]
    a0, a1, a2 = h["a"]
    before = table_files(d)
    assert h["puffin"] in before and roots[s4] in before
    # Expire everything before S3: P stays (S3 still uses its blob 1 although S1/S2 used blob 0);
    # a0, a1 and b0 go (removed by the DVs of every retained snapshot); LA and LB stay.
    expected = {*h["lists"], roots[h["up"]], roots[s1], roots[s2], a0, a1, h["b0"]}
    dry = expire_snapshots(load_table(str(d)), ExpirePolicy(older_than_ms=h["ts"][s3]), dry_run=True).data
    assert {norm(p) for v in dry["would_delete"].values() for p in v} == expected and table_files(d) == before
    out = expire(d, older_than_ms=h["ts"][s3])
    assert before - table_files(d) == expected
    assert (out["deleted_manifest_lists_count"], out["deleted_manifest_files_count"],
            out["deleted_data_files_count"]) == (5, 0, 3)
    assert {h["puffin"], a2, *h["leaves"], roots[s3], roots[s4]} <= table_files(d)
    # S4 uses no blob of P any more: expiring S3 frees P (counted with the manifest files) and S3's root.
    before = table_files(d)
    out = expire(d, older_than_ms=h["ts"][s4])
    assert before - table_files(d) == {roots[s3], h["puffin"]}
    assert (out["deleted_manifest_lists_count"], out["deleted_manifest_files_count"]) == (1, 1)
    assert reached_by_icectl(d, [s4]) == {a2} and os.path.exists(a2)


def test_a_retained_snapshot_without_the_dv_keeps_the_rows(puffin_history: dict[str, Any]) -> None:
    h = puffin_history
    d, (s1, s2, s3, s4), roots = h["d"], h["s"], h["roots"]
    t = load_table(str(d))
    commit(t, lambda md: ref_change("keep", SnapshotRef(h["up"], "tag")))
    before = table_files(d)
    # Through the command line, with --clean-expired-metadata (v4 snapshots' specs are found too).
    out = icectl("expire-snapshots", str(d), "--older-than", str(h["ts"][s4]), "--clean-expired-metadata")
    # The tagged upgrade snapshot reaches LA and LB whole: a0, a1, b0 stay although S4 removes them.
    assert before - table_files(d) == {*h["lists"], roots[s1], roots[s2], roots[s3], h["puffin"]}
    assert out["deleted_data_files_count"] == 0
    assert reached_by_icectl(d, [h["up"], s4]) == {*h["a"], h["b0"]} <= table_files(d)


# --------------------------------------------------------------------------- upgraded Spark tables


def _read_avro(path: str) -> list[dict[str, Any]]:
    with open(norm(path), "rb") as f:
        return list(fastavro.reader(f))


def v3_reach(manifest_list: str) -> tuple[set[str], list[tuple[str, int, str | None, str]]]:
    """A pre-upgrade snapshot's manifest list and manifests, and its live content files as
    (path, content, referenced data file, format), read with fastavro."""
    meta = {norm(manifest_list)}
    content = []
    for row in _read_avro(manifest_list):
        meta.add(norm(row["manifest_path"]))
        for e in _read_avro(row["manifest_path"]):
            if e["status"] != 2:
                f = e["data_file"]
                ref = f.get("referenced_data_file")
                content.append((norm(f["file_path"]), f.get("content", 0), norm(ref) if ref else None,
                                f["file_format"].lower()))
    return meta, content


@pytest.mark.parametrize("kind", ["v2_part", "v3_dv"])
def test_expire_on_upgraded_spark_table(spark_clone: Any, kind: str) -> None:
    fx: FixtureTable = spark_clone(kind)
    d = fx.location
    md = load_table(str(d)).metadata
    pre = {s.snapshot_id: v3_reach(s.manifest_list or "") for s in md.snapshots}
    every = set().union(*(m | {c[0] for c in cs} for m, cs in pre.values()))  # all a snapshot reached
    heads = {n: r.snapshot_id for n, r in md.refs.items() if r.is_branch}
    tags = {n: r.snapshot_id for n, r in md.refs.items() if not r.is_branch}
    icectl("upgrade", str(d), "--to", "4", "--yes")
    md = load_table(str(d)).metadata
    up = {n: md.refs[n].snapshot_id for n in heads}  # the upgrade snapshot of each branch
    root_of = {s.snapshot_id: norm(s.root_manifest) for s in md.snapshots if s.root_manifest}
    every |= set(root_of.values())
    # Model of main: its leaves and live content files, from the pre-upgrade head and our steps.
    leaves = pre[heads["main"]][0] - {norm(md.snapshot_by_id(heads["main"]).manifest_list or "")}
    content = list(pre[heads["main"]][1])
    commit(load_table(str(d)), lambda m: property_change({V4_ROOT_MAX_ADDED_FILES.name: "2"}))
    # New files: one row of the widest data file Spark wrote (the table's schema, one partition).
    src = max((p for p, c, _r, _f in content if c == 0), key=lambda p: len(pq.read_schema(p).names))
    x = [norm(str(d / "data" / f"x{i}.parquet")) for i in range(4)]
    for p in x:
        pq.write_table(pq.read_table(src).slice(0, 1), p)
    meta_before = set(os.listdir(d / "metadata"))
    icectl("add-files", str(d), x[0])  # a root-level file
    icectl("add-files", str(d), *x[1:])  # a new leaf
    new_avro = {norm(str(d / "metadata" / n)) for n in set(os.listdir(d / "metadata")) - meta_before
                if n.endswith((".avro", ".parquet"))}  # roots and leaves (Parquet in the spec layout)
    new_leaves = {p for p in new_avro if not os.path.basename(p).startswith("root-")}
    assert len(new_leaves) == 1
    leaves |= new_leaves
    content += [(p, 0, None, "parquet") for p in x]
    every |= {*new_avro, *x}
    # Remove a pre-upgrade file that has a DV when there is one (its DV goes too), the root-level
    # file and a file of the new leaf; then a second file of the first one's leaf (a union DV).
    data = sorted(p for p, c, _ref, _fmt in content if c == 0 and p not in x)
    with_dv = sorted({ref for _p, _c, ref, fmt in content if fmt == "puffin" and ref})
    victim = with_dv[0] if with_dv else data[0]
    icectl("remove-files", str(d), victim, x[0], x[1])
    second = next(p for p in data if p != victim)
    icectl("remove-files", str(d), second)
    removed = {victim, x[0], x[1], second}
    content = [c for c in content if c[0] not in removed and not (c[3] == "puffin" and c[2] in removed)]
    md = load_table(str(d)).metadata
    root_of = {s.snapshot_id: norm(s.root_manifest) for s in md.snapshots if s.root_manifest}
    every |= set(root_of.values())
    main_head = md.refs["main"].snapshot_id
    # Retained after "older than now, keep 1": every branch head and every tag.
    kept = {root_of[main_head], *leaves, *(c[0] for c in content)}
    for name, sid in up.items():
        if name != "main":
            kept |= {root_of[sid], *(pre[heads[name]][0] - {norm(md.snapshot_by_id(heads[name]).manifest_list
                                                                  or "")}),
                     *(c[0] for c in pre[heads[name]][1])}
    for sid in tags.values():
        kept |= pre[sid][0] | {c[0] for c in pre[sid][1]}
    before = table_files(d)
    assert every <= before  # the test's own bookkeeping reaches only real files
    expected = (every & before) - kept
    time.sleep(0.01)
    out = expire(d, older_than_ms=int(time.time() * 1000), retain_last=1)
    after = table_files(d)
    assert before - after == expected
    assert kept <= after
    lists = sum(1 for p in expected if os.path.basename(p).startswith(("snap-", "root-")))
    assert out["deleted_manifest_lists_count"] == lists
    data_files = {c[0] for _m, cs in pre.values() for c in cs if c[1] == 0} | set(x)
    assert out["deleted_data_files_count"] == len(expected & data_files)
    retained = [s.snapshot_id for s in load_table(str(d)).metadata.snapshots]
    assert set(retained) == {main_head, *(sid for n, sid in up.items() if n != "main"), *tags.values()}
    assert reached_by_icectl(d, retained) <= after


def test_deleted_leaf_root_level_files_and_their_dvs(tmp_path: Path) -> None:
    """A leaf a root marks DELETED (its row moved to the root, as a compaction could), root-level
    data files and root-level data DVs sharing one Puffin file, each removed in turn."""
    d = tmp_path / "t"
    icectl("create", str(d), "--schema", "id long, ts timestamptz", "--format-version", "2")
    (d / "data").mkdir(parents=True, exist_ok=True)
    a0, a1 = (parquet(d / "data" / f"a{i}.parquet", range(i * 10, i * 10 + 2), 1) for i in range(2))
    icectl("add-files", str(d), a0, a1)
    b0 = parquet(d / "data" / "b0.parquet", range(50, 52), 1)
    icectl("add-files", str(d), b0)
    lists = {norm(s.manifest_list or "") for s in load_table(str(d)).metadata.snapshots}
    icectl("upgrade", str(d), "--to", "4", "--yes")
    md = load_table(str(d)).metadata
    up = md.current_snapshot()
    assert up is not None and up.root_manifest
    base = proposal_entries(up.root_manifest)
    lb = next(e for e in base if _leaf_paths(e.location) == [b0])
    la = next(e for e in base if e is not lb)
    sid1, seq1 = new_snapshot_id(md), md.last_sequence_number + 1
    vi = lb.version_info
    b0_entry = ContentEntry(ContentType.DATA, b0, "parquet", 0, 2, VersionInfo(EXISTING, vi.snapshot_id,
                                                                               vi.sequence_number,
                                                                               vi.sequence_number),
                            file_size_in_bytes=os.path.getsize(b0), first_row_id=4)
    puffin = write_puffin([deletion_vector_blob(a0, [0]), deletion_vector_blob(a1, [1])])
    q = d / "data" / "dvs.puffin"
    q.write_bytes(puffin.data)

    def dv(target: str, blob: Any) -> ContentEntry:
        return ContentEntry(ContentType.POSITION_DELETE, str(q), "puffin", 0, 1, VersionInfo(ADDED),
                            deletion_vector=DeletionVectorRef(blob.offset, blob.length),
                            file_size_in_bytes=len(puffin.data), referenced_file=target)

    _commit_root(d, [la, _vi(lb, DELETED, sid1, seq1), b0_entry, *(dv(t, b) for t, b in
                                                                   zip((a0, a1), puffin.metadata.blobs,
                                                                       strict=True))], sid1)
    roots = {up.snapshot_id: norm(up.root_manifest)}

    def step(expected: set[str], counts: dict[str, int]) -> None:
        md = load_table(str(d)).metadata
        head = md.current_snapshot()
        assert head is not None and head.root_manifest
        roots[head.snapshot_id] = norm(head.root_manifest)
        before = table_files(d)
        out = expire(d, older_than_ms=head.timestamp_ms)
        assert before - table_files(d) == expected
        assert {k: out[f"deleted_{k}_count"] for k in counts} == counts
        assert reached_by_icectl(d, [head.snapshot_id]) <= table_files(d)

    # LB is DELETED in S1: it goes with the upgrade snapshot; b0 lives on at the root.
    step({*lists, roots[up.snapshot_id], norm(lb.location)}, {"manifest_lists": 3, "manifest_files": 1,
                                                             "data_files": 0})
    # Writing commands refuse the proposal layout; the upgrade rewrites it into the spec layout:
    # a0 and a1 (with their DVs colocated) at the root, b0 in a new Parquet leaf; LA is unreferenced.
    icectl("remove-files", str(d), a0, expect=6)
    icectl("upgrade", str(d), "--to", "4", "--yes")
    mig = load_table(str(d)).metadata.current_snapshot()
    assert mig is not None and mig.root_manifest and mig.root_manifest.endswith(".parquet")
    roots[mig.snapshot_id] = norm(mig.root_manifest)
    dvs = icectl("inspect", "files", str(d), "--content", "deletes")["rows"]
    assert sorted((r["file_path"], r["referenced_data_file"]) for r in dvs) == [(str(q), a0), (str(q), a1)]
    icectl("remove-files", str(d), a0)  # a DELETED root row; its colocated DV goes with it
    dvs = icectl("inspect", "files", str(d), "--content", "deletes")["rows"]
    assert [(r["file_path"], r["referenced_data_file"]) for r in dvs] == [(str(q), a1)]  # a1's DV stays
    step({roots[sid1], norm(la.location), roots[mig.snapshot_id], norm(a0)},
         {"data_files": 1, "position_delete_files": 0, "manifest_files": 1, "manifest_lists": 2})
    icectl("remove-files", str(d), a1, b0)  # a1: a DELETED root row with the last DV of q; b0: a manifest DV
    s2 = next(s for s, p in roots.items() if s not in (up.snapshot_id, sid1, mig.snapshot_id))
    step({roots[s2], norm(a1), norm(b0), norm(str(q))}, {"data_files": 2, "position_delete_files": 1,
                                                         "manifest_lists": 1})
