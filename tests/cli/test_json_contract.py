"""Every command's --json document stays what it was before results were typed (issue 12).

tests/cli/data/json_contract_before.json holds the documents, exit codes, stderr lines and
terminal views that the code before typed results printed for the scenarios of
``support.json_contract`` (recorded with that code, never with this one). The same scenarios run
now must print the same: the same keys in the same order, the same values (apart from what
``normalize`` masks: temp paths, ids, uuids, times, file sizes).
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


def test_every_scenario_ran(runs: tuple[dict[str, Any], dict[str, Any]]) -> None:
    before, now = runs
    assert list(now) == list(before)


@pytest.mark.parametrize("name", list(json.loads(BEFORE.read_text())))
def test_same_document(runs: tuple[dict[str, Any], dict[str, Any]], name: str) -> None:
    before, now = runs[0][name], runs[1][name]
    assert now["exit_code"] == before["exit_code"]
    assert now["stderr"] == before["stderr"]
    assert _shape(now["json"]) == _shape(before["json"])  # key for key, in order, same types
    # Value for value; json.dumps keeps the order, so this compares the order of nested keys too.
    assert json.dumps(now["json"], indent=1) == json.dumps(before["json"], indent=1)
    # The terminal views ("text") were recorded too, but issue 16 redrew them on purpose (columns that
    # fit 120 characters, relative paths, human sizes): tests/cli/test_views.py checks them now.
