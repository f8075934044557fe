"""Every command's --json document stays what it was before results were typed (issue 12).

tests/cli/data/json_contract_before.json holds the documents, exit codes, stderr lines and
terminal views that the code before typed results printed for the scenarios of
``support.json_contract`` (recorded with that code, never with this one). The same scenarios run
now must print the same: the same keys in the same order, the same values (apart from what
``normalize`` masks: temp paths, ids, uuids, times, file sizes). Documents may grow: keys that were
not recorded are allowed anywhere (issue 16), the recorded ones keep their values and order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.json_contract import capture

BEFORE = Path(__file__).parent / "data" / "json_contract_before.json"


@pytest.fixture(scope="module")
def runs() -> tuple[dict[str, Any], dict[str, Any]]:
    return json.loads(BEFORE.read_text()), capture()


def _shape(value: Any) -> Any:
    """Keys in order (recursively), and the JSON type of every value."""
    if isinstance(value, dict):
        return [(k, _shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def _recorded_part(now: Any, before: Any) -> Any:
    """``now`` cut down to the keys ``before`` has, recursively, in ``now``'s order: documents may
    grow (issue 16 added keys, e.g. validate's by_rule, expire's cutoff), but a recorded key keeps
    its value and its place relative to the other recorded keys."""
    if isinstance(now, dict) and isinstance(before, dict):
        return {k: _recorded_part(v, before[k]) for k, v in now.items() if k in before}
    if isinstance(now, list) and isinstance(before, list) and len(now) == len(before):
        return [_recorded_part(n, b) for n, b in zip(now, before, strict=True)]
    return now


def test_new_keys_are_allowed_but_recorded_ones_are_kept() -> None:
    before = {"view": "x", "a": 1, "b": [{"c": 2}]}
    assert _recorded_part({"view": "x", "a": 1, "b": [{"c": 2, "new": 0}], "new": 3}, before) == before
    assert list(_recorded_part({"a": 1, "view": "x", "b": []}, before)) != list(before)  # order counts
    assert "a" not in _recorded_part({"view": "x", "b": []}, before)  # a lost key shows


def test_every_scenario_ran(runs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    before, now = runs
    assert list(now) == list(before)


@pytest.mark.parametrize("name", list(json.loads(BEFORE.read_text())))
def test_same_document(runs: tuple[dict[str, Any], dict[str, Any]], name: str) -> None:
    before, now = runs[0][name], runs[1][name]
    assert now["exit_code"] == before["exit_code"]
    assert now["stderr"] == before["stderr"]
    recorded = _recorded_part(now["json"], before["json"])
    assert _shape(recorded) == _shape(before["json"])  # key for key, in order, same types
    # Value for value; json.dumps keeps the order, so this compares the order of nested keys too.
    assert json.dumps(recorded, indent=1) == json.dumps(before["json"], indent=1)
    # The terminal views ("text") were recorded too, but issue 16 redrew them on purpose (columns that
    # fit 120 characters, relative paths, human sizes): tests/cli/test_views.py checks them now.
