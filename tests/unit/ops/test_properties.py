"""ops/table_properties.py: set, unset and list on a table icectl writes (no Spark; Spark's
SET/UNSET TBLPROPERTIES on twin tables is in tests/interop/test_refs_properties_vs_spark.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from icectl.cli.output.row_query import value_of
from icectl.errors import ExitCode, RefusedError, UsageError
from icectl.ops.properties import (
    list_properties,
    parse_assignments,
    set_properties,
    unset_properties,
)
from icectl.table import load_table
from unit.ops.snapshots.test_refs import table_dir, versions  # noqa: F401  (table_dir is a fixture)


def props(d: Path) -> dict[str, str]:
    return dict(load_table(str(d)).metadata.properties)


def test_set_and_unset_in_one_commit_each(table_dir: Path) -> None:  # noqa: F811
    before = props(table_dir)
    n = len(versions(table_dir))
    res = set_properties(load_table(str(table_dir)), {"commit.retry.num-retries": "10", "owner": "ops=team"})
    assert len(versions(table_dir)) == n + 1 and res.commit.commit_attempts == 1
    assert props(table_dir) == {**before, "commit.retry.num-retries": "10", "owner": "ops=team"}
    assert res.data["changes"] == {"commit.retry.num-retries": {"old": None, "new": "10"},
                                   "owner": {"old": None, "new": "ops=team"}}
    res = unset_properties(load_table(str(table_dir)), ["owner", "never-set"])
    assert props(table_dir) == {**before, "commit.retry.num-retries": "10"}
    assert res.not_set == ["never-set"] and res.warnings == [
        f"never-set is not set on table {table_dir}: nothing to unset"]
    assert res.data["changes"] == {"owner": {"old": "ops=team", "new": None}}


def test_dry_run_shows_old_and_new_and_writes_nothing(table_dir: Path) -> None:  # noqa: F811
    set_properties(load_table(str(table_dir)), {"gc.enabled": "false"})
    n = versions(table_dir)
    res = set_properties(load_table(str(table_dir)), {"gc.enabled": "true", "a": "1"}, dry_run=True)
    assert versions(table_dir) == n and props(table_dir)["gc.enabled"] == "false"
    assert res.data["changes"] == {"gc.enabled": {"old": "false", "new": "true"}, "a": {"old": None, "new": "1"}}
    assert res.data["would_write"] == ["a new table metadata file (the next version)"]
    assert "gc.enabled: 'false' -> 'true'" in res.title


def test_nothing_to_change_writes_nothing(table_dir: Path) -> None:  # noqa: F811
    set_properties(load_table(str(table_dir)), {"a": "1"})
    n = versions(table_dir)
    res = set_properties(load_table(str(table_dir)), {"a": "1"})
    assert res.unchanged == ["a"] and not res.changes and versions(table_dir) == n
    res = unset_properties(load_table(str(table_dir)), ["b"])
    assert res.not_set == ["b"] and versions(table_dir) == n and "commit_attempts" not in res.data


@pytest.mark.parametrize("updates, words", [
    ({"format-version": "3"}, "use icectl upgrade TABLE --to N"),
    ({"uuid": "x"}, "derived from the table metadata"),
    ({"snapshot-count": "1"}, "reserved table property"),
    ({"a": "1", "commit.retry.num-retries": "many"}, "commit.retry.num-retries='many' is not an integer"),
    ({"gc.enabled": "yes"}, "is not true or false"),
    ({"schema.name-mapping.default": "{not json"}, "is not valid JSON"),
    ({"schema.name-mapping.default": '{"field-id": 1}'}, "non-array"),
    ({"write.format.default": "csv"}, "one of parquet, avro, orc"),
])
def test_bad_keys_and_values_change_nothing(table_dir: Path, updates: dict[str, str], words: str) -> None:  # noqa: F811
    before, n = props(table_dir), versions(table_dir)
    with pytest.raises(UsageError) as info:
        set_properties(load_table(str(table_dir)), updates)
    assert info.value.exit_code == ExitCode.USAGE and words in info.value.one_line()
    assert props(table_dir) == before and versions(table_dir) == n


@pytest.mark.parametrize("keys, words", [
    (["format-version"], "use icectl upgrade"), (["current-snapshot-id"], "icectl set-current"),
    (["a=b"], "unset takes keys"), ([], "at least one KEY"), ([""], "empty key"),
])
def test_unset_refusals(table_dir: Path, keys: list[str], words: str) -> None:  # noqa: F811
    n = versions(table_dir)
    with pytest.raises(UsageError, match=words):
        unset_properties(load_table(str(table_dir)), keys)
    assert versions(table_dir) == n


def test_a_valid_name_mapping_is_accepted(table_dir: Path) -> None:  # noqa: F811
    mapping = '[{"field-id": 1, "names": ["id", "ID"]}]'
    set_properties(load_table(str(table_dir)), {"schema.name-mapping.default": mapping})
    assert props(table_dir)["schema.name-mapping.default"] == mapping


def test_concurrent_property_changes_both_stay(table_dir: Path) -> None:  # noqa: F811
    """Another writer sets a key after we loaded: our commit retries and keeps theirs."""
    ours = load_table(str(table_dir))
    set_properties(load_table(str(table_dir)), {"theirs": "1"})
    set_properties(ours, {"ours": "2"})
    assert props(table_dir)["theirs"] == "1" and props(table_dir)["ours"] == "2"


def test_parse_assignments() -> None:
    assert parse_assignments(["a=1", "b=", "c=x=y", "a=1"]) == {"a": "1", "b": "", "c": "x=y"}
    with pytest.raises(UsageError, match="is not KEY=VALUE"):
        parse_assignments(["a"])
    with pytest.raises(UsageError, match="given twice"):
        parse_assignments(["a=1", "a=2"])


def test_list_with_and_without_defaults(table_dir: Path) -> None:  # noqa: F811
    set_properties(load_table(str(table_dir)), {"gc.enabled": "false", "zz": "1"})
    t = load_table(str(table_dir))
    rows = {r["key"]: r for r in list_properties(t).rows}
    assert rows["gc.enabled"] == {"key": "gc.enabled", "value": "false", "source": "table"}
    assert "commit.retry.num-retries" not in rows
    rows = {r["key"]: r for r in list_properties(t, with_defaults=True).rows}
    assert rows["gc.enabled"]["source"] == "table"
    assert rows["commit.retry.num-retries"] == {"key": "commit.retry.num-retries", "value": "4", "source": "default"}
    assert rows["history.expire.max-ref-age-ms"]["value"] == str((1 << 63) - 1)
    assert list(rows) == sorted(rows)


def test_a_data_path_outside_the_table_is_set_with_a_warning(table_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    inside = set_properties(load_table(str(table_dir)), {"write.data.path": f"{table_dir}/data2"})
    assert inside.warnings == []
    outside = set_properties(load_table(str(table_dir)), {"write.data.path": str(tmp_path / "elsewhere")})
    assert len(outside.warnings) == 1 and "outside the table location" in outside.warnings[0]
    assert props(table_dir)["write.data.path"] == str(tmp_path / "elsewhere")


def test_write_metadata_path_is_refused_by_a_file_system_table(table_dir: Path) -> None:  # noqa: F811
    """HadoopTableOperations' precondition, met at commit time: nothing written, exit 6."""
    n = versions(table_dir)
    with pytest.raises(RefusedError, match="file-system tables cannot relocate metadata"):
        set_properties(load_table(str(table_dir)), {"write.metadata.path": f"{table_dir}/meta2"})
    assert versions(table_dir) == n


def test_a_terminal_reads_durations_and_sizes(table_dir: Path) -> None:  # noqa: F811
    table = load_table(str(table_dir))
    result = list_properties(table, with_defaults=True)
    shown = {row["key"]: value_of(result, row, "reads as") for row in result.rows}
    assert shown["history.expire.max-snapshot-age-ms"] == "5d"  # 432000000
    assert shown["history.expire.max-ref-age-ms"] == "forever"  # Long.MAX_VALUE
    assert shown["commit.manifest.target-size-bytes"] == "8 MiB"  # 8388608
    assert shown["commit.retry.num-retries"] == ""  # neither
    assert "reads as" in result.default_columns() and "reads as" not in result.columns  # terminal only
