"""Inputs that used to end in an internal error (exit 1, a traceback or kilobytes of text) or a
misleading code: each gets one stderr line and its documented exit code (issue 11, item 11).

The CLI runs as a subprocess, as in tests/cli/test_errors.py.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.spark import latest_metadata_path
from unit.catalog.test_catalog_contract import KINDS as CATALOG_KINDS
from unit.catalog.test_catalog_contract import created_table, hadoop_catalog_config, sqlite_catalog_config  # noqa: F401

from cli.test_errors import assert_one_line_error, damaged, run_cli  # noqa: F401  (damaged: a fixture)
from icectl.codec.puffin import MAGIC, read_puffin_footer
from icectl.config import parse_config
from icectl.errors import CorruptInputError, ExitCode
from icectl.storage import FileIO


def test_hdfs_path_is_one_line_exit_8() -> None:
    for args in (["inspect", "table", "hdfs://namenode:8020/wh/db/t"],
                 ["expire-snapshots", "hdfs://namenode:8020/wh/db/t", "--dry-run"]):
        p = run_cli(*args)
        assert_one_line_error(p, ExitCode.STORAGE, "no storage support for hdfs://")
        assert len(p.stderr) < 400, len(p.stderr)  # not the library's list of dlopen attempts
        assert "dlopen" not in p.stderr


def _table_with_metadata(root: Path, text: str) -> tuple[Path, Path]:
    meta = root / "metadata" / "v1.metadata.json"
    meta.parent.mkdir(parents=True)
    meta.write_text(text)
    (root / "metadata" / "version-hint.text").write_text("1")
    return root, meta


def _minimal_metadata(location: Path, **changes: object) -> dict[str, object]:
    doc: dict[str, object] = {
        "format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1", "location": str(location),
        "last-sequence-number": 0, "last-updated-ms": 1_700_000_000_000, "last-column-id": 1,
        "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "required": True, "type": "long"}]}],
        "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
        "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}],
    }
    doc.update(changes)
    return doc


def test_metadata_nested_100000_levels_is_exit_4(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    table, meta = _table_with_metadata(tmp_path / "t", '{"format-version": 2, "properties": ' + deep + "}")
    for args in (["inspect", "table", str(table)], ["validate", str(table)],
                 ["expire-snapshots", str(table)], ["inspect", "table", str(meta)]):
        assert_one_line_error(run_cli(*args), ExitCode.CORRUPT, str(meta))


def test_types_nested_deeper_than_the_stack_are_exit_4(tmp_path: Path) -> None:
    # Shallow enough for the JSON parser, too deep for a recursive reading of the schema.
    t: object = "int"
    for i in range(2, 900):
        t = {"type": "list", "element-id": i, "element": t, "element-required": True}
    doc = _minimal_metadata(tmp_path / "t", **{"last-column-id": 1000, "schemas": [
        {"type": "struct", "schema-id": 0, "fields": [{"id": 1000, "name": "a", "required": True, "type": t}]}]})
    table, meta = _table_with_metadata(tmp_path / "t", json.dumps(doc))
    for args in (["inspect", "table", str(table)], ["validate", str(table)], ["compact", str(table)]):
        assert_one_line_error(run_cli(*args), ExitCode.CORRUPT, str(meta), "nested too deeply")


def test_numbers_beyond_64_bits_are_exit_4(tmp_path: Path) -> None:
    # Written as text: Python's json refuses to print an integer of 5,001 digits.
    for i, (key, value) in enumerate((("last-updated-ms", str(2**64)),
                                      ("last-sequence-number", str(-(2**63) - 1)),
                                      ("next-row-id", "1" + "0" * 5000))):
        raw = json.dumps(_minimal_metadata(tmp_path / f"t{i}", **{key: "BIG"})).replace('"BIG"', value)
        table, meta = _table_with_metadata(tmp_path / f"t{i}", raw)
        for args in (["inspect", "table", str(table)], ["expire-snapshots", str(table)],
                     ["add-files", str(table), str(tmp_path / "none.parquet")]):
            assert_one_line_error(run_cli(*args), ExitCode.CORRUPT, str(meta))


def test_a_regular_file_as_the_table_is_exit_3(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a table")
    for args in (["inspect", "table", str(notes)], ["expire-snapshots", str(notes)], ["validate", str(notes)]):
        p = run_cli(*args)
        assert_one_line_error(p, ExitCode.NOT_FOUND, str(notes), "is a file, not an Iceberg table")
        assert "storage error" not in p.stderr


def test_a_parquet_file_as_the_table_is_exit_3_with_a_hint(tmp_path: Path) -> None:
    data = tmp_path / "part-0.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), data)
    for args in (["inspect", "snapshots", str(data)], ["compact", str(data)],
                 ["add-files", str(data), str(data)]):
        p = run_cli(*args)
        assert_one_line_error(p, ExitCode.NOT_FOUND, str(data), "a Parquet file: use add-files or create --like")


def test_missing_bucket_is_named_not_an_internal_probe_file(s3_env: str) -> None:
    p = run_cli("create", "s3://icectl-no-such-bucket/wh/db/t", "--schema", "id long")
    assert_one_line_error(p, ExitCode.NOT_FOUND, "bucket 'icectl-no-such-bucket' not found")
    assert "probe" not in p.stderr


def test_schema_file_nested_too_deeply_is_a_usage_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    t: object = "int"
    for i in range(2, 900):
        t = {"type": "list", "element-id": i, "element": t, "element-required": True}
    types = tmp_path / "types.json"
    types.write_text(json.dumps({"type": "struct", "fields": [{"id": 1000, "name": "a", "required": True,
                                                              "type": t}]}))
    for schema in (deep, types):
        p = run_cli("create", str(tmp_path / "t"), "--schema-file", str(schema))
        assert_one_line_error(p, ExitCode.USAGE, str(schema))
        assert not (tmp_path / "t").exists()


def test_puffin_footer_nested_too_deeply_is_corrupt_input() -> None:
    payload = ("[" * 100_000 + "]" * 100_000).encode()
    data = MAGIC + MAGIC + payload + struct.pack("<iI", len(payload), 0) + MAGIC
    with pytest.raises(CorruptInputError, match="not UTF-8 JSON"):
        read_puffin_footer(data)


def _toml(raw: dict[str, Any]) -> str:
    """A catalog config (string values, tables of them) as TOML."""
    lines = ['default-catalog = "c"']
    for section, body in raw.items():
        tables = body.items() if section == "catalog" else [(None, body)]
        for name, values in tables:
            lines.append(f"[{section}.{name}]" if name else f"[{section}]")
            lines += [f"{json.dumps(k)} = {json.dumps(str(v))}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture(params=sorted(CATALOG_KINDS))
def catalog_config_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A config file whose default catalog ``c`` is one of every catalog kind, holding a namespace
    with a table, so the catalog itself is there and only the namespace asked for is missing."""
    raw = request.getfixturevalue(CATALOG_KINDS[request.param])
    config = parse_config({**raw, "default-catalog": "c"})
    created_table(config, FileIO(s3=config.s3))
    path = tmp_path / "icectl.toml"
    path.write_text(_toml(raw))
    return path


@pytest.mark.parametrize("args", [
    ["list", "nosuchns"], ["list", "nosuchns", "--all"], ["list", "nosuchns", "--json"],
    ["expire-snapshots", "--all", "nosuchns"], ["expire-snapshots", "--all", "nosuchns", "--dry-run", "--json"],
    ["compact", "--all", "nosuchns", "--json"], ["remove-orphan-files", "--all", "nosuchns", "--dry-run"],
    ["health", "--all", "nosuchns"],
], ids=" ".join)
def test_a_missing_namespace_is_exit_3_in_every_catalog_kind(catalog_config_file: Path, args: list[str]) -> None:
    """Cron that looks green (issue 27): with a SQL catalog, `expire-snapshots --all nosuchns` printed
    '0 table(s), 0 with problems' and exited 0, `compact --all nosuch --json` printed nothing, exit 0."""
    p = run_cli("--config", str(catalog_config_file), *args)
    assert_one_line_error(p, ExitCode.NOT_FOUND, "nosuchns")
    assert "not found" in p.stderr or "does not exist" in p.stderr


# --------------------------------------------------------------------------- issue 27: the WARN list


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _ids(table: Path) -> tuple[int, int]:
    """(current snapshot id, its parent's) of a table, as icectl reads them."""
    snaps = json.loads(run_cli("inspect", "snapshots", str(table), "--json").stdout)["rows"]
    current = json.loads(run_cli("inspect", "table", str(table), "--json").stdout)["current_snapshot_id"]
    parent = next(s["parent_id"] for s in snaps if s["snapshot_id"] == current)
    return current, parent


@pytest.mark.parametrize(("args", "code", "words"), [
    (["rollback", "{t}", "--to-snapshot", "abc"], ExitCode.USAGE, "--to-snapshot"),
    (["rollback", "{t}", "--to-snapshot", str(2**64)], ExitCode.USAGE, "beyond the signed 64-bit range"),
    (["rollback", "{t}", "--to-snapshot", "-1"], ExitCode.NOT_FOUND, "has no snapshot -1"),  # a legal long
    (["cherrypick", "{t}", "x"], ExitCode.USAGE, "SNAPSHOT_ID"),
    (["cherrypick", "{t}", "-1"], ExitCode.USAGE, "No such option: -1"),
    (["cherrypick", "{t}", str(2**64)], ExitCode.USAGE, "beyond the signed 64-bit range"),
    (["set-current", "{t}", "--snapshot", str(-(2**63) - 1)], ExitCode.USAGE, "beyond the signed 64-bit range"),
    (["branch", "create", "{t}", "b", "--snapshot", str(2**64)], ExitCode.USAGE, "beyond the signed 64-bit range"),
    (["inspect", "files", "{t}", "--snapshot", str(2**64)], ExitCode.USAGE, "beyond the signed 64-bit range"),
    # before the first snapshot: nothing to roll back to is "not found", however the time is written
    (["rollback", "{t}", "--to-timestamp", "0"], ExitCode.NOT_FOUND, "no snapshot of its history is older"),
    (["rollback", "{t}", "--to-timestamp", "1000"], ExitCode.NOT_FOUND, "no snapshot of its history is older"),
    (["rollback", "{t}", "--to-timestamp", "1970-01-01"], ExitCode.NOT_FOUND, "no snapshot of its history"),
    (["rollback", "{t}", "--to-timestamp", str(2**64)], ExitCode.USAGE, "beyond the signed 64-bit range"),
    (["expire-snapshots", "{t}", "--older-than", str(2**64)], ExitCode.USAGE, "beyond the signed 64-bit range"),
    # branch retention as Java's SnapshotRef.Builder takes it: positive, an int and longs
    (["branch", "create", "{t}", "b", "--retain-last", "0"], ExitCode.USAGE, "--retain-last must be greater than 0"),
    (["branch", "create", "{t}", "b", "--retain-last", "-1"], ExitCode.USAGE, "--retain-last must be greater"),
    (["branch", "create", "{t}", "b", "--retain-last", str(2**31)], ExitCode.USAGE, "at most 2147483647"),
    (["branch", "create", "{t}", "b", "--retain-last", str(2**64)], ExitCode.USAGE, "at most 2147483647"),
    (["branch", "create", "{t}", "b", "--max-ref-age", "0s"], ExitCode.USAGE, "--max-ref-age must be greater"),
    (["branch", "create", "{t}", "b", "--max-snapshot-age", "0s"], ExitCode.USAGE, "--max-snapshot-age must be"),
    (["branch", "create", "{t}", "b", "--max-snapshot-age", "-1d"], ExitCode.USAGE, "is not a duration"),
    (["branch", "replace", "{t}", "main", "--retain-last", "0"], ExitCode.USAGE, "--retain-last must be"),
    (["branch", "create", "{t}", "b", "--max-ref-age", "99999999999999999w"], ExitCode.USAGE, "at most"),
    # options of branches given to a tag, and options or commands that do not exist
    (["tag", "create", "{t}", "t", "--retain-last", "2"], ExitCode.USAGE, "No such option: --retain-last"),
    (["tag", "create", "{t}", "t", "--max-snapshot-age", "1d"], ExitCode.USAGE, "No such option: --max-snapshot-age"),
    (["tag", "replace", "{t}", "t", "--retain-last", "2"], ExitCode.USAGE, "No such option: --retain-last"),
    (["expire-snapshots", "{t}", "--bogus"], ExitCode.USAGE, "see 'icectl expire-snapshots -h'"),
    (["rollbak", "{t}"], ExitCode.USAGE, "No such command 'rollbak'"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_values_are_one_line_with_their_code(damaged: Callable[[], Path], args: list[str], code: int,  # noqa: F811
                                                 words: str) -> None:
    table = damaged()
    before = _tree(table)
    p = run_cli(*(a.replace("{t}", str(table)) for a in args))
    assert_one_line_error(p, code, words)
    assert p.stderr.startswith("icectl: error: ")
    assert _tree(table) == before


def _with_counter(table: Path, key: str, value: int) -> Path:
    """Set ``key`` of the current metadata to ``value`` (and drop its .crc): the metadata file."""
    meta = latest_metadata_path(table)
    doc = json.loads(meta.read_text())
    doc[key] = value
    meta.write_text(json.dumps(doc))
    (meta.parent / f".{meta.name}.crc").unlink(missing_ok=True)
    return meta


def _v3_parquet(path: Path) -> Path:
    """Two rows in the schema of the v3_dv fixture (id, region, value, ts, note)."""
    ts = pa.array([1_704_067_200_000_000] * 2, pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "region": ["a", "b"], "value": [1.0, 2.0],
                             "ts": ts, "note": ["x", "y"]}), path)
    return path


@pytest.mark.parametrize(("key", "value", "args", "words"), [
    ("last-sequence-number", 2**63 - 1, ["add-files", "{t}", "{f}"], "sequence number would overflow"),
    ("next-row-id", 2**63 - 1, ["add-files", "{t}", "{f}"], "row id would overflow"),
    ("next-row-id", 2**63 - 2, ["add-files", "{t}", "{f}"], "row id would overflow"),  # 2 rows: one too many
    ("last-sequence-number", 2**63 - 1, ["upgrade", "{t}", "--to", "4", "--yes"], "sequence number would overflow"),
])
def test_counters_that_would_overflow_are_exit_4_and_nothing_is_written(
        spark_clone: Any, key: str, value: int, args: list[str], words: str) -> None:
    table = Path(spark_clone("v3_dv").location)
    data = _v3_parquet(table / "data" / "extra.parquet")
    meta = _with_counter(table, key, value)
    before = _tree(table)
    p = run_cli(*(a.replace("{t}", str(table)).replace("{f}", str(data)) for a in args))
    assert_one_line_error(p, ExitCode.CORRUPT, words, str(meta))
    assert _tree(table) == before  # no manifest, list, root or metadata file left behind
