"""The rule catalogue (icectl/validate/rules.py): every rule it declares has a breaking case.

The cases live with the module that declares the rule: test_metadata_rules.py, test_manifest_list_rules.py,
test_manifest_rules.py, test_delete_rules.py, test_file_rules.py, and test_v4_rules.py (v4_rules.py and
v4_manifest_dvs.py); their test ids are the rule ids, so ``pytest tests/unit/validate -k "manifest-list."``
runs the cases of manifest_list_rules.py.
"""

from __future__ import annotations

from icectl.validate import CATALOGUE
from unit.validate.test_delete_rules import CASES as DELETE_CASES
from unit.validate.test_file_rules import CASES as FILE_CASES
from unit.validate.test_manifest_list_rules import CASES as MANIFEST_LIST_CASES
from unit.validate.test_manifest_rules import CASES as MANIFEST_CASES
from unit.validate.test_manifest_rules import PRESENT_IN_FIXTURES
from unit.validate.test_metadata_rules import CASES as METADATA_CASES
from unit.validate.test_v4_rules import CASES as V4_CASES

BY_MODULE = {"metadata.": METADATA_CASES, "manifest-list.": MANIFEST_LIST_CASES, "manifest.": MANIFEST_CASES,
             "deletes.": DELETE_CASES, "files.": FILE_CASES}
CASES = [c for cases in BY_MODULE.values() for c in cases]


def test_every_rule_has_a_breaking_case() -> None:
    # the v4 rules' cases break upgraded v4 copies (tests/unit/validate/test_v4_rules.py)
    covered = {c.rule for c in CASES} | set(PRESENT_IN_FIXTURES) | {c.rule for c in V4_CASES}
    assert sorted(set(CATALOGUE) - covered) == []
    assert len([c.rule for c in CASES]) == len({c.rule for c in CASES})


def test_each_case_sits_with_the_module_that_declares_its_rule() -> None:
    for prefix, cases in BY_MODULE.items():
        assert [c.rule for c in cases if not c.rule.startswith(prefix)] == [], prefix
