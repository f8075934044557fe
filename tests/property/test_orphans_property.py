"""Property: remove-orphan-files deletes exactly the unreferenced files older than the cutoff.

Random histories (appends, deletes, overwrites, data and manifest compactions, row-level deletes,
branches, tags, rollbacks, statistics; format v2 and v3; any path spelling; with or without
Hadoop checksums) are built by ``support.history``; then files are planted where a failed
writer or a user leaves them (data and partition folders, metadata, the top of the table,
hidden folders and names) and every file gets a random age around the cutoff.

What any snapshot reaches is read here with fastavro from the metadata JSON, never through
icectl, so a history step that the builder's model does not know (a cherry-pick done with
icectl's own command, say) is judged all the same. After the run:

* every file any snapshot reaches, every metadata file of the log, the current one and
  ``version-hint.text`` still exist;
* every unreferenced, visible file older than the cutoff is gone (with its checksum), every
  younger or hidden one stays, and nothing else changed.

To add a history step kind: a strategy in ``STEPS`` and, for a step that is not a
``support.history`` operation, a handler in ``HANDLERS`` (``handler(builder, step)``).

After the builder's steps, icectl's own snapshot management runs on the table (``FINALS``):
cherry-picks of random snapshots onto main (appends re-applied as new snapshots with new
manifests, dynamic overwrites, fast-forwards; what Java refuses is skipped) and fast-forwards
of random branches. They come last because the builder's model would not know them.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from support.history import (
    SPELLINGS,
    AddDeletes,
    Append,
    CompactManifests,
    Delete,
    HistoryBuilder,
    Orphan,
    Overwrite,
    RemoveRef,
    RewriteFiles,
    Rollback,
    SetRef,
    SetStatistics,
    physical,
    read_current_metadata,
)

from icectl.errors import IcectlError
from icectl.ops.orphans import remove_orphan_files
from icectl.ops.snapshots import cherrypick, fast_forward
from icectl.spec.snapshots import ancestors_of
from icectl.table import load_table

DAY_MS = 86_400_000
NOW_MS = int(time.time() * 1000)
CUTOFF_MS = NOW_MS - 3 * DAY_MS
# Ages relative to the cutoff: well before, just before, exactly at (kept), just after, well after.
_OFFSETS = st.sampled_from([-5 * DAY_MS, -1, 0, 1, DAY_MS])

_branch = st.integers(0, 3)
_pick = st.integers(0, 7)
_gap = st.integers(1, 3)
_append = st.builds(Append, branch=_branch, files=st.integers(1, 2), gap=_gap)

# One strategy per step kind.
STEPS: list[st.SearchStrategy[Any]] = [
    _append,
    _append,
    st.builds(Delete, branch=_branch, pick=_pick, gap=_gap),
    st.builds(Overwrite, branch=_branch, pick=_pick, files=st.integers(1, 2), gap=_gap),
    st.builds(RewriteFiles, branch=_branch, pick=_pick, count=st.integers(1, 3), same_path=st.booleans(), gap=_gap),
    st.builds(AddDeletes, branch=_branch, pick=_pick, count=st.integers(1, 2), gap=_gap),
    st.builds(CompactManifests, branch=_branch, deletes=st.booleans(), respell=st.integers(0, 3), gap=_gap),
    st.builds(SetRef, name=st.integers(0, 5), at=st.integers(0, 40), gap=_gap),
    st.builds(RemoveRef, pick=_pick, gap=_gap),
    st.builds(Rollback, steps=st.integers(1, 4), gap=_gap),
    st.builds(SetStatistics, at=st.integers(0, 40), partition=st.booleans(), gap=_gap),
    st.builds(Orphan, in_metadata=st.booleans(), gap=st.just(0)),
]

# Steps that are not support.history operations: type -> handler(builder, step).
HANDLERS: dict[type, Callable[[HistoryBuilder, Any], None]] = {}


def apply_step(b: HistoryBuilder, step: Any) -> None:
    handler = HANDLERS.get(type(step))
    if handler is not None:
        handler(b, step)
        b.applied.append(repr(step))
    else:
        b.apply(step)


@dataclass(frozen=True)
class CherryPick:
    pick: int  # index into the table's snapshots, in commit order


@dataclass(frozen=True)
class FastForward:
    branch: int  # index into the table's branches other than main
    to: int  # index into every ref


def apply_final(b: HistoryBuilder, step: CherryPick | FastForward) -> str:
    """One of icectl's own snapshot-management commands on the table as it is now."""
    table = load_table(str(b.table_dir))
    md = table.metadata
    try:
        if isinstance(step, CherryPick):
            main = md.snapshot_for_ref("main")
            on_main = {s.snapshot_id for s in ancestors_of(main.snapshot_id if main else None, md.snapshots_by_id)}
            # Mostly snapshots main lacks (what a cherry-pick is for); any snapshot now and then.
            # Newest first: the staged append comes first.
            candidates = [s for s in reversed(md.snapshots) if s.snapshot_id not in on_main] or list(md.snapshots)
            if not candidates:
                return "no snapshot"
            got = cherrypick(table, candidates[step.pick % len(candidates)].snapshot_id)
        else:
            branches = sorted(n for n, r in md.refs.items() if r.is_branch and n != "main")
            if not branches:
                return "no branch"
            names = sorted(md.refs)
            got = fast_forward(table, branches[step.branch % len(branches)], names[step.to % len(names)])
    except IcectlError as e:  # refused as Java refuses it (not an ancestor, already picked, ...)
        return f"refused: {e.one_line()[:120]}"
    return json.dumps(got.to_json(), default=str)[:300]


_finals = st.lists(st.one_of(st.builds(CherryPick, pick=st.integers(0, 40)),
                             st.builds(FastForward, branch=st.integers(0, 3), to=st.integers(0, 6))), max_size=3)

# Before cherry-picks: a branch off some snapshot and an append on it, so that there is
# usually something main lacks to pick.
_staging = st.tuples(st.builds(SetRef, name=st.integers(0, 2), at=st.integers(0, 40), gap=_gap),
                     st.builds(Append, branch=st.integers(1, 3), files=st.integers(1, 2), gap=_gap))

_histories = st.tuples(_append, st.integers(3, 20).flatmap(
    lambda n: st.lists(st.one_of(STEPS), min_size=n, max_size=n))).map(lambda t: [t[0], *t[1]])


@dataclass(frozen=True)
class Planted:
    folder: int  # index into FOLDERS
    offset_ms: int  # mtime relative to the cutoff
    checksum: bool


# Where a planted file goes; hidden ones (a name or a folder starting with _ or .) must always stay.
FOLDERS = ("data", "data/id_bucket=3", "metadata", "", "data/_temporary/0", "data/.staging", "metadata/_x")
_planted = st.lists(st.builds(Planted, folder=st.integers(0, len(FOLDERS) - 1), offset_ms=_OFFSETS,
                              checksum=st.booleans()), max_size=8)


def _avro(path: str) -> list[dict[str, Any]]:
    with open(physical(path), "rb") as f:
        return list(fastavro.reader(f))


def reached(table_dir: Path) -> set[str]:
    """Every file the table's metadata reaches, read with json and fastavro only."""
    current, md = read_current_metadata(table_dir)
    out = {str(current), str(table_dir / "metadata" / "version-hint.text")}
    out |= {physical(e["metadata-file"]) for e in md.get("metadata-log", [])}
    for key in ("statistics", "partition-statistics"):
        out |= {physical(s["statistics-path"]) for s in md.get(key, [])}
    for snap in md.get("snapshots", []):
        out.add(physical(snap["manifest-list"]))
        for m in _avro(snap["manifest-list"]):
            out.add(physical(m["manifest_path"]))
            out |= {physical(e["data_file"]["file_path"]) for e in _avro(m["manifest_path"]) if e["status"] != 2}
    return out


def _set_mtime(path: str, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def _hidden(rel: str) -> bool:
    return any(part.startswith(("_", ".")) for part in Path(rel).parts)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(format_version=st.sampled_from([2, 3]), spelling=st.sampled_from(SPELLINGS), checksums=st.booleans(),
       steps=_histories, staging=_staging, finals=_finals, planted=_planted,
       ages=st.lists(_OFFSETS, min_size=1, max_size=8))
def test_orphans_older_than_the_cutoff_go_and_everything_reached_stays(
        format_version: int, spelling: str, checksums: bool, steps: list[Any], staging: tuple[Any, Any],
        finals: list[Any],
        planted: list[Planted], ages: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        b = HistoryBuilder(Path(tmp) / "t", format_version=format_version, spelling=spelling, checksums=checksums)
        for step in steps:
            apply_step(b, step)
        if any(isinstance(f, CherryPick) for f in finals):
            for step in staging:
                apply_step(b, step)
        for final in finals:
            b.applied.append(f"{final!r} -> {apply_final(b, final)}")
        d = b.table_dir
        # Every file written gets a random age: valid files must stay whatever their age.
        files = sorted(os.path.join(r, n) for r, _ds, ns in os.walk(d) for n in ns)
        for i, f in enumerate(files):
            _set_mtime(f, CUTOFF_MS + ages[i % len(ages)])
        for i, p in enumerate(planted):
            f = d / FOLDERS[p.folder] / f"planted-{i}.parquet"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(b"x")
            _set_mtime(str(f), CUTOFF_MS + p.offset_ms)
            if p.checksum:
                crc = f.parent / f".{f.name}.crc"
                crc.write_bytes(b"c")
                _set_mtime(str(crc), CUTOFF_MS + p.offset_ms)
        note(b.describe())
        metadata_location = load_table(str(d)).metadata_location
        live = reached(d)
        before = {os.path.join(r, n): os.stat(os.path.join(r, n)).st_mtime_ns // 1_000_000
                  for r, _ds, ns in os.walk(d) for n in ns}
        doomed = {p for p, ms in before.items()
                  if p not in live and ms < CUTOFF_MS and not _hidden(os.path.relpath(p, d))}
        sidecars = {os.path.join(os.path.dirname(p), f".{os.path.basename(p)}.crc") for p in doomed} & set(before)

        got = remove_orphan_files(load_table(str(d)), older_than_ms=CUTOFF_MS, now_ms=NOW_MS)
        after = {os.path.join(r, n) for r, _ds, ns in os.walk(d) for n in ns}
        note(json.dumps(got.to_json(), indent=1, default=str))
        assert live <= after, sorted(live - after)
        assert {physical(p) for p in got.orphan_file_locations} == doomed
        assert after == set(before) - doomed - sidecars
        assert got.failures == [] and got.exit_code == 0
        assert load_table(str(d)).metadata_location == metadata_location  # no commit
