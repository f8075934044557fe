"""icectl/ops/compact/run.py: the compaction loop (plan, write, commit, replan once), bin writing, summary keys.

The loop is driven by hand-made Steps; a committed run on a real table is in test_manifests.py and test_v4.py.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from icectl.errors import CommitConflictError, ExitCode
from icectl.ops.compact.plan import CompactOptions
from icectl.ops.compact.run import StalePlanError, Steps, rewrite_summary, run_compaction, write_bins
from icectl.storage import FileIO
from unit.ops.compact.plans import COMMIT_ID, FakePlan, FakeWritten, fake_plan, group, manifest

TABLE: Any = SimpleNamespace(identifier="db.t", io=FileIO())


class Script:
    """Steps whose write goes stale ``stale`` times; a replan finds work only if ``work_after_replan``."""

    def __init__(self, stale: int, work_after_replan: bool = True) -> None:
        self.stale, self.work_after_replan = stale, work_after_replan
        self.planned_on: list[Any] = []
        self.writes = 0

    def plan(self, _table: Any, _options: CompactOptions, fresh: Any, _engine: Any) -> FakePlan:
        self.planned_on.append(fresh)
        work = fresh is None or self.work_after_replan
        return fake_plan([group([manifest("/a", 1), manifest("/b", 1)], rewrite=work, live=2)])

    def write(self, _table: Any, _plan: FakePlan, _engine: Any) -> list[FakeWritten]:
        self.writes += 1
        if self.writes <= self.stale:
            raise StalePlanError(f"changed meanwhile ({self.writes})", fresh=f"fresh-{self.writes}")  # type: ignore[arg-type]
        raise AssertionError("not reached in these tests: a commit needs a real table")

    def steps(self) -> Steps[Any, Any]:
        return Steps(plan=self.plan, write=self.write, layout=None, rivals="rewrites")  # type: ignore[arg-type]


def test_a_dry_run_and_a_plan_without_work_write_nothing() -> None:
    script = Script(stale=0)
    run = run_compaction(TABLE, CompactOptions(), script.steps(), dry_run=True)
    assert run.dry_run and run.written is None and run.outcome is None and script.writes == 0
    idle = Script(stale=0)
    idle.plan = lambda t, o, f, e: fake_plan([group([manifest("/a", 1)], rewrite=False)])  # type: ignore[method-assign]
    run = run_compaction(TABLE, CompactOptions(), idle.steps())
    assert not run.plan.commits and run.outcome is None and idle.writes == 0 and not run.replanned


def test_a_stale_plan_is_planned_again_on_the_fresh_metadata_then_given_up() -> None:
    script = Script(stale=2)
    with pytest.raises(CommitConflictError, match=r"compacting db\.t lost to concurrent rewrites twice "
                                                  r"\(changed meanwhile \(2\)\)") as e:
        run_compaction(TABLE, CompactOptions(), script.steps())
    assert e.value.exit_code == ExitCode.CONFLICT
    assert script.planned_on == [None, "fresh-1"]  # exactly one replan, on what the stale commit saw
    assert script.writes == 2


def test_a_replan_that_finds_nothing_left_ends_without_a_commit() -> None:
    script = Script(stale=1, work_after_replan=False)
    run = run_compaction(TABLE, CompactOptions(), script.steps())
    assert run.replanned and run.outcome is None and run.written is None and not run.dry_run
    assert script.planned_on == [None, "fresh-1"] and script.writes == 1


def test_stale_plan_error_is_a_conflict_with_a_hint() -> None:
    e = StalePlanError("x", fresh=None)  # type: ignore[arg-type]
    assert e.exit_code == ExitCode.CONFLICT and e.hint == "run compact again"


def _two_group_plan(tmp_path: Path) -> FakePlan:
    return fake_plan([group([manifest("/a", 1)], rewrite=True, bins=2),
                      group([manifest("/s", 1)], rewrite=False),
                      group([manifest("/b", 1)], rewrite=True, bins=1)], metadata_dir=str(tmp_path))


def test_write_bins_names_manifests_as_java_and_returns_them_in_listing_order(tmp_path: Path) -> None:
    plan = _two_group_plan(tmp_path)
    verified: list[tuple[int, list[str]]] = []

    def write_one(g: Any, b: Any, path: str) -> FakeWritten:
        Path(path).write_bytes(b"m")
        return FakeWritten(g, 1, path, 1)

    written = write_bins(TABLE, plan, write_one, lambda g, ws: verified.append((id(g), [w.path for w in ws])),
                         "manifests")
    expected = [str(tmp_path / f"{COMMIT_ID}-m{i}.avro") for i in range(3)]  # <commit uuid>-m<index>.avro
    assert [w.path for w in written] == expected
    first, third = plan.groups[0], plan.groups[2]
    assert verified == [(id(first), expected[:2]), (id(third), expected[2:])]  # each group checks its own


def test_write_bins_deletes_everything_it_wrote_when_a_group_fails_verification(tmp_path: Path) -> None:
    plan = _two_group_plan(tmp_path)

    def write_one(g: Any, b: Any, path: str) -> FakeWritten:
        Path(path).write_bytes(b"m")
        return FakeWritten(g, 1, path, 1)

    def verify(g: Any, ws: list[FakeWritten]) -> None:
        if g is plan.groups[2]:
            raise ValueError("entries lost")
    with pytest.raises(ValueError, match="entries lost"):
        write_bins(TABLE, plan, write_one, verify, "manifests")
    assert list(tmp_path.iterdir()) == []


def test_rewrite_summary_has_javas_keys() -> None:
    plan = fake_plan([group([manifest("/a", 1), manifest("/b", 1), manifest("/c", 1)], rewrite=True, live=7),
                      group([manifest("/d", 1)], rewrite=False, live=100),
                      group([manifest("/e", 1), manifest("/f", 1)], rewrite=True, live=5, deleted=9)])
    assert rewrite_summary(plan, created=2, kept=4) == {
        "manifests-created": "2", "manifests-kept": "4", "manifests-replaced": "5", "entries-processed": "12",
        "changed-partition-count": "0"}
