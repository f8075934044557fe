"""Property (issue 17): on random histories, ``--engine spark`` answers exactly as the local engine.

Histories come from ``support.history`` (appends, deletes, overwrites, rewrites, row-level deletes,
manifest compactions, branches, tags, rollbacks, statistics, orphan files; v2 and v3; paths in
several spellings), sometimes with one manifest of the current snapshot damaged. On each, every
command the Spark engine runs is invoked twice through the CLI in this process: ``--engine local``
and ``--engine spark`` (which joins the session's Spark, ``local[2]``: its tasks run in Spark's
Python workers from the zip the engine ships). The two runs must give the same exit code, the same
stderr and the same JSON document but for its ``engine`` key and what depends on the wall clock
(``now_ms`` and the ages computed from it; the random names of the manifests ``compact`` would
write). The commands: ``expire-snapshots --dry-run``, ``inspect files|entries|partitions``,
``validate``, ``compact --dry-run``, ``remove-orphan-files
--dry-run``. Dry runs only, so both runs see the same table.

Examples are few (each Spark-engine command is a few Spark jobs): ``ICECTL_ENGINE_PROPERTY_EXAMPLES``
raises them (CI: 2, and one explicit example with a damaged manifest).
"""

from __future__ import annotations

import datetime
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st
from support.history import (
    SPELLINGS,
    UNIT_MS,
    AddDeletes,
    Append,
    CompactManifests,
    Delete,
    HistoryBuilder,
    Op,
    Orphan,
    Overwrite,
    RewriteFiles,
    Rollback,
    SetRef,
    SetStatistics,
    physical,
    read_current_metadata,
)
from typer.testing import CliRunner

from icectl.cli.app import app

# Generated examples; the explicit damaged one below runs in addition.
EXAMPLES = int(os.environ.get("ICECTL_ENGINE_PROPERTY_EXAMPLES", "2" if os.environ.get("CI") else "10"))

_branch = st.integers(0, 2)
_pick = st.integers(0, 7)
_append = st.builds(Append, branch=_branch, files=st.integers(1, 3))
_ops: st.SearchStrategy[Op] = st.one_of(
    _append,
    st.builds(Delete, branch=_branch, pick=_pick),
    st.builds(Overwrite, branch=_branch, pick=_pick, files=st.integers(1, 2)),
    st.builds(RewriteFiles, branch=_branch, pick=_pick, count=st.integers(1, 3), same_path=st.booleans()),
    st.builds(AddDeletes, branch=_branch, pick=_pick, count=st.integers(1, 2)),
    st.builds(CompactManifests, branch=_branch, deletes=st.booleans(), respell=st.integers(0, 3)),
    st.builds(SetRef, name=st.integers(0, 5), at=st.integers(0, 20)),
    st.builds(Rollback, steps=st.integers(1, 3)),
    st.builds(SetStatistics, at=st.integers(0, 20), partition=st.booleans()),
    st.builds(Orphan, in_metadata=st.booleans(), gap=st.just(0)),
    _append,  # appends twice as likely: later ops need files to work on
)
_histories = st.tuples(_append, st.lists(_ops, min_size=3, max_size=14)).map(lambda t: [t[0], *t[1]])

# Keys whose values come from the wall clock at the moment of the run (identical policies).
_CLOCK_KEYS = frozenset({"now_ms", "max_snapshot_age_ms", "snapshot_age_ms"})
# Names compact would give its new files: a random uuid and snapshot id per run.
_RANDOM_NAMES = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|snap-\d+-")


def comparable(doc: Any) -> Any:
    """A JSON document without its ``engine`` key and its wall-clock values."""
    if isinstance(doc, dict):
        return {k: comparable(v) for k, v in doc.items() if k != "engine" and k not in _CLOCK_KEYS}
    if isinstance(doc, list):
        return [comparable(v) for v in doc]
    if isinstance(doc, str):
        return _RANDOM_NAMES.sub("<random>", doc)
    return doc


def _iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def commands(table: str, older_than_ms: int, retain_last: int) -> list[list[str]]:
    now = _iso((int(datetime.datetime.now(datetime.timezone.utc).timestamp()) + 1) * 1000)
    return [
        ["expire-snapshots", table, "--older-than", _iso(older_than_ms), "--retain-last", str(retain_last),
         "--dry-run"],
        ["inspect", "files", table],
        ["inspect", "entries", table],
        ["inspect", "partitions", table],
        ["validate", table],
        ["compact", table, "--dry-run"],
        ["remove-orphan-files", table, "--dry-run", "--older-than", now, "--allow-recent"],
    ]


def run(args: list[str], engine: str) -> tuple[int, Any, str]:
    r = CliRunner().invoke(app, [*args, "--json", "--engine", engine])
    assert r.exception is None or isinstance(r.exception, SystemExit), (args, engine, r.exception)
    doc = json.loads(r.stdout) if r.stdout.strip() else None
    if doc is not None:
        assert doc["engine"]["name"] == engine, doc["engine"]
    return r.exit_code, doc, r.stderr


def _damage(h: HistoryBuilder, which: int) -> str | None:
    """Cut one manifest of the current snapshot in half (a torn upload): a read error for both engines."""
    main = h.refs.get("main")
    if main is None:
        return None
    manifests = list(h.snapshots[main.snapshot_id].manifests)
    if not manifests:
        return None
    path = Path(physical(manifests[which % len(manifests)]))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return str(path)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(format_version=st.sampled_from([2, 3]), spelling=st.sampled_from(SPELLINGS), ops=_histories,
       steps_back=st.integers(0, 6), retain_last=st.integers(1, 3),
       damage=st.sampled_from([None, None, None, 0, 1]))  # mostly intact (shrinks to intact)
@example(format_version=3, spelling="file:", ops=[Append(files=2), AddDeletes(), Append(), CompactManifests()],
         steps_back=1, retain_last=1, damage=0)
# Two spellings of one expired data file (data/x and data/../data/x): both engines report the same one.
@example(format_version=2, spelling="plain",
         ops=[Append(branch=0, files=3, gap=1), CompactManifests(branch=2, deletes=False, respell=3, gap=1),
              Rollback(steps=1, gap=1), Overwrite(branch=2, pick=0, files=1, gap=1),
              CompactManifests(branch=2, deletes=False, respell=3, gap=1),
              CompactManifests(branch=2, deletes=False, respell=1, gap=1)],
         steps_back=0, retain_last=2, damage=None)
def test_spark_engine_equals_local_engine(spark_engine: Any, format_version: int, spelling: str, ops: list[Op],
                                          steps_back: int, retain_last: int, damage: int | None) -> None:
    with tempfile.TemporaryDirectory(prefix="engine-prop-") as tmp:
        h = HistoryBuilder(Path(tmp) / "t", format_version=format_version, spelling=spelling)
        for op in ops:
            h.apply(op)
        damaged = _damage(h, damage) if damage is not None else None
        note(f"history:\n{h.describe()}\ndamaged: {damaged}")
        event("damaged manifest" if damaged else "intact")
        _, before = read_current_metadata(h.table_dir)
        for args in commands(str(h.table_dir), h.clock_ms - steps_back * UNIT_MS, retain_last):
            local = run(args, "local")
            spark = run(args, "spark")
            assert spark[0] == local[0], (args, "exit codes differ", local, spark)
            assert spark[2] == local[2], (args, "stderr differs")
            assert comparable(spark[1]) == comparable(local[1]), (args, "JSON differs")
            event(f"{args[0]} {args[1] if args[0] == 'inspect' else ''}: exit {local[0]}")
        # Dry runs and reads: neither engine wrote a new metadata version.
        assert read_current_metadata(h.table_dir)[1] == before
