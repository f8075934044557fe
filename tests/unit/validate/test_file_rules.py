"""The rules of icectl/validate/file_rules.py (--deep: the data, delete and statistics files themselves).

One case per rule (the case id is the rule id): a copy of a Spark-written table broken in exactly
that way (the shared machinery is in breaking.py), then the module's edge cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.corrupt import entry_records, find_entry

from unit.validate.breaking import Case, check_rule_is_reported, data_entry, entry, meta, set_file


def _statistics(doc: dict[str, Any]) -> None:
    doc["statistics"] = [{"snapshot-id": doc["current-snapshot-id"], "statistics-path": "/nonexistent/stats.puffin",
                          "file-size-in-bytes": 100, "file-footer-size-in-bytes": 50, "blob-metadata": []}]


def _delete_data_file(d: Path) -> str:
    path, i = find_entry(d, data_entry)
    Path(entry_records(path)[i]["data_file"]["file_path"]).unlink()
    return path


CASES: list[Case] = [
    Case("files.exist", "v2_part", _delete_data_file, deep=True),
    Case("files.size", "v2_part", entry(data_entry, set_file("file_size_in_bytes", lambda v: v + 1)), deep=True),
    Case("files.parquet-record-count", "v2_part", entry(data_entry, set_file("record_count", lambda v: v + 1)),
         implied=frozenset({"manifest-list.counts"}), deep=True),
    Case("files.statistics-exist", "v2_part", meta(_statistics), deep=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.rule for c in CASES])
def test_rule_is_reported(case: Case, spark_tables: Any, tmp_path: Path) -> None:
    check_rule_is_reported(case, spark_tables, tmp_path)
