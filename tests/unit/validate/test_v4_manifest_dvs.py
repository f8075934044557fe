"""The rules of icectl/validate/v4_manifest_dvs.py (manifest delete vectors in a v4 root).

One case per rule (the case id is the rule id, with a label for a second case): a v4 copy of a Spark
fixture with every v4 structure (built in test_v4_rules.py), broken in exactly that way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from icectl.codec.puffin import decode_deletion_vector, encode_deletion_vector
from icectl.validate import v4_manifest_dvs
from unit.validate.breaking import declared_rules
from unit.validate.test_v4_rules import (
    Case,
    V4Table,
    at_root_entry,
    case_id,
    check_v4_rule_is_reported,
    edit_root,
    inline_dv,
    leaf_dv,
    root_records,
)


def _dup_dv(t: V4Table) -> str:
    i = inline_dv(t.path)
    return edit_root(t.path, lambda records, _meta: records.append(dict(records[i])))


def _past_the_leaf(r: dict[str, Any]) -> None:
    positions = decode_deletion_vector(r["deletion_vector"]["inline_content"])
    positions.add(10**6)
    r["deletion_vector"]["inline_content"] = encode_deletion_vector(positions)
    r["record_count"] = len(positions)


def _flip_crc(r: dict[str, Any]) -> None:
    blob = bytearray(r["deletion_vector"]["inline_content"])
    blob[-1] ^= 0xFF
    r["deletion_vector"]["inline_content"] = bytes(blob)


def _puffin_crc(t: V4Table) -> str:
    dv = root_records(t.path)[leaf_dv(t.path)]
    puffin = Path(dv["location"])
    data = bytearray(puffin.read_bytes())
    data[dv["deletion_vector"]["offset"] + dv["deletion_vector"]["size_in_bytes"] - 1] ^= 0xFF
    puffin.write_bytes(bytes(data))
    return str(puffin)


CASES: list[Case] = [
    Case("v4.manifest-dv-reference",
         at_root_entry(inline_dv, lambda r: r.__setitem__("location", r["location"] + ".x"))),
    Case("v4.manifest-dv-target",
         at_root_entry(leaf_dv, lambda r: r.__setitem__("referenced_file", "/no/such/leaf.avro"))),
    Case("v4.one-manifest-dv-per-leaf", _dup_dv),
    Case("v4.manifest-dv-positions", at_root_entry(inline_dv, _past_the_leaf)),
    Case("v4.manifest-dv-blob", at_root_entry(inline_dv, _flip_crc)),
    Case("v4.manifest-dv-blob", _puffin_crc, label="puffin"),
    Case("v4.manifest-dv-cardinality",
         at_root_entry(inline_dv, lambda r: r.__setitem__("record_count", r["record_count"] + 1))),
]


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_v4_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    check_v4_rule_is_reported(case, spark_tables, tmp_path)


def test_every_manifest_dv_rule_has_a_case() -> None:
    declared = declared_rules(v4_manifest_dvs)
    assert declared and declared - {c.rule for c in CASES} == set()
