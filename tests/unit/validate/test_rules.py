"""The rule catalogue (icectl/validate/rules.py): every rule it declares has a breaking case, in the test
file of the module that declares it.

The cases: test_metadata_rules.py, test_manifest_list_rules.py, test_manifest_rules.py, test_delete_rules.py,
test_file_rules.py and test_v4_rules.py (v4_rules.py and v4_spec_rules.py); their test ids are the rule ids, so
``pytest tests/unit/validate -k "manifest-list."`` runs the cases of manifest_list_rules.py.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from icectl.validate import (
    CATALOGUE,
    delete_rules,
    file_rules,
    manifest_list_rules,
    manifest_rules,
    metadata_rules,
    v4_rules,
    v4_spec_rules,
)
from unit.validate.breaking import declared_rules
from unit.validate.test_delete_rules import CASES as DELETE_CASES
from unit.validate.test_file_rules import CASES as FILE_CASES
from unit.validate.test_manifest_list_rules import CASES as MANIFEST_LIST_CASES
from unit.validate.test_manifest_rules import CASES as MANIFEST_CASES
from unit.validate.test_manifest_rules import PRESENT_IN_FIXTURES
from unit.validate.test_metadata_rules import CASES as METADATA_CASES
from unit.validate.test_v4_rules import CASES as V4_CASES

# module -> the rules its test file breaks (the v4 files also break v1-v3 rules on v4 trees)
BY_MODULE: dict[ModuleType, set[str]] = {
    metadata_rules: {c.rule for c in METADATA_CASES},
    manifest_list_rules: {c.rule for c in MANIFEST_LIST_CASES},
    manifest_rules: {c.rule for c in MANIFEST_CASES} | set(PRESENT_IN_FIXTURES),
    delete_rules: {c.rule for c in DELETE_CASES},
    file_rules: {c.rule for c in FILE_CASES},
    v4_rules: {c.rule for c in V4_CASES},
    v4_spec_rules: {c.rule for c in V4_CASES},
}
V1_V3_CASES = [*METADATA_CASES, *MANIFEST_LIST_CASES, *MANIFEST_CASES, *DELETE_CASES, *FILE_CASES]


def test_every_rule_has_a_breaking_case() -> None:
    covered = set().union(*BY_MODULE.values())
    assert sorted(set(CATALOGUE) - covered) == []
    assert len([c.rule for c in V1_V3_CASES]) == len({c.rule for c in V1_V3_CASES})  # one case per v1-v3 rule


@pytest.mark.parametrize("module", list(BY_MODULE), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_each_case_sits_with_the_module_that_declares_its_rule(module: ModuleType) -> None:
    declared = declared_rules(module)
    assert declared and declared <= BY_MODULE[module]
    if module not in (v4_rules, v4_spec_rules):
        assert BY_MODULE[module] == declared
    assert set().union(*(declared_rules(m) for m in BY_MODULE)) == set(CATALOGUE)  # no rule declared elsewhere
