"""Commits: metadata evolution rules, file-system and SQLite-catalog commits, conflicts, crashes, Spark.

Concurrency is tested with real processes (this file doubles as the worker script: ``python
test_commit.py loop|kill ...``) and with real Spark committing to the same table meanwhile.
Spark is the judge of readability: every snapshot icectl adds must read, ``VERSION AS OF``, the
same rows as its parent.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support import s3
from support.s3 import s3_env, s3_server  # noqa: F401

from icectl.catalog import operations
from icectl.catalog.hadoop import VERSION_HINT, is_version_file, version_of
from icectl.catalog.operations import (
    CommitStateUnknownError,
    encode_metadata,
    metadata_codec,
    metastore_version,
)
from icectl.catalog.sql import SqlCatalog
from icectl.config import load_config
from icectl.errors import CommitConflictError, ExitCode, RefusedError, StorageError
from icectl.ops.create.metadata import new_table_metadata
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.spec.schema import NestedField, Schema, parse_primitive
from icectl.spec.snapshots import MetadataLogEntry, Snapshot, SnapshotRef, ancestors_of
from icectl.storage import FileIO, local_path
from icectl.table import load_table
from icectl.table.commit import (
    CommitResult,
    RetryPolicy,
    add_snapshot,
    commit,
    create_table,
    new_snapshot_id,
    operations_for,
    prepare_commit,
    removed_metadata_files,
    set_properties,
)

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]  # tests/: support/ and the test packages import from here
SCHEMA = Schema((NestedField(1, "id", parse_primitive("long"), True), NestedField(2, "v", parse_primitive("string"))))
# Fast, persistent retries for racing writers (icectl and Spark read the same properties).
RACE_PROPS = {"commit.retry.num-retries": "60", "commit.retry.min-wait-ms": "5", "commit.retry.max-wait-ms": "100"}


# ---------------------------------------------------------------------------------------------
# Helpers (also used by the worker processes)


def empty_append(base: TableMetadata, branch: str = "main") -> TableMetadata:
    """The tests' tiny committer: an ``append`` snapshot that reuses its parent's manifest list.

    A valid empty append: no files added, so it reads exactly the parent's rows; the summary
    carries the parent's totals as Java's does for an append that adds nothing.
    """
    parent = base.snapshot_for_ref(branch)
    assert parent is not None and parent.manifest_list is not None, "needs a parent with a manifest list"
    v3 = base.format_version >= 3
    summary = {"operation": "append", **{k: val for k, val in parent.summary.items() if k.startswith("total-")}}
    snapshot = Snapshot(
        snapshot_id=new_snapshot_id(base), timestamp_ms=time.time_ns() // 1_000_000,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=base.last_sequence_number + 1 if base.format_version >= 2 else 0,
        manifest_list=parent.manifest_list, summary=summary, schema_id=base.current_schema_id,
        first_row_id=base.next_row_id if v3 else None, added_rows=0 if v3 else None)
    return add_snapshot(base, snapshot, branch=branch)


def written_bytes(result: CommitResult) -> bytes:
    """The exact bytes a commit wrote (metadata serialisation is deterministic)."""
    return encode_metadata(result.metadata, metadata_codec(result.metadata.properties))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def version_files(table_dir: Path) -> dict[int, Path]:
    out = {}
    for p in (table_dir / "metadata").iterdir():
        if is_version_file(p.name):
            out[int(p.name[1:].split(".", 1)[0])] = p
    return out


def write_sql_config(tmp_path: Path, catalog: str = "prod") -> Path:
    cfg = tmp_path / "icectl.toml"
    cfg.write_text(f'default-catalog = "{catalog}"\n[catalog.{catalog}]\ntype = "sql"\n'
                   f'uri = "{tmp_path / "catalog.db"}"\nwarehouse = "{tmp_path / "sqlwh"}"\n')
    return cfg


def new_md(location: str | Path, *, version: int = 2, now_ms: int | None = None, **props: str) -> TableMetadata:
    return new_table_metadata(schema=SCHEMA, location=str(location), partition_spec=None, sort_order=None,
                              properties=props, format_version=version, now_ms=now_ms)


def fs_table(tmp_path: Path, name: str = "t", **props: str) -> Path:
    """A new, empty file-system table made by icectl (no snapshot)."""
    table_dir = tmp_path / "wh" / name
    create_table(str(table_dir), None, new_md(table_dir, **props))
    return table_dir


def start_worker(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    # The checkout's icectl, whatever is installed: the worker runs as a script from tests/.
    path = os.pathsep.join(p for p in (str(TESTS.parent), str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": path, **(env or {})},
                            cwd=HERE)


_table_ids = itertools.count(1)


def spark_table(spark: Any, *, version: int = 2, props: dict[str, str] | None = None) -> tuple[str, Path]:
    """A small Spark-written table (two rows, one snapshot) in the session warehouse."""
    from support.spark import table_location

    name = f"local.db.commit_{os.getpid()}_{next(_table_ids)}"
    tblprops = ", ".join(f"'{k}'='{v}'" for k, v in {"format-version": str(version), **(props or {})}.items())
    spark.sql(f"CREATE TABLE {name} (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ({tblprops})")
    spark.sql(f"INSERT INTO {name} VALUES (1, 'a'), (2, 'b')")
    return name, table_location(spark, name)


def register(kind: str, table_dir: Path, tmp_path: Path) -> tuple[str, Any, dict[str, str]]:
    """``(address, config, worker env)`` of a Spark table, by directory or registered in a SQLite catalog."""
    if kind == "fs":
        return str(table_dir), None, {}
    from support.spark import latest_metadata_path

    cfg = write_sql_config(tmp_path)
    config = load_config(cfg)
    catalog = SqlCatalog("prod", str(tmp_path / "catalog.db"), str(tmp_path / "sqlwh"), FileIO())
    catalog.create_table_entry(("db",), "t", str(latest_metadata_path(table_dir)))  # "register_table"
    return "prod.db.t", config, {"ICECTL_CONFIG": str(cfg)}


# ---------------------------------------------------------------------------------------------
# Pure metadata rules


def _md(version: int = 2, **props: str) -> TableMetadata:
    return new_md("/wh/t", version=version, now_ms=1000, **props)


def _snap(base: TableMetadata, sid: int, *, parent: int | None, seq: int, ts: int = 2000,
          first_row_id: int | None = None, added_rows: int | None = None) -> Snapshot:
    return Snapshot(sid, ts, parent, seq, manifest_list=f"/wh/t/metadata/snap-{sid}.avro",
                    summary={"operation": "append"}, first_row_id=first_row_id, added_rows=added_rows)


def test_metadata_log_is_trimmed_as_java_does() -> None:
    base = _md(**{"write.metadata.previous-versions-max": "3"})
    location = "/wh/t/metadata/v1.metadata.json"
    logs = []
    for i in range(2, 7):
        new = prepare_commit(base, set_properties(base, {"i": str(i)}), location, now_ms=1000 + i)
        logs.append([e.metadata_file for e in new.metadata_log])
        assert new.metadata_log[-1] == MetadataLogEntry(base.last_updated_ms, location)  # base's timestamp
        assert new.last_updated_ms == 1000 + i  # unchanged by the build: now
        base, location = new, f"/wh/t/metadata/v{i}.metadata.json"
    assert logs[-1] == [f"/wh/t/metadata/v{i}.metadata.json" for i in (3, 4, 5)]  # at most 3 entries
    assert [len(x) for x in logs] == [1, 2, 3, 3, 3]
    # max(1, value): 0 keeps the one file just replaced; the default keeps 100.
    zero = set_properties(base, {"write.metadata.previous-versions-max": "0"})
    assert [e.metadata_file for e in prepare_commit(base, zero, "/x", 9).metadata_log] == ["/x"]
    plain = _md()
    for i in range(120):
        plain = prepare_commit(plain, set_properties(plain, {"i": str(i)}), f"/m{i}", 5000 + i)
    assert len(plain.metadata_log) == 100 and plain.metadata_log[-1].metadata_file == "/m119"


def test_removed_metadata_files_never_current_or_previous() -> None:
    base = _md().replace(metadata_log=(MetadataLogEntry(1, "/a"), MetadataLogEntry(2, "/b")))
    new = prepare_commit(base, set_properties(base, {"write.metadata.previous-versions-max": "1"}), "/c", 3)
    assert [e.metadata_file for e in new.metadata_log] == ["/c"]
    assert removed_metadata_files(base, new, base_location="/c", new_location="/d") == ["/a", "/b"]
    odd = base.replace(metadata_log=(MetadataLogEntry(1, "/d"), MetadataLogEntry(2, "/c")))
    assert removed_metadata_files(odd, new, base_location="/c", new_location="/d") == []


def test_add_snapshot_rules() -> None:
    base = _md()
    s1 = _snap(base, 11, parent=None, seq=1)
    m1 = add_snapshot(base, s1)
    assert (m1.current_snapshot_id, m1.last_sequence_number, m1.last_updated_ms) == (11, 1, 2000)
    assert m1.refs == {"main": SnapshotRef(11, "branch")}
    assert [(e.timestamp_ms, e.snapshot_id) for e in m1.snapshot_log] == [(2000, 11)]
    with pytest.raises(RefusedError, match="already exists"):
        add_snapshot(m1, _snap(m1, 11, parent=11, seq=2))
    with pytest.raises(RefusedError, match="not above last-sequence-number"):
        add_snapshot(m1, _snap(m1, 12, parent=11, seq=1))
    with pytest.raises(RefusedError, match="build it on the current head"):  # a stale build
        add_snapshot(m1, _snap(m1, 12, parent=None, seq=2))
    # Another branch: ref created, main, current snapshot and snapshot-log untouched.
    m2 = add_snapshot(m1, _snap(m1, 12, parent=11, seq=2, ts=3000), branch="audit")
    assert (m2.current_snapshot_id, m2.snapshot_log, m2.last_sequence_number) == (11, m1.snapshot_log, 2)
    assert m2.refs["audit"] == SnapshotRef(12, "branch") and m2.refs["main"] == SnapshotRef(11, "branch")
    # Retention settings of an existing branch survive the move (SnapshotRef.builderFrom).
    kept = m2.replace(refs={**m2.refs, "main": SnapshotRef(11, "branch", min_snapshots_to_keep=5)})
    m3 = add_snapshot(kept, _snap(kept, 13, parent=11, seq=3, ts=4000))
    assert m3.refs["main"] == SnapshotRef(13, "branch", min_snapshots_to_keep=5)
    tagged = m3.replace(refs={**m3.refs, "rel": SnapshotRef(13, "tag")})
    with pytest.raises(RefusedError, match="is a tag"):
        add_snapshot(tagged, _snap(tagged, 14, parent=13, seq=4), branch="rel")
    # v1: no sequence numbers.
    v1 = add_snapshot(_md(1), _snap(_md(1), 21, parent=None, seq=0))
    assert v1.last_sequence_number == 0 and "sequence-number" not in v1.to_json()["snapshots"][0]
    with pytest.raises(RefusedError):
        add_snapshot(_md(1), _snap(_md(1), 22, parent=None, seq=1))


def test_v3_next_row_id() -> None:
    base = _md(3)
    assert base.next_row_id == 0
    m1 = add_snapshot(base, _snap(base, 31, parent=None, seq=1, first_row_id=0, added_rows=125))
    assert m1.next_row_id == 125 and m1.to_json()["next-row-id"] == 125
    with pytest.raises(RefusedError, match="behind the table's next-row-id"):
        add_snapshot(m1, _snap(m1, 32, parent=31, seq=2, first_row_id=100, added_rows=1))
    with pytest.raises(RefusedError, match="first-row-id and added-rows"):
        add_snapshot(m1, _snap(m1, 32, parent=31, seq=2))
    # A branch commit advances next-row-id too (spec: "even if ... not in the main branch").
    m2 = add_snapshot(m1, _snap(m1, 32, parent=31, seq=2, first_row_id=125, added_rows=10), branch="b")
    m3 = add_snapshot(m2, _snap(m2, 33, parent=31, seq=3, first_row_id=140, added_rows=0))
    assert (m2.next_row_id, m3.next_row_id, m3.current_snapshot_id) == (135, 135, 33)


def test_snapshot_ids_and_retry_policy() -> None:
    ids = {new_snapshot_id() for _ in range(2000)}
    assert len(ids) == 2000 and all(0 < i < 2**63 for i in ids)
    policy = RetryPolicy.from_properties({})
    assert policy == RetryPolicy(4, 100, 60_000, 1_800_000)
    assert [policy.gives_up(a, 0) for a in range(1, 6)] == [False] * 4 + [True]
    assert policy.gives_up(2, 1_800_001) and not policy.gives_up(1, 1_800_001)
    for attempt, low in ((1, 100), (2, 200), (5, 1600), (20, 60_000)):
        assert all(low <= policy.delay_ms(attempt) < low * 1.1 + 1 for _ in range(50))


# ---------------------------------------------------------------------------------------------
# File-system and SQLite commits (no Spark)


def test_file_system_commits_and_hint(tmp_path: Path) -> None:
    table_dir = fs_table(tmp_path)
    meta = table_dir / "metadata"
    assert sorted(p.name for p in meta.iterdir()) == ["v1.metadata.json", VERSION_HINT]
    table = load_table(str(table_dir))
    for i in range(3):
        result = commit(table, lambda b, i=i: set_properties(b, {"n": str(i)}))
        assert result.attempts == 1 and result.metadata_location == str(meta / f"v{i + 2}.metadata.json")
    assert (meta / VERSION_HINT).read_text() == "4"  # Java writes the bare number
    assert table.metadata.properties["n"] == "2" and table.metadata_location.endswith("v4.metadata.json")
    assert [e.metadata_file for e in table.metadata.metadata_log] == [str(meta / f"v{i}.metadata.json")
                                                                      for i in (1, 2, 3)]
    # gzip codec: vN.gz.metadata.json, readable by icectl (and, by name, by Java).
    commit(table, lambda b: set_properties(b, {"write.metadata.compression-codec": "gzip"}))
    assert (meta / "v5.gz.metadata.json").read_bytes()[:2] == b"\x1f\x8b"
    assert load_table(str(table_dir)).metadata.properties["write.metadata.compression-codec"] == "gzip"
    # Nothing else was left behind: no temp files of any attempt.
    assert sorted(p.name for p in meta.iterdir()) == [*(f"v{i}.metadata.json" for i in range(1, 5)),
                                                      "v5.gz.metadata.json", VERSION_HINT]
    # Nothing to change: nothing written.
    same = commit(table, lambda b: b)
    assert not same.committed and len(list(meta.iterdir())) == 6
    with pytest.raises(RefusedError, match="already exists"):
        create_table(str(table_dir), None, new_md(table_dir))


def test_delete_after_commit(tmp_path: Path) -> None:
    keep = fs_table(tmp_path, "keep", **{"write.metadata.previous-versions-max": "2"})
    prune = fs_table(tmp_path, "prune", **{"write.metadata.previous-versions-max": "2",
                                           "write.metadata.delete-after-commit.enabled": "true"})
    # Hadoop's checksum of a metadata file Spark wrote goes with it.
    (prune / "metadata" / ".v3.metadata.json.crc").write_bytes(b"crc")
    for table_dir in (keep, prune):
        table = load_table(str(table_dir))
        for i in range(5):
            result = commit(table, lambda b, i=i: set_properties(b, {"n": str(i)}))
    assert sorted(version_files(keep)) == [1, 2, 3, 4, 5, 6]
    # Log of v6 = [v4, v5]; v1..v3 dropped out of it and were deleted one commit at a time.
    assert sorted(version_files(prune)) == [4, 5, 6]
    assert [Path(e.metadata_file).name for e in result.metadata.metadata_log] == ["v4.metadata.json",
                                                                                 "v5.metadata.json"]
    assert [Path(p).name for p in result.deleted_metadata_files] == ["v3.metadata.json"]
    assert not (prune / "metadata" / ".v3.metadata.json.crc").exists()
    # Failures to delete are ignored: the commit still succeeds.
    (prune / "metadata" / "v4.metadata.json").unlink()
    after = commit(load_table(str(prune)), lambda b: set_properties(b, {"n": "x"}))
    assert after.committed and after.deleted_metadata_files == ()


class SneakyWriter:
    """A ``build`` that lets another writer commit first on its first ``losses`` calls."""

    def __init__(self, address: str, losses: int, config: Any = None) -> None:
        self.address, self.losses, self.config, self.calls = address, losses, config, 0

    def __call__(self, base: TableMetadata) -> TableMetadata:
        self.calls += 1
        if self.calls <= self.losses:
            other = load_table(self.address, config=self.config)
            commit(other, lambda b: set_properties(b, {f"other-{self.losses}-{self.calls}": "1"}))
        return set_properties(base, {"mine": f"{self.losses}-{self.calls}"})


@pytest.mark.parametrize("kind", ["fs", "sql"])
def test_conflict_is_retried_on_the_new_base(kind: str, tmp_path: Path) -> None:
    if kind == "fs":
        address, config = str(fs_table(tmp_path)), None
    else:
        config = load_config(write_sql_config(tmp_path))
        create_table("db.t", None, new_md(tmp_path / "sqlwh" / "db" / "t"), config=config)
        address = "prod.db.t"
    sneaky = SneakyWriter(address, losses=2, config=config)
    sleeps: list[float] = []
    result = commit(load_table(address, config=config), sneaky, sleep=sleeps.append)
    assert result.attempts == 3 and len(sleeps) == 2 and 0.1 <= sleeps[0] < 0.111
    props = load_table(address, config=config).metadata.properties
    assert props["mine"] == "2-3" and props["other-2-1"] == props["other-2-2"] == "1"  # nothing lost
    if kind == "fs":
        assert sorted(version_files(Path(address))) == [1, 2, 3, 4]
        assert not [p for p in (Path(address) / "metadata").iterdir() if not is_version_file(p.name)
                    and p.name != VERSION_HINT]  # the losing attempts' temp files are gone
    else:
        files = sorted(p.name[:5] for p in (tmp_path / "sqlwh" / "db" / "t" / "metadata").iterdir())
        assert files == ["00000", "00001", "00002", "00003"]  # the losers' files were deleted

    # Out of retries: exit code 5, naming the table.
    always = SneakyWriter(address, losses=100, config=config)
    table = load_table(address, config=config)
    commit(table, lambda b: set_properties(b, {"commit.retry.num-retries": "2"}))
    with pytest.raises(CommitConflictError, match="t failed: another writer committed first on each of 3") as e:
        commit(table, always, sleep=lambda s: None)
    assert e.value.exit_code == ExitCode.CONFLICT == 5 and always.calls == 3


def test_unknown_outcome_is_resolved_by_looking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table_dir = fs_table(tmp_path)
    real = FileIO.rename_no_replace

    def link_then_fail(self: FileIO, src: str, dst: str) -> bool:
        real(self, src, dst)
        raise StorageError("connection reset after the link")

    monkeypatch.setattr(FileIO, "rename_no_replace", link_then_fail)
    result = commit(load_table(str(table_dir)), lambda b: set_properties(b, {"a": "1"}))
    assert result.committed and result.metadata_location.endswith("v2.metadata.json")

    def fail_before(self: FileIO, src: str, dst: str) -> bool:
        raise StorageError("disk on fire")

    monkeypatch.setattr(FileIO, "rename_no_replace", fail_before)
    with pytest.raises(StorageError, match="disk on fire"):
        commit(load_table(str(table_dir)), lambda b: set_properties(b, {"a": "2"}))
    assert sorted(version_files(table_dir)) == [1, 2]
    assert not [p for p in (table_dir / "metadata").iterdir() if p.name.count("-") == 4]  # temp removed

    def unreadable(self: FileIO, path: str) -> bytes:
        raise StorageError("unreachable")

    # The atomic step fails and the file cannot be read back: nobody can tell, so say so.
    table = load_table(str(table_dir))
    ops = operations_for(table)
    current = ops.refresh()
    monkeypatch.setattr(FileIO, "read", unreadable)
    monkeypatch.setattr(ops, "refresh", lambda: current)
    with pytest.raises(CommitStateUnknownError, match="may or may not have happened") as e:
        commit(table, lambda b: set_properties(b, {"a": "3"}), ops=ops)
    assert e.value.exit_code == ExitCode.STORAGE and "do not rerun blindly" in e.value.one_line()


def test_metadata_file_outside_table_layout_is_refused(tmp_path: Path) -> None:
    table_dir = fs_table(tmp_path)
    loose = tmp_path / "loose.metadata.json"
    loose.write_bytes((table_dir / "metadata" / "v1.metadata.json").read_bytes())
    with pytest.raises(RefusedError, match="metadata file outside a table's metadata/ directory") as e:
        commit(load_table(str(loose)), lambda b: set_properties(b, {"a": "1"}))
    assert e.value.exit_code == ExitCode.REFUSED and "address the table by its directory" in e.value.one_line()
    # Inside a Hadoop-layout directory a vN file is fine: the commit goes to the table's newest version.
    commit(load_table(str(table_dir)), lambda b: set_properties(b, {"a": "1"}))
    by_file = load_table(str(table_dir / "metadata" / "v1.metadata.json"))
    result = commit(by_file, lambda b: set_properties(b, {"b": "2"}))
    assert result.metadata_location.endswith("v3.metadata.json") and result.metadata.properties["a"] == "1"


def test_sql_catalog_schema_namespaces_and_create(tmp_path: Path) -> None:
    config = load_config(write_sql_config(tmp_path))
    result = create_table("prod.db.t", None, new_md(tmp_path / "sqlwh" / "db" / "t"), config=config)
    assert Path(result.metadata_location).name.startswith("00000-")
    assert result.metadata.location == str(tmp_path / "sqlwh" / "db" / "t")
    with pytest.raises(RefusedError, match="already exists"):
        create_table("prod.db.t", None, new_md(tmp_path / "sqlwh" / "db" / "t"), config=config)
    catalog = load_table("prod.db.t", config=config).catalog
    assert isinstance(catalog, SqlCatalog)
    assert catalog.namespace_exists(("db",)) and not catalog.namespace_exists(("nope",))
    catalog.create_namespace(("sales", "eu"), {"owner": "ops"})
    assert catalog.namespace_exists(("sales",)) and catalog.list_namespaces() == [("db",), ("sales",)]
    with pytest.raises(RefusedError):
        catalog.create_namespace(("sales", "eu"))
    db = sqlite3.connect(tmp_path / "catalog.db")
    columns = [r[1] for r in db.execute("PRAGMA table_info(iceberg_tables)")]
    assert columns == ["catalog_name", "table_namespace", "table_name", "metadata_location",
                       "previous_metadata_location", "iceberg_type"]
    assert db.execute("SELECT property_key, property_value FROM iceberg_namespace_properties "
                      "WHERE namespace = 'sales.eu' ORDER BY 1").fetchall() == [("exists", "true"), ("owner", "ops")]
    r = commit(load_table("prod.db.t", config=config), lambda b: set_properties(b, {"k": "v"}))
    row = db.execute("SELECT metadata_location, previous_metadata_location, iceberg_type "
                     "FROM iceberg_tables").fetchone()
    assert row == (r.metadata_location, result.metadata_location, "TABLE")
    assert Path(r.metadata_location).name.startswith("00001-")


def test_sql_catalog_v0_schema_is_kept(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "catalog.db")
    db.execute("CREATE TABLE iceberg_tables(catalog_name VARCHAR(255) NOT NULL,table_namespace VARCHAR(255) NOT NULL,"
               "table_name VARCHAR(255) NOT NULL,metadata_location VARCHAR(1000),previous_metadata_location "
               "VARCHAR(1000),PRIMARY KEY (catalog_name, table_namespace, table_name))")
    db.commit()
    config = load_config(write_sql_config(tmp_path))
    create_table("db.t", None, new_md(tmp_path / "sqlwh" / "db" / "t"), config=config)
    commit(load_table("db.t", config=config), lambda b: set_properties(b, {"k": "v"}))
    assert "iceberg_type" not in [r[1] for r in db.execute("PRAGMA table_info(iceberg_tables)")]


def test_pyiceberg_reads_and_commits_to_our_catalog(tmp_path: Path) -> None:
    pyiceberg_sql = pytest.importorskip("pyiceberg.catalog.sql")
    config = load_config(write_sql_config(tmp_path))
    create_table("db.t", None, new_md(tmp_path / "sqlwh" / "db" / "t"), config=config)
    commit(load_table("db.t", config=config), lambda b: set_properties(b, {"from": "icectl"}))
    theirs = pyiceberg_sql.SqlCatalog("prod", uri=f"sqlite:///{tmp_path / 'catalog.db'}",
                                      warehouse=f"file://{tmp_path / 'sqlwh'}")
    assert theirs.list_tables("db") == [("db", "t")]
    t = theirs.load_table("db.t")
    assert t.properties["from"] == "icectl"
    t.transaction().set_properties({"from": "pyiceberg"}).commit_transaction()
    # ... and icectl continues on top of PyIceberg's commit.
    ours = load_table("db.t", config=config)
    assert ours.metadata.properties["from"] == "pyiceberg"
    assert commit(ours, lambda b: set_properties(b, {"again": "icectl"})).committed
    assert theirs.load_table("db.t").properties["again"] == "icectl"


# ---------------------------------------------------------------------------------------------
# Object storage (moto on 127.0.0.1)


def test_s3_conditional_put_commits(s3_env: str,  # noqa: F811
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = s3_env
    s3.create_bucket(endpoint, "icectl-test-commit")
    location = "s3://icectl-test-commit/wh/db/t"
    create_table(location, None, new_md(location))
    table = load_table(location)
    assert table.io.supports_conditional_create(f"{location}/metadata")  # moto honours If-None-Match
    commit(table, lambda b: set_properties(b, {"a": "1"}))
    # Another writer's v3 lands between our check and our PUT: the conditional PUT is refused
    # (not replacing theirs) and we retry on top of it as v4.
    fs = s3.s3_filesystem(endpoint)
    v3 = "icectl-test-commit/wh/db/t/metadata/v3.metadata.json"
    state = {"hide_v3": False}
    real_version_file = operations.version_file
    monkeypatch.setattr(operations, "version_file", lambda io, d, v: None if v == 3 and state["hide_v3"]
                        else real_version_file(io, d, v))
    theirs: list[bytes] = []

    def build(base: TableMetadata) -> TableMetadata:
        if not theirs:  # the other writer commits v3 right now
            other = prepare_commit(base, set_properties(base, {"other": "1"}), table.metadata_location, 1)
            theirs.append(encode_metadata(other, "none"))
            fs.pipe_file(v3, theirs[0])
            state["hide_v3"] = True
        return set_properties(base, {"b": "2"})

    result = commit(load_table(location), build, sleep=lambda s: state.update(hide_v3=False))
    assert result.attempts == 2 and result.metadata_location == f"{location}/metadata/v4.metadata.json"
    assert fs.cat_file(v3) == theirs[0]  # theirs was not replaced
    assert {"a": "1", "other": "1", "b": "2"}.items() <= result.metadata.properties.items()
    monkeypatch.setattr(operations, "version_file", real_version_file)
    # A server that ignores conditional writes: refused, unless the race is accepted explicitly.
    monkeypatch.setattr(FileIO, "supports_conditional_create", lambda self, d: False)
    with pytest.raises(RefusedError, match="conditional writes") as e:
        commit(load_table(location), lambda b: set_properties(b, {"d": "4"}))
    assert "SQLite catalog" in e.value.one_line()
    monkeypatch.setenv("ICECTL_UNSAFE_OBJECT_STORE_COMMITS", "1")
    assert commit(load_table(location), lambda b: set_properties(b, {"d": "4"})).committed
    assert {"a": "1", "other": "1", "b": "2", "d": "4"}.items() <= load_table(location).metadata.properties.items()


# ---------------------------------------------------------------------------------------------
# Two icectl processes racing


@pytest.mark.parametrize("kind", ["fs", "sql"])
def test_two_processes_lose_no_commit(kind: str, spark: Any, tmp_path: Path) -> None:
    name, table_dir = spark_table(spark, props=RACE_PROPS)
    address, config, env = register(kind, table_dir, tmp_path)
    before = load_table(address, config=config)
    n_before = len(before.metadata.snapshots)
    per_worker = 30
    start_at = str(time.time() + 1.5)  # both start together once the interpreters are up
    outs = [tmp_path / f"w{i}.json" for i in range(2)]
    t0 = time.perf_counter()
    procs = [start_worker("loop", address, str(per_worker), start_at, "0", str(o), env=env) for o in outs]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    elapsed = time.perf_counter() - t0
    reports = [json.loads(o.read_text()) for o in outs]
    md = load_table(address, config=config).metadata
    mine = [r["snapshot_id"] for rep in reports for r in rep]
    assert len(set(mine)) == 2 * per_worker
    assert set(mine) <= set(md.snapshots_by_id)  # no commit lost ...
    chain = {s.snapshot_id for s in ancestors_of(md.current_snapshot_id, md.snapshots_by_id)}
    assert set(mine) <= chain and len(md.snapshots) == n_before + 2 * per_worker  # ... and one line of history
    # Every committed file still holds what its writer wrote: nothing was overwritten.
    for r in (r for rep in reports for r in rep):
        assert sha256(Path(local_path(r["location"])).read_bytes()) == r["sha256"], r["location"]
    names = sorted(Path(local_path(r["location"])).name for rep in reports for r in rep)
    if kind == "fs":
        first = version_of(before.metadata_location) + 1
        assert names == sorted(f"v{v}.metadata.json" for v in range(first, first + 2 * per_worker))
        assert sorted(version_files(table_dir)) == list(range(1, first + 2 * per_worker))  # no gaps, no extras
        assert_linear_history(table_dir)
    else:
        # Java's parseVersion: a base named vN.metadata.json has no version (-1), so ours start at 00000.
        first = metastore_version(before.metadata_location) + 1
        assert sorted(int(n[:5]) for n in names) == list(range(first, first + 2 * per_worker))  # once each
    retries = sum(r["attempts"] - 1 for rep in reports for r in rep)
    print(f"[commit-race {kind}] {2 * per_worker} commits in {elapsed:.1f}s, {retries} conflicts retried")
    if kind == "fs":  # Spark reads the result (its catalog here is the Hadoop one)
        assert spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0]["n"] == 2


# ---------------------------------------------------------------------------------------------
# Spark


def snapshot_digests(spark: Any, name: str, snapshot_ids: list[int],
                     columns: str = "*") -> dict[int, tuple[int, str]]:
    """``table_rows_digest`` of ``VERSION AS OF`` each snapshot, in one Spark job (a UNION ALL)."""
    scans = " UNION ALL ".join(f"SELECT CAST({sid} AS BIGINT) AS sid, sha2(to_json(struct({columns})), 256) AS h "
                               f"FROM {name} VERSION AS OF {sid}" for sid in snapshot_ids)
    rows = spark.sql(f"""
        SELECT sid, count(*) AS n,
               coalesce(sum(CAST(conv(substr(h, 1, 15), 16, 10) AS DECIMAL(38, 0))), 0) AS a,
               coalesce(sum(CAST(conv(substr(h, 16, 15), 16, 10) AS DECIMAL(38, 0))), 0) AS b
        FROM ({scans}) GROUP BY sid""").collect()
    found = {int(r["sid"]): (int(r["n"]), f"{int(r['a']):x}-{int(r['b']):x}") for r in rows}
    return {sid: found.get(sid, (0, "0-0")) for sid in snapshot_ids}  # an empty snapshot has no rows


def test_interleaved_with_spark(spark: Any, spark_clone: Any) -> None:
    from support.spark import metadata_table, table_rows_digest

    t = spark_clone("v2_part")
    name, table_dir = t.name, str(t.location)
    ours: list[int] = []
    steps = [f"INSERT INTO {name} SELECT * FROM {name} WHERE id < 5",
             f"DELETE FROM {name} WHERE id % 3 = 1",
             f"UPDATE {name} SET note = 'icectl-was-here' WHERE id % 4 = 0",
             f"MERGE INTO {name} AS tgt USING (SELECT DISTINCT id FROM {name} WHERE id < 20) AS src ON tgt.id = src.id "
             "WHEN MATCHED AND src.id % 2 = 0 THEN DELETE"]
    for sql in steps:
        ours.append(commit(load_table(table_dir), empty_append).metadata.current_snapshot_id)
        spark.sql(sql)  # Spark builds on our snapshot
        current = load_table(table_dir).metadata.current_snapshot()
        assert current is not None and current.parent_snapshot_id == ours[-1], sql
    ours.append(commit(load_table(table_dir), empty_append).metadata.current_snapshot_id)
    assert table_rows_digest(spark, name) == snapshot_digests(spark, name, [ours[-1]])[ours[-1]]

    # A commit to the dev branch: main, current snapshot and snapshot-log stay as they were.
    before = load_table(table_dir).metadata
    dev_head = before.refs["dev"].snapshot_id
    on_dev = commit(load_table(table_dir), lambda b: empty_append(b, branch="dev")).metadata
    dev_snapshot = on_dev.refs["dev"].snapshot_id
    ours.append(dev_snapshot)
    assert (on_dev.current_snapshot_id, on_dev.snapshot_log) == (before.current_snapshot_id, before.snapshot_log)
    assert on_dev.snapshot_by_id(dev_snapshot).parent_snapshot_id == dev_head
    spark.sql(f"DELETE FROM {name}.branch_dev WHERE id = 101")
    after_dev = load_table(table_dir).metadata
    assert after_dev.snapshot_for_ref("dev").parent_snapshot_id == dev_snapshot  # Spark built on ours
    assert after_dev.current_snapshot_id == before.current_snapshot_id

    md = after_dev
    # Every snapshot, Spark's and ours, reads with Spark; ours read exactly as their parents.
    digests = snapshot_digests(spark, name, [s.snapshot_id for s in md.snapshots])
    for sid in ours:
        parent = md.snapshot_by_id(sid).parent_snapshot_id
        assert parent is not None and digests[sid][0] > 0
        if sid == dev_snapshot:
            # As Java, a new snapshot carries the table's current schema; dev's head predates
            # ADD COLUMN / RENAME, so compare the columns both schemas share.
            both = snapshot_digests(spark, name, [sid, parent], columns="id, name, price, ts, payload")
            assert both[sid] == both[parent]
        else:
            assert digests[sid] == digests[parent]
    history = {r["snapshot_id"] for r in metadata_table(spark, name, "history")}
    assert set(ours) - {dev_snapshot} <= history  # history = main's snapshot-log
    assert {r["snapshot_id"] for r in metadata_table(spark, name, "snapshots")} == set(md.snapshots_by_id)
    assert {s.snapshot_id for s in ancestors_of(md.current_snapshot_id, md.snapshots_by_id)} >= \
        set(ours) - {dev_snapshot}
    logged = [e.metadata_file for e in md.metadata_log]
    assert len(logged) == len(set(logged)) and all(Path(local_path(f)).exists() for f in logged)


def test_v3_empty_append_keeps_row_lineage(spark: Any) -> None:
    from support.spark import table_rows_digest

    name, table_dir = spark_table(spark, version=3)
    before = load_table(str(table_dir)).metadata
    result = commit(load_table(str(table_dir)), empty_append)
    snap = result.metadata.current_snapshot()
    assert snap is not None and (snap.first_row_id, snap.added_rows) == (before.next_row_id, 0)
    assert result.metadata.next_row_id == before.next_row_id
    spark.sql(f"INSERT INTO {name} VALUES (3, 'c')")
    after = load_table(str(table_dir)).metadata
    assert after.next_row_id == before.next_row_id + 1
    rows = spark.sql(f"SELECT id, _row_id FROM {name} ORDER BY id").collect()
    assert [(r["id"], r["_row_id"]) for r in rows] == [(1, 0), (2, 1), (3, before.next_row_id)]
    assert table_rows_digest(spark, f"SELECT * FROM {name} VERSION AS OF {snap.snapshot_id}")[0] == 2


def test_icectl_and_spark_commit_concurrently(spark: Any, tmp_path: Path) -> None:
    """Spark INSERTs in a loop while an icectl process commits continuously to the same table.

    Spark's HadoopTableOperations checks that v<N+1> is absent and then renames over it (its lock
    is per JVM): it never loses to us (our file exists first, or our link fails), but its rename can
    replace a file we created in between; icectl re-reads its file after committing and re-applies
    its change when that happened. Either way every commit of both sides must be in the history.
    """
    name, table_dir = spark_table(spark, props=RACE_PROPS)
    n_before = len(load_table(str(table_dir)).metadata.snapshots)
    spark_inserts = 12
    out, stop = tmp_path / "icectl.json", tmp_path / "stop"
    start_at = time.time() + 2.0
    worker = start_worker("loop", str(table_dir), "1000", str(start_at), "0.05", str(out), str(stop))
    spark_errors: list[BaseException] = []

    def spark_loop() -> None:
        time.sleep(max(0.0, start_at - time.time() + 0.2))  # icectl is already committing
        try:
            for i in range(spark_inserts):
                spark.sql(f"INSERT INTO {name} VALUES ({100 + i}, 'spark')")
        except BaseException as e:  # surfaced below
            spark_errors.append(e)
        finally:
            stop.touch()

    thread = threading.Thread(target=spark_loop)
    t0 = time.perf_counter()
    thread.start()
    _, err = worker.communicate(timeout=300)
    thread.join(timeout=300)
    elapsed = time.perf_counter() - t0
    assert worker.returncode == 0, err
    assert not spark_errors, spark_errors
    report = json.loads(out.read_text())
    md = load_table(str(table_dir)).metadata
    chain = [s.snapshot_id for s in ancestors_of(md.current_snapshot_id, md.snapshots_by_id)][::-1]
    mine = {r["snapshot_id"] for r in report}
    spark_snaps = {s.snapshot_id for s in md.snapshots if s.summary.get("added-records") == "1"}
    assert len(mine) == len(report) and mine <= set(chain)
    assert len(spark_snaps) == spark_inserts and spark_snaps <= set(chain)
    assert len(md.snapshots) == len(chain) == n_before + len(report) + spark_inserts
    ids = sorted(r["id"] for r in spark.sql(f"SELECT id FROM {name}").collect())
    assert ids == [1, 2, *range(100, 100 + spark_inserts)]
    # They really ran at the same time: the history alternates between the two writers.
    labels = ["i" if sid in mine else "s" for sid in chain if sid in mine or sid in spark_snaps]
    switches = sum(a != b for a, b in itertools.pairwise(labels))
    assert switches >= spark_inserts, "".join(labels)
    assert_linear_history(table_dir)
    for r in report:
        assert sha256(Path(r["location"]).read_bytes()) == r["sha256"]
    retries = sum(r["attempts"] - 1 for r in report)
    replaced = sum("replaced by another writer" in c for r in report for c in r["conflicts"])
    print(f"[icectl-vs-spark] {len(report)} icectl + {spark_inserts} Spark commits in {elapsed:.1f}s, "
          f"{switches} alternations; icectl retried {retries} times, {replaced} after Spark replaced its file")


def assert_linear_history(table_dir: Path) -> None:
    """Each v<N+1> was built on v<N>: it logs v<N> last and keeps all of its snapshots."""
    versions = version_files(table_dir)
    assert sorted(versions) == list(range(1, len(versions) + 1))
    previous = parse_table_metadata(versions[1].read_bytes())
    for v in range(2, len(versions) + 1):
        md = parse_table_metadata(versions[v].read_bytes())
        assert Path(local_path(md.metadata_log[-1].metadata_file)).name == versions[v - 1].name, v
        assert set(previous.snapshots_by_id) <= set(md.snapshots_by_id), v
        previous = md


def test_a_check_then_rename_writer_replacing_ours_is_detected(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's local-disk commit (exists? then rename) can replace a v<N+1> we just linked: the
    interleaving is forced here. icectl notices its file is gone and commits again on top."""
    table_dir = fs_table(tmp_path)
    meta = table_dir / "metadata"
    real = FileIO.rename_no_replace
    replaced: list[str] = []

    def ours_then_javas(self: FileIO, src: str, dst: str) -> bool:
        created = real(self, src, dst)
        if not replaced:  # the Java writer saw no v2 before our link; now its rename lands
            v1 = parse_table_metadata((meta / "v1.metadata.json").read_bytes())
            theirs = prepare_commit(v1, set_properties(v1, {"java": "1"}), str(meta / "v1.metadata.json"), 5)
            (meta / "java.tmp").write_bytes(encode_metadata(theirs, "none"))
            os.rename(meta / "java.tmp", dst)  # rename(2) replaces
            replaced.append(dst)
        return created

    monkeypatch.setattr(FileIO, "rename_no_replace", ours_then_javas)
    result = commit(load_table(str(table_dir)), lambda b: set_properties(b, {"icectl": "1"}), sleep=lambda s: None)
    assert replaced and result.attempts == 2 and result.metadata_location == str(meta / "v3.metadata.json")
    assert result.conflicts == (f"version 2 of {table_dir} was replaced by another writer",)
    assert {"java": "1", "icectl": "1"}.items() <= result.metadata.properties.items()
    assert_linear_history(table_dir)


# ---------------------------------------------------------------------------------------------
# A writer killed between writing its metadata file and committing it


@pytest.mark.parametrize("kind", ["fs", "sql"])
def test_killed_writer_leaves_table_unchanged(kind: str, spark: Any, tmp_path: Path) -> None:
    from support.spark import latest_metadata_path, table_rows_digest

    name, table_dir = spark_table(spark)
    address, config, env = register(kind, table_dir, tmp_path)
    before_location = load_table(address, config=config).metadata_location
    before_files = set((table_dir / "metadata").iterdir())
    digest = table_rows_digest(spark, name)
    killed = start_worker("kill", address, env=env)
    assert killed.wait(timeout=120) == 9, killed.communicate()[1]
    new_files = set((table_dir / "metadata").iterdir()) - before_files
    # Exactly the dead writer's metadata file is left over (an orphan), and it is not current.
    assert len(new_files) == 1 and not is_version_file(next(iter(new_files)).name)
    after = load_table(address, config=config)
    assert after.metadata_location == before_location
    assert table_rows_digest(spark, name) == digest
    if kind == "fs":
        assert latest_metadata_path(table_dir) == Path(before_location)
    result = commit(after, empty_append)
    assert result.committed and result.attempts == 1
    if kind == "fs":
        assert table_rows_digest(spark, name) == digest  # Spark reads the following commit's snapshot
        assert load_table(str(table_dir)).metadata.current_snapshot_id == result.metadata.current_snapshot_id


# ---------------------------------------------------------------------------------------------
# Worker processes


def _worker(argv: list[str]) -> None:
    mode, address = argv[0], argv[1]
    if mode == "loop":
        n, start_at, pause, out = int(argv[2]), float(argv[3]), float(argv[4]), Path(argv[5])
        stop = Path(argv[6]) if len(argv) > 6 else None  # ends the loop early once it exists
        table = load_table(address)
        time.sleep(max(0.0, start_at - time.time()))
        report = []
        for _ in range(n):
            if stop is not None and stop.exists():
                break
            result = commit(table, empty_append)
            report.append({"snapshot_id": result.metadata.current_snapshot_id, "location": result.metadata_location,
                           "sha256": sha256(written_bytes(result)), "attempts": result.attempts,
                           "conflicts": result.conflicts})
            if pause:
                time.sleep(pause)
        out.write_text(json.dumps(report))
    elif mode == "kill":
        # Die right after the new metadata file is written, before the atomic step can run.
        def die(*args: object, **kwargs: object) -> bool:
            os._exit(9)

        FileIO.rename_no_replace = die  # type: ignore[method-assign]
        SqlCatalog.swap_metadata_location = die  # type: ignore[method-assign]
        commit(load_table(address), empty_append)
        raise SystemExit("the commit should not have returned")
    else:
        raise SystemExit(f"unknown worker mode {mode}")


if __name__ == "__main__":
    sys.path.insert(0, str(TESTS))
    _worker(sys.argv[1:])
