"""Commits: metadata evolution rules, file-system and SQLite-catalog commits, conflicts, crashes.

Concurrency is tested with real processes: this file doubles as the worker script (``python
test_commit.py loop|kill ...``, see ``start_worker``), also for the Spark-judged races in
tests/interop/test_commit_vs_spark.py. The SQL catalog's own tests are in tests/unit/catalog/test_sql.py.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import s3
from support.forge import property_change

from icectl.catalog import hadoop
from icectl.catalog.hadoop import VERSION_HINT, is_version_file
from icectl.catalog.operations import (
    CommitStateUnknownError,
    encode_metadata,
    metadata_codec,
)
from icectl.catalog.sql import SqlCatalog
from icectl.config import load_config
from icectl.errors import CommitConflictError, ExitCode, RefusedError, StorageError
from icectl.ops.create.metadata import new_table_metadata
from icectl.spec.metadata import TableMetadata, parse_table_metadata
from icectl.spec.schema import NestedField, Schema, parse_primitive
from icectl.spec.snapshots import MetadataLogEntry, Snapshot, SnapshotRef
from icectl.spec.updates import TableChange, add_snapshot, prepare_commit, set_properties, snapshot_change
from icectl.storage import FileIO, local_path
from icectl.table import load_table
from icectl.table.commit import (
    CommitResult,
    RetryPolicy,
    commit,
    create_table,
    new_snapshot_id,
    operations_for,
    removed_metadata_files,
)

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]  # tests/: support/ and the test packages import from here
SCHEMA = Schema((NestedField(1, "id", parse_primitive("long"), True), NestedField(2, "v", parse_primitive("string"))))
# Fast, persistent retries for racing writers (icectl and Spark read the same properties).
RACE_PROPS = {"commit.retry.num-retries": "60", "commit.retry.min-wait-ms": "5", "commit.retry.max-wait-ms": "100"}


# ---------------------------------------------------------------------------------------------
# Helpers (also used by the worker processes)


def empty_append(base: TableMetadata, branch: str = "main") -> TableChange:
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
    return snapshot_change(base, snapshot, branch=branch)


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
        result = commit(table, lambda b, i=i: property_change({"n": str(i)}))
        assert result.attempts == 1 and result.metadata_location == str(meta / f"v{i + 2}.metadata.json")
    assert (meta / VERSION_HINT).read_text() == "4"  # Java writes the bare number
    assert table.metadata.properties["n"] == "2" and table.metadata_location.endswith("v4.metadata.json")
    assert [e.metadata_file for e in table.metadata.metadata_log] == [str(meta / f"v{i}.metadata.json")
                                                                      for i in (1, 2, 3)]
    # gzip codec: vN.gz.metadata.json, readable by icectl (and, by name, by Java).
    commit(table, lambda b: property_change({"write.metadata.compression-codec": "gzip"}))
    assert (meta / "v5.gz.metadata.json").read_bytes()[:2] == b"\x1f\x8b"
    assert load_table(str(table_dir)).metadata.properties["write.metadata.compression-codec"] == "gzip"
    # Nothing else was left behind: no temp files of any attempt.
    assert sorted(p.name for p in meta.iterdir()) == [*(f"v{i}.metadata.json" for i in range(1, 5)),
                                                      "v5.gz.metadata.json", VERSION_HINT]
    # Nothing to change: nothing written.
    same = commit(table, lambda b: TableChange((), ()))
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
            result = commit(table, lambda b, i=i: property_change({"n": str(i)}))
    assert sorted(version_files(keep)) == [1, 2, 3, 4, 5, 6]
    # Log of v6 = [v4, v5]; v1..v3 dropped out of it and were deleted one commit at a time.
    assert sorted(version_files(prune)) == [4, 5, 6]
    assert [Path(e.metadata_file).name for e in result.metadata.metadata_log] == ["v4.metadata.json",
                                                                                 "v5.metadata.json"]
    assert [Path(p).name for p in result.deleted_metadata_files] == ["v3.metadata.json"]
    assert not (prune / "metadata" / ".v3.metadata.json.crc").exists()
    # Failures to delete are ignored: the commit still succeeds.
    (prune / "metadata" / "v4.metadata.json").unlink()
    after = commit(load_table(str(prune)), lambda b: property_change({"n": "x"}))
    assert after.committed and after.deleted_metadata_files == ()


class SneakyWriter:
    """A ``build`` that lets another writer commit first on its first ``losses`` calls."""

    def __init__(self, address: str, losses: int, config: Any = None) -> None:
        self.address, self.losses, self.config, self.calls = address, losses, config, 0

    def __call__(self, base: TableMetadata) -> TableChange:
        self.calls += 1
        if self.calls <= self.losses:
            other = load_table(self.address, config=self.config)
            commit(other, lambda b: property_change({f"other-{self.losses}-{self.calls}": "1"}))
        return property_change({"mine": f"{self.losses}-{self.calls}"})


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
    commit(table, lambda b: property_change({"commit.retry.num-retries": "2"}))
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
    result = commit(load_table(str(table_dir)), lambda b: property_change({"a": "1"}))
    assert result.committed and result.metadata_location.endswith("v2.metadata.json")

    def fail_before(self: FileIO, src: str, dst: str) -> bool:
        raise StorageError("disk on fire")

    monkeypatch.setattr(FileIO, "rename_no_replace", fail_before)
    with pytest.raises(StorageError, match="disk on fire"):
        commit(load_table(str(table_dir)), lambda b: property_change({"a": "2"}))
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
        commit(table, lambda b: property_change({"a": "3"}), ops=ops)
    assert e.value.exit_code == ExitCode.CONFLICT and "do not rerun blindly" in e.value.one_line()


def test_metadata_file_outside_table_layout_is_refused(tmp_path: Path) -> None:
    table_dir = fs_table(tmp_path)
    loose = tmp_path / "loose.metadata.json"
    loose.write_bytes((table_dir / "metadata" / "v1.metadata.json").read_bytes())
    with pytest.raises(RefusedError, match="metadata file outside a table's metadata/ directory") as e:
        commit(load_table(str(loose)), lambda b: property_change({"a": "1"}))
    assert e.value.exit_code == ExitCode.REFUSED and "address the table through its catalog" in e.value.one_line()
    # Inside a Hadoop-layout directory a vN file is fine: the commit goes to the table's newest version.
    commit(load_table(str(table_dir)), lambda b: property_change({"a": "1"}))
    by_file = load_table(str(table_dir / "metadata" / "v1.metadata.json"))
    result = commit(by_file, lambda b: property_change({"b": "2"}))
    assert result.metadata_location.endswith("v3.metadata.json") and result.metadata.properties["a"] == "1"


# ---------------------------------------------------------------------------------------------
# Object storage (moto on 127.0.0.1)


def test_s3_conditional_put_commits(s3_env: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = s3_env
    s3.create_bucket(endpoint, "icectl-test-commit")
    location = "s3://icectl-test-commit/wh/db/t"
    create_table(location, None, new_md(location))
    table = load_table(location)
    assert table.io.supports_conditional_create(f"{location}/metadata")  # moto honours If-None-Match
    commit(table, lambda b: property_change({"a": "1"}))
    # Another writer's v3 lands between our check and our PUT: the conditional PUT is refused
    # (not replacing theirs) and we retry on top of it as v4.
    fs = s3.s3_filesystem(endpoint)
    v3 = "icectl-test-commit/wh/db/t/metadata/v3.metadata.json"
    state = {"hide_v3": False}
    real_version_file = hadoop.version_file
    monkeypatch.setattr(hadoop, "version_file", lambda io, d, v: None if v == 3 and state["hide_v3"]
                        else real_version_file(io, d, v))
    theirs: list[bytes] = []

    def build(base: TableMetadata) -> TableChange:
        if not theirs:  # the other writer commits v3 right now
            other = prepare_commit(base, set_properties(base, {"other": "1"}), table.metadata_location, 1)
            theirs.append(encode_metadata(other, "none"))
            fs.pipe_file(v3, theirs[0])
            state["hide_v3"] = True
        return property_change({"b": "2"})

    result = commit(load_table(location), build, sleep=lambda s: state.update(hide_v3=False))
    assert result.attempts == 2 and result.metadata_location == f"{location}/metadata/v4.metadata.json"
    assert fs.cat_file(v3) == theirs[0]  # theirs was not replaced
    assert {"a": "1", "other": "1", "b": "2"}.items() <= result.metadata.properties.items()
    monkeypatch.setattr(hadoop, "version_file", real_version_file)
    # A server that ignores conditional writes: refused, unless the race is accepted explicitly.
    monkeypatch.setattr(FileIO, "supports_conditional_create", lambda self, d: False)
    with pytest.raises(RefusedError, match="conditional writes") as e:
        commit(load_table(location), lambda b: property_change({"d": "4"}))
    assert "SQLite catalog" in e.value.one_line()
    monkeypatch.setenv("ICECTL_UNSAFE_OBJECT_STORE_COMMITS", "1")
    assert commit(load_table(location), lambda b: property_change({"d": "4"})).committed
    assert {"a": "1", "other": "1", "b": "2", "d": "4"}.items() <= load_table(location).metadata.properties.items()


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
    result = commit(load_table(str(table_dir)), lambda b: property_change({"icectl": "1"}), sleep=lambda s: None)
    assert replaced and result.attempts == 2 and result.metadata_location == str(meta / "v3.metadata.json")
    assert result.conflicts == (f"version 2 of {table_dir} was replaced by another writer",)
    assert {"java": "1", "icectl": "1"}.items() <= result.metadata.properties.items()
    assert_linear_history(table_dir)


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
