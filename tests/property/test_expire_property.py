"""Property: expire-snapshots keeps exactly what retained snapshots reach and deletes the rest.

Random histories (appends, deletes, overwrites, data and manifest compactions, row-level deletes,
branches, tags, rollbacks, statistics, orphan files; format v2 and v3) are built by
``support.history`` with icectl's writers; random policies (cutoff, retain-last, explicit ids,
table properties, per-ref retention, max-ref-age) are applied with a controlled ``now_ms``.

Everything expected comes from the builder's own model and an independent transcription of
Java's RemoveSnapshots rules (/work/shared/spec/iceberg-notes.md, section 3a), never from
icectl's readers. After expiry:

* the snapshots kept are the ones the rules keep, the refs kept are the ones the rules keep;
* (a) every file reachable from a retained snapshot exists;
* (b) every file reachable before and from no retained snapshot is gone;
* (c) no other file was deleted (orphans and replaced statistics files stay);
* (d) metadata files are untouched, one new version was added (only if something changed).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import fastavro
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from support.history import (
    CATEGORY_TO_RESULT,
    SPELLINGS,
    T0_MS,
    UNIT_MS,
    AddDeletes,
    Append,
    CompactManifests,
    Delete,
    HistoryBuilder,
    Op,
    Orphan,
    Overwrite,
    RemoveRef,
    RewriteFiles,
    Rollback,
    SetRef,
    SetStatistics,
    checksum_sidecar,
    physical,
    read_current_metadata,
)

from icectl.catalog import operations
from icectl.config import Config
from icectl.errors import RefusedError
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.expire.result import ExpireResult
from icectl.table import load_table

MAX_LONG = 2**63 - 1
DAY_MS = 24 * 3600 * 1000
MAX_AGE_KEY = "history.expire.max-snapshot-age-ms"
MIN_KEEP_KEY = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE_KEY = "history.expire.max-ref-age-ms"
# ~100 examples take about 75 s on 2 cores; CI runs 60 of them (derandomized, so the same 60
# every run) to keep the whole suite under its 15 minutes; raise it for a deeper hunt.
EXAMPLES = int(os.environ.get("ICECTL_EXPIRE_PROPERTY_EXAMPLES", "30" if os.environ.get("CI") else "100"))

# --------------------------------------------------------------------------- strategies

_branch = st.integers(0, 3)
_pick = st.integers(0, 7)
_gap = st.integers(1, 3)  # >= 1: strictly increasing timestamps, as one writer's clock

_append = st.builds(Append, branch=_branch, files=st.integers(1, 2), gap=_gap)
_ops: st.SearchStrategy[Op] = st.one_of(
    _append,
    st.builds(Delete, branch=_branch, pick=_pick, gap=_gap),
    st.builds(Overwrite, branch=_branch, pick=_pick, files=st.integers(1, 2), gap=_gap),
    st.builds(RewriteFiles, branch=_branch, pick=_pick, count=st.integers(1, 3), same_path=st.booleans(),
              gap=_gap),
    st.builds(AddDeletes, branch=_branch, pick=_pick, count=st.integers(1, 2), gap=_gap),
    st.builds(CompactManifests, branch=_branch, deletes=st.booleans(), respell=st.integers(0, 3), gap=_gap),
    st.builds(SetRef, name=st.integers(0, 5), at=st.integers(0, 40), gap=_gap),
    st.builds(RemoveRef, pick=_pick, gap=_gap),
    st.builds(Rollback, steps=st.integers(1, 4), gap=_gap),
    st.builds(SetStatistics, at=st.integers(0, 40), partition=st.booleans(), gap=_gap),
    st.builds(Orphan, in_metadata=st.booleans(), gap=st.just(0)),
    _append,  # appends three times as likely: later ops need files to work on
    _append,
)
# A first append, so that most histories have snapshots to expire.
# The length is drawn first: hypothesis' own list sizes cluster near the minimum.
_histories = st.tuples(_append, st.integers(4, 39).flatmap(lambda n: st.lists(_ops, min_size=n, max_size=n))
                       ).map(lambda t: [t[0], *t[1]])


@dataclass(frozen=True)
class Policy:
    now_ms: int
    expire: ExpirePolicy
    properties: dict[str, str]
    ref_retention: dict[str, tuple[int | None, int | None, int | None]]


def _draw_policy(data: st.DataObject, h: HistoryBuilder) -> Policy:
    now = h.clock_ms + data.draw(st.integers(0, 3), label="now_steps") * UNIT_MS
    stamps = sorted({s.timestamp_ms for s in h.snapshots.values()}) or [T0_MS]
    # Cutoffs and ages land exactly on, just before or just after a snapshot's timestamp.
    near = st.tuples(st.sampled_from(stamps), st.sampled_from([-1, 0, 1])).map(sum)
    instant = st.one_of(near, st.integers(T0_MS - UNIT_MS, now + UNIT_MS))
    age = instant.map(lambda t: max(0, now - t))
    older_than = data.draw(st.none() | instant, label="older_than_ms")
    retain_last = data.draw(st.none() | st.integers(1, 5), label="retain_last")
    heads = {r.snapshot_id for r in h.refs.values()}
    candidates = [s for s in h.snapshots if s not in heads]
    explicit = data.draw(st.lists(st.sampled_from(candidates), max_size=3, unique=True) if candidates
                         else st.just([]), label="explicit_ids")
    # Rarely (hypothesis favours the first choice) also a ref head: refused unless its ref ages out.
    if heads and data.draw(st.sampled_from([False] * 19 + [True]), label="explicit_head"):
        explicit.append(data.draw(st.sampled_from(sorted(heads)), label="head_id"))
    properties: dict[str, str] = {}
    if data.draw(st.booleans(), label="set_max_age_prop"):
        properties[MAX_AGE_KEY] = str(data.draw(age, label=MAX_AGE_KEY))
    if data.draw(st.booleans(), label="set_min_keep_prop"):
        properties[MIN_KEEP_KEY] = str(data.draw(st.integers(1, 4), label=MIN_KEEP_KEY))
    if data.draw(st.booleans(), label="set_max_ref_age_prop"):
        properties[MAX_REF_AGE_KEY] = str(data.draw(age, label=MAX_REF_AGE_KEY))
    ref_retention: dict[str, tuple[int | None, int | None, int | None]] = {}
    for name in sorted(h.refs):
        if data.draw(st.integers(0, 2), label=f"retention_{name}") == 0:
            ref_retention[name] = (data.draw(st.none() | st.integers(1, 4), label=f"{name}.min-snapshots-to-keep"),
                                   data.draw(st.none() | age, label=f"{name}.max-snapshot-age-ms"),
                                   data.draw(st.none() | age, label=f"{name}.max-ref-age-ms"))
    return Policy(now, ExpirePolicy(older_than_ms=older_than, retain_last=retain_last, snapshot_ids=tuple(explicit),
                                    clean_expired_metadata=data.draw(st.booleans(), label="clean_expired_metadata")),
                  properties, ref_retention)


# --------------------------------------------------------------------------- the rules, transcribed


@dataclass(frozen=True)
class Expected:
    refused: bool
    retained: frozenset[int]
    refs: frozenset[str]


def expected_retention(h: HistoryBuilder, p: Policy) -> Expected:
    """Java's RemoveSnapshots.internalApply (notes 3a), on the model's snapshots and refs."""
    snaps, now, pol = h.snapshots, p.now_ms, p.expire
    props = h.properties  # this policy's and any earlier round's
    default_cutoff = pol.older_than_ms if pol.older_than_ms is not None else (
        now - int(props.get(MAX_AGE_KEY, 5 * DAY_MS)))
    default_min = pol.retain_last if pol.retain_last is not None else int(props.get(MIN_KEEP_KEY, 1))
    default_ref_age = int(props.get(MAX_REF_AGE_KEY, MAX_LONG))
    # 1. refs: main always; others while their snapshot is young enough for the ref's max age.
    kept = {n: r for n, r in h.refs.items() if n == "main" or now - snaps[r.snapshot_id].timestamp_ms <= (
        r.max_ref_age_ms if r.max_ref_age_ms is not None else default_ref_age)}
    # 2. ref heads are retained; naming one explicitly is refused.
    retained = {r.snapshot_id for r in kept.values()}
    if retained & set(pol.snapshot_ids):
        return Expected(True, frozenset(snaps), frozenset(h.refs))
    referenced: set[int] = set()
    for r in kept.values():
        if r.type != "branch":
            referenced.add(r.snapshot_id)  # 3. a tag keeps its own snapshot only
            continue
        cutoff = now - r.max_snapshot_age_ms if r.max_snapshot_age_ms is not None else default_cutoff
        min_keep = r.min_snapshots_to_keep if r.min_snapshots_to_keep is not None else default_min
        chain = h.ancestors(r.snapshot_id)
        referenced.update(chain)
        branch_kept: list[int] = []
        for sid in chain:  # 3. ancestors while among the first min_keep or younger than the cutoff
            if len(branch_kept) < min_keep or snaps[sid].timestamp_ms >= cutoff:
                branch_kept.append(sid)
            else:
                break
        retained.update(branch_kept)
    # 4. snapshots no kept ref reaches: kept while younger than the default cutoff.
    retained.update(s for s in snaps if s not in referenced and snaps[s].timestamp_ms >= default_cutoff)
    # 5. explicit ids go even if a rule would keep them.
    return Expected(False, frozenset(retained - set(pol.snapshot_ids)), frozenset(kept))


def expected_snapshot_log(log: list[dict[str, Any]], alive: set[int]) -> list[int]:
    """Java's removeSnapshots: a removed entry clears all history before it."""
    out: list[int] = []
    for e in log:
        if e["snapshot-id"] in alive:
            out.append(e["snapshot-id"])
        else:
            out.clear()
    return out


# --------------------------------------------------------------------------- disk state


def _files(table_dir: Path) -> dict[str, str]:
    """Every file under the table: path -> content digest (metadata files must not change)."""
    return {str(p): hashlib.sha1(p.read_bytes()).hexdigest() for p in table_dir.rglob("*") if p.is_file()}


def _is_table_metadata(path: str) -> bool:
    name = os.path.basename(path)
    return name == "version-hint.text" or name.endswith(".metadata.json")


def _check_model_knows_every_file(h: HistoryBuilder, files: Iterable[str]) -> None:
    """A builder self-check: each file on disk is table metadata, a categorised file, an orphan or
    a checksum of one of these, so (c) below really covers every file."""
    known = set(h.categories) | h.orphans
    known |= {checksum_sidecar(p) for p in known} if h.checksums else set()
    unknown = sorted(p for p in files if p not in known and not _is_table_metadata(p))
    assert not unknown, f"the model does not know {unknown}"


# --------------------------------------------------------------------------- the property


def _check(h: HistoryBuilder, p: Policy) -> None:
    table_dir = h.table_dir
    h.configure(p.properties, p.ref_retention)
    old_meta_path, old_meta = read_current_metadata(table_dir)
    before = _files(table_dir)
    _check_model_knows_every_file(h, before)
    expected = expected_retention(h, p)
    note(f"history:\n{h.describe()}")
    note(f"policy: {p}")
    note(f"expected: {expected}")
    steps = [(s.snapshot_id, s.parent_id, (s.timestamp_ms - T0_MS) // UNIT_MS) for s in h.snapshots.values()]
    note(f"snapshots (id, parent, clock step): {steps}")
    note(f"refs: {h.refs}")

    table = load_table(str(table_dir), config=Config(catalogs={}))
    if expected.refused:
        event("refused: explicit id is a ref head")
        for dry_run in (True, False):
            with pytest.raises(RefusedError):
                expire_snapshots(table, p.expire, now_ms=p.now_ms, dry_run=dry_run)
        assert _files(table_dir) == before, "a refused expiry changed files"
        return
    dry = expire_snapshots(table, p.expire, now_ms=p.now_ms, dry_run=True)
    assert _files(table_dir) == before, "a dry run changed files"
    would_delete = {physical(path) for paths in dry.data["would_delete"].values() for path in paths}
    # The commit is stamped with the policy's now, not the wall clock: the model's clock (and so the
    # next round's strategies) must not depend on when the test runs (hypothesis replays examples).
    with mock.patch.object(operations, "now_ms", return_value=p.now_ms):
        result: ExpireResult = expire_snapshots(table, p.expire, now_ms=p.now_ms)
    assert result.exit_code == 0, result.data
    assert not result.data.get("failures"), result.data

    new_meta_path, new_meta = read_current_metadata(table_dir)
    retained = {s["snapshot-id"] for s in new_meta.get("snapshots", [])}
    refs = {n: r["snapshot-id"] for n, r in (new_meta.get("refs") or {}).items()}
    all_ids = set(h.snapshots)
    expired = all_ids - expected.retained
    changed = bool(expired) or expected.refs != set(h.refs)

    # The policy, independently.
    assert retained == expected.retained, (f"kept {sorted(retained)}, rules keep {sorted(expected.retained)}; "
                                           f"extra {sorted(retained - expected.retained)}, "
                                           f"missing {sorted(expected.retained - retained)}")
    assert set(refs) == expected.refs
    assert all(refs[n] == h.refs[n].snapshot_id for n in refs), "a kept ref moved"
    if changed:
        assert new_meta_path != old_meta_path
        assert [e["snapshot-id"] for e in new_meta.get("snapshot-log", [])] == expected_snapshot_log(
            old_meta.get("snapshot-log", []), retained)
    else:
        assert new_meta_path == old_meta_path, "nothing to expire, yet a new metadata version was written"

    # Files, from the model.
    keep = h.reachable_from(retained)
    was = h.reachable_from(all_ids)
    doomed = {path: cat for path, cat in was.items() if path not in keep}
    # Hadoop's checksum sidecars go with their file, and only with it.
    sidecars = {checksum_sidecar(path) for path in doomed if h.checksums}
    after = _files(table_dir)
    missing = sorted(path for path in keep if path not in after)
    assert not missing, f"(a) files of retained snapshots were deleted: {missing}"
    survivors = sorted(path for path in doomed if path in after)
    assert not survivors, f"(b) files reachable only from expired snapshots remain: {survivors}"
    assert not sorted(path for path in sidecars if path in after), "checksum files of deleted files remain"
    wrongly_deleted = sorted(path for path in before if path not in after and path not in doomed
                             and path not in sidecars)
    assert not wrongly_deleted, f"(c) files outside expired snapshots' reach were deleted: {wrongly_deleted}"
    assert all(path in after for path in h.orphans), "(c) an orphan was deleted"
    added = sorted(set(after) - set(before))
    # A new metadata version: the only file expiry may add, and nothing else is rewritten.
    assert added == ([str(new_meta_path)] if changed else []), f"(d) unexpected new files {added}"
    rewritten = sorted(path for path in before if path in after and after[path] != before[path])
    assert rewritten == ([str(table_dir / "metadata" / "version-hint.text")] if changed else []), (
        f"(d) existing files rewritten: {rewritten}")

    assert would_delete == set(doomed), (f"dry run would delete {sorted(would_delete - set(doomed))} too and "
                                         f"not {sorted(set(doomed) - would_delete)}")

    # The result counts what the model expects, per Spark's categories.
    counts = dict.fromkeys(CATEGORY_TO_RESULT.values(), 0)
    for cat in doomed.values():
        counts[CATEGORY_TO_RESULT[cat]] += 1
    got = {name: result.data[f"deleted_{name}_count"] for name in counts}
    assert got == counts, f"deleted counts {got}, model says {counts}"
    assert sorted(result.data["expired_snapshots"]) == sorted(expired)
    # Coverage of the generated cases (pytest --hypothesis-show-statistics).
    event(f"v{h.format_version}")
    event(f"spelling {h.spelling}")
    event("snapshots: " + ("0" if not all_ids else "1-9" if len(all_ids) < 10 else "10+"))
    event("expired: " + ("none" if not expired else "all but heads" if len(retained) == len(set(refs.values()))
                         else "some"))
    event("deleted data files" if counts["data_files"] else "no data file deleted")
    for cat in sorted(set(doomed.values())):
        event(f"deleted some {cat}")
    if len(refs) > 1:
        event("several refs kept")
    if expected.refs != set(h.refs):
        event("a ref aged out")
    h.expired(expired, p.now_ms)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(format_version=st.sampled_from([2, 3]), spelling=st.sampled_from(SPELLINGS), checksums=st.booleans(),
       ops=_histories, data=st.data())
def test_expire_keeps_exactly_what_retained_snapshots_reach(format_version: int, spelling: str, checksums: bool,
                                                            ops: list[Op], data: st.DataObject) -> None:
    # Function-scoped fixtures are not reset between hypothesis examples: one temp dir each.
    with tempfile.TemporaryDirectory(prefix="expire-prop-") as tmp:
        h = HistoryBuilder(Path(tmp) / "t", format_version=format_version, spelling=spelling, checksums=checksums)
        for op in ops:
            h.apply(op)
        _check(h, _draw_policy(data, h))
        # Sometimes a second round on the expired table: parents are now missing, logs trimmed.
        if data.draw(st.booleans(), label="expire_again"):
            event("expired twice")
            for op in data.draw(st.lists(_ops, max_size=10), label="more_ops"):
                h.apply(op)
            _check(h, _draw_policy(data, h))


# --------------------------------------------------------------------------- the builder itself


def _avro_records(path: str) -> list[dict[str, Any]]:
    with open(physical(path), "rb") as f:
        return list(fastavro.reader(f))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(format_version=st.sampled_from([2, 3]), spelling=st.sampled_from(SPELLINGS), ops=_histories)
def test_builder_model_matches_what_it_wrote(format_version: int, spelling: str, ops: list[Op]) -> None:
    """The model is the oracle above, so check it against the files as written, read with
    fastavro and json (not icectl's readers): snapshots, parents, refs, manifests, live files."""
    with tempfile.TemporaryDirectory(prefix="expire-model-") as tmp:
        h = HistoryBuilder(Path(tmp) / "t", format_version=format_version, spelling=spelling)
        for op in ops:
            h.apply(op)
        _, md = read_current_metadata(h.table_dir)
        snaps = {s["snapshot-id"]: s for s in md.get("snapshots", [])}
        assert set(snaps) == set(h.snapshots)
        assert {n: r["snapshot-id"] for n, r in (md.get("refs") or {}).items()} == {
            n: r.snapshot_id for n, r in h.refs.items()}
        if "main" in h.refs:
            assert md["current-snapshot-id"] == h.refs["main"].snapshot_id
        for sid, model in h.snapshots.items():
            assert snaps[sid].get("parent-snapshot-id") == model.parent_id
            assert snaps[sid]["timestamp-ms"] == model.timestamp_ms
            assert snaps[sid]["manifest-list"] == model.manifest_list
            listed = _avro_records(model.manifest_list)
            assert [m["manifest_path"] for m in listed] == list(model.manifests)
            live: tuple[set[str], set[str]] = (set(), set())
            for m in listed:
                for e in _avro_records(m["manifest_path"]):
                    if e["status"] != 2:  # not DELETED
                        live[0 if e["data_file"]["content"] == 0 else 1].add(physical(e["data_file"]["file_path"]))
            assert live == h.live_files(sid)


def test_expire_same_file_spelled_two_ways() -> None:
    """Regression (found by the property above against icectl/expire.py at 708b1eb): a manifest
    compaction by a writer that spells paths ``file:/...`` names the current snapshot's data file
    differently from the expired snapshot's manifest; comparing raw strings deleted the live file."""
    with tempfile.TemporaryDirectory(prefix="expire-spell-") as tmp:
        h = HistoryBuilder(Path(tmp) / "t")
        h.apply(Append())
        h.apply(CompactManifests(respell=SPELLINGS.index("file:")))
        (live,), _ = h.live_files(1002)
        table = load_table(str(h.table_dir), config=Config(catalogs={}))
        result = expire_snapshots(table, ExpirePolicy(older_than_ms=h.snapshots[1002].timestamp_ms),
                                  now_ms=h.clock_ms)
        assert result.data["expired_snapshots"] == [1001]
        assert os.path.exists(live), "the current snapshot's data file was deleted"
        assert not os.path.exists(physical(h.snapshots[1001].manifest_list))
