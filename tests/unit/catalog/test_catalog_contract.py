"""One contract for every catalog: what icectl needs of a catalog, checked the same way on each.

Each catalog kind is a fixture that returns a config (the ``[catalog.c]`` table and ``[s3]``) for a
fresh, empty place in it: a warehouse directory, a SQLite file, and the real servers of
tests/support (PostgreSQL, SeaweedFS's REST catalog, moto's Glue), which skip with the reason when
their server cannot run here. The same steps then run on each: namespaces, create, load, a commit,
a lost race and its retry, a missing table, a name already taken; register and drop (--purge).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icectl.catalog import open_catalog, walk_tables
from icectl.catalog.glue import GlueCatalog
from icectl.catalog.operations import CommitFailedError, LocalCommits, now_ms
from icectl.config import CATALOG_TYPES, Config, parse_config
from icectl.errors import ExitCode, NotFoundError, RefusedError
from icectl.ops.create.metadata import new_table_metadata
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.files.add_files import add_files
from icectl.ops.lifecycle.drop import drop_table
from icectl.ops.lifecycle.register import register_table
from icectl.spec.metadata import TableMetadata
from icectl.spec.requirements import RequirementFailedError
from icectl.spec.schema import NestedField, Schema, parse_primitive
from icectl.spec.updates import SetProperties, TableChange
from icectl.storage import FileIO
from icectl.table import load_table
from icectl.table.commit import commit, create_table

SCHEMA = Schema((NestedField(1, "id", parse_primitive("long"), True),
                 NestedField(2, "name", parse_primitive("string"), False)))
FAST = {"commit.retry.num-retries": "4", "commit.retry.min-wait-ms": "0", "commit.retry.max-wait-ms": "0"}

# catalog kind -> the fixture giving its config; servers' fixtures live in tests/support.
KINDS = {"hadoop": "hadoop_catalog_config", "sqlite": "sqlite_catalog_config",
         "postgres": "postgres_catalog_config", "rest": "rest_catalog_config",
         "glue": "glue_catalog_config"}


@pytest.fixture
def hadoop_catalog_config(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "wh").mkdir()
    return {"catalog": {"c": {"type": "hadoop", "warehouse": str(tmp_path / "wh")}}}


@pytest.fixture
def sqlite_catalog_config(tmp_path: Path) -> dict[str, Any]:
    return {"catalog": {"c": {"type": "sql", "uri": str(tmp_path / "cat.db"), "warehouse": str(tmp_path / "wh")}}}


@pytest.fixture(params=sorted(KINDS))
def config(request: pytest.FixtureRequest) -> Config:
    raw = request.getfixturevalue(KINDS[request.param])
    return parse_config({**raw, "default-catalog": "c"})


def io_for(config: Config) -> FileIO:
    return FileIO(s3=config.s3)


def fresh_namespace() -> tuple[str, ...]:
    return (f"ns_{uuid.uuid4().hex[:8]}",)


def metadata(location: str | None) -> TableMetadata:
    return new_table_metadata(schema=SCHEMA, location=location, partition_spec=None, sort_order=None,
                              properties=dict(FAST), format_version=2)


def created_table(config: Config, io: FileIO) -> str:
    catalog = open_catalog(config, io, "c")
    ns = fresh_namespace()
    assert catalog.create_namespace(ns) is True
    location = catalog.default_table_location(ns, "t")
    create_table(catalog, ".".join((*ns, "t")), metadata(location), config=config, io=io)
    return f"c.{ns[0]}.t"


def props(key: str, value: str) -> Callable[[TableMetadata], TableChange]:
    return lambda base: TableChange((), (SetProperties({key: value}),))


def test_namespaces_are_created_listed_and_not_created_twice(config: Config) -> None:
    io = io_for(config)
    catalog = open_catalog(config, io, "c")
    ns = fresh_namespace()
    assert catalog.create_namespace(ns) is True
    assert ns in catalog.list_namespaces()
    assert catalog.create_namespace(ns, exist_ok=True) is False
    with pytest.raises(RefusedError) as e:
        catalog.create_namespace(ns)
    assert e.value.exit_code == ExitCode.REFUSED


def test_a_created_table_is_listed_loaded_and_committed_to(config: Config) -> None:
    io = io_for(config)
    ident = created_table(config, io)
    _, ns, name = ident.split(".")
    catalog = open_catalog(config, io, "c")
    assert (ns, name) in catalog.list_tables((ns,))
    table = load_table(ident, config, io)
    assert table.metadata.format_version == 2 and table.metadata.schema().column_name(2) == "name"
    first = table.metadata_location
    result = commit(table, props("icectl.contract", "1"))
    assert result.committed and result.metadata_location != first
    again = load_table(ident, config, io)
    assert again.metadata.properties["icectl.contract"] == "1"
    assert again.metadata_location == result.metadata_location
    assert again.metadata.table_uuid == table.metadata.table_uuid
    assert first in {e.metadata_file for e in again.metadata.metadata_log}  # the history is kept


def test_a_commit_from_a_stale_base_loses_and_the_loop_retries_on_the_fresh_one(config: Config) -> None:
    io = io_for(config)
    ident = created_table(config, io)
    _, ns, name = ident.split(".")
    ops_a = open_catalog(config, io, "c").table_operations((ns,), name)
    ops_b = open_catalog(config, io, "c").table_operations((ns,), name)
    base_a, base_b = ops_a.refresh(), ops_b.refresh()
    assert ops_a.commit_change(base_a, TableChange((), (SetProperties({"a": "1"}),))) is not None
    # b still holds the base a replaced. A catalog that swaps whole metadata files must refuse it;
    # a REST server applies b's updates to its own current metadata (only requirements guard the
    # base, as in Java). Either way a's change is never lost.
    try:
        ops_b.commit_change(base_b, TableChange((), (SetProperties({"b": "1"}),)))
        merged = True
    except (CommitFailedError, RequirementFailedError):
        merged = False
    now = ops_b.refresh().metadata.properties
    assert now["a"] == "1" and ("b" in now) == merged
    assert not (merged and isinstance(ops_b, LocalCommits)), "a pointer swap from a stale base won"
    # Two writers at once through the retry loop: both changes land, neither is lost.
    tables = [load_table(ident, config, io) for _ in range(2)]
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            commit(tables[i], props(f"writer{i}", "done"))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    final = load_table(ident, config, io).metadata.properties
    assert final["a"] == "1" and final["writer0"] == final["writer1"] == "done"


def test_a_missing_table_is_not_found_and_a_taken_name_is_refused(config: Config) -> None:
    io = io_for(config)
    ident = created_table(config, io)
    _, ns, _ = ident.split(".")
    with pytest.raises(NotFoundError) as e:
        load_table(f"c.{ns}.missing", config, io)
    assert e.value.exit_code == ExitCode.NOT_FOUND and "missing" in e.value.one_line()
    catalog = open_catalog(config, io, "c")
    before = load_table(ident, config, io).metadata_location
    with pytest.raises(RefusedError):
        create_table(catalog, f"{ns}.t", metadata(catalog.default_table_location((ns,), "t")),
                     config=config, io=io)
    assert load_table(ident, config, io).metadata_location == before  # the existing table is untouched


def test_a_missing_namespace_is_not_found(config: Config) -> None:
    """Java's listTables and listNamespaces throw NoSuchNamespaceException: an empty answer would
    make `icectl expire-snapshots --all typo` a green run over nothing (issue 27)."""
    io = io_for(config)
    ident = created_table(config, io)  # the catalog holds a namespace and a table: the answer is not "no tables"
    catalog = open_catalog(config, io, "c")
    missing = fresh_namespace()
    for call in (lambda: catalog.list_tables(missing), lambda: walk_tables(catalog, missing)):
        with pytest.raises(NotFoundError) as e:
            call()
        assert e.value.exit_code == ExitCode.NOT_FOUND and missing[0] in e.value.one_line()
    if not isinstance(catalog, GlueCatalog):  # Glue databases do not nest: nothing to list below one
        with pytest.raises(NotFoundError):
            catalog.list_namespaces(missing)
    ns = tuple(ident.split(".")[1:2])
    assert walk_tables(catalog, ns) == [(*ns, "t")]


def test_a_change_that_changes_nothing_writes_no_version(config: Config) -> None:
    io = io_for(config)
    ident = created_table(config, io)
    table = load_table(ident, config, io)
    commit(table, props("same", "1"))
    before = load_table(ident, config, io).metadata_location
    result = commit(load_table(ident, config, io), props("same", "1"))
    assert not result.committed and load_table(ident, config, io).metadata_location == before


# --------------------------------------------------------------------------- register and drop


def test_register_points_a_new_name_at_a_tables_metadata_and_refuses_a_taken_one(config: Config) -> None:
    io = io_for(config)
    ident = created_table(config, io)
    _, ns, _ = ident.split(".")
    source = load_table(ident, config, io)
    commit(source, props("registered", "yes"))
    source = load_table(ident, config, io)
    catalog = open_catalog(config, io, "c")
    res = register_table(catalog, (ns, "copy"), source.metadata_location)
    kind = config.catalog("c").type
    copy = load_table(f"c.{ns}.copy", config, io)
    assert res.metadata_location == copy.metadata_location and res.table_uuid == source.metadata.table_uuid
    if kind == "hadoop":  # HadoopTableOperations.commit(null, md): the new table's v1
        assert copy.metadata_location.endswith(f"/{ns}/copy/metadata/v1.metadata.json")
    else:  # a pointer to the given file, no copy (the REST server was asked for exactly that)
        assert copy.metadata_location == source.metadata_location
    if kind != "rest":
        # SeaweedFS answers the register request with the registered metadata (checked by the
        # client: same table uuid), but its later loads serve a table of its own making (another
        # uuid, no properties): a server limitation, so the loaded copy is compared elsewhere only.
        assert copy.metadata.table_uuid == source.metadata.table_uuid
        assert copy.metadata.properties["registered"] == "yes"
        assert copy.metadata.location == source.metadata.location
    assert (ns, "copy") in catalog.list_tables((ns,))
    for name in ("copy", "t"):  # both names are taken now
        before = load_table(f"c.{ns}.{name}", config, io).metadata_location
        with pytest.raises(RefusedError) as e:
            register_table(open_catalog(config, io, "c"), (ns, name), source.metadata_location)
        assert e.value.exit_code == ExitCode.REFUSED
        assert load_table(f"c.{ns}.{name}", config, io).metadata_location == before
    if kind == "rest":
        return  # SeaweedFS serves its registered tables with a new uuid per load: no commit can follow
    if kind == "hadoop":
        # Its folder is not the location its metadata names (the source's): the write gate refuses
        # every commit through it, as through a `cp -r` copy (issue 27).
        with pytest.raises(RefusedError, match="is not the location its metadata names"):
            commit(load_table(f"c.{ns}.copy", config, io), props("only", "copy"))
        assert "only" not in load_table(ident, config, io).metadata.properties
        return
    # A change to the registered table is its own: the source does not move.
    commit(load_table(f"c.{ns}.copy", config, io), props("only", "copy"))
    assert "only" not in load_table(ident, config, io).metadata.properties
    assert load_table(f"c.{ns}.copy", config, io).metadata.properties["only"] == "copy"


def test_register_into_a_missing_namespace_is_what_java_makes_of_it(config: Config) -> None:
    io = io_for(config)
    ident = created_table(config, io)
    location = load_table(ident, config, io).metadata_location
    catalog = open_catalog(config, io, "c")
    ns = fresh_namespace()
    kind = config.catalog("c").type
    if kind in ("glue", "rest"):  # GlueCatalog / RESTSessionCatalog: NoSuchNamespaceException
        with pytest.raises(NotFoundError) as e:
            register_table(catalog, (*ns, "x"), location)
        assert e.value.exit_code == ExitCode.NOT_FOUND
        with pytest.raises(NotFoundError):
            load_table(f"c.{ns[0]}.x", config, io)
    else:  # HadoopCatalog makes the folders; JdbcCatalog checks only in strict mode
        register_table(catalog, (*ns, "x"), location)
        assert load_table(f"c.{ns[0]}.x", config, io).metadata.table_uuid is not None


def test_drop_removes_the_entry_and_keeps_the_files(config: Config) -> None:
    io = io_for(config)
    ident = created_table(config, io)
    _, ns, name = ident.split(".")
    table = load_table(ident, config, io)
    if config.catalog("c").type == "hadoop":  # the version files are the entry: --purge or nothing
        with pytest.raises(RefusedError) as e:
            drop_table(table)
        assert e.value.exit_code == ExitCode.REFUSED and "--purge" in (e.value.hint or "")
        assert load_table(ident, config, io).metadata_location == table.metadata_location
        return
    preview = drop_table(table, dry_run=True)
    assert preview.would_drop and load_table(ident, config, io).metadata_location == table.metadata_location
    res = drop_table(table)
    assert res.dropped is True
    with pytest.raises(NotFoundError):
        load_table(ident, config, io)
    assert (ns, name) not in open_catalog(config, io, "c").list_tables((ns,))
    if config.catalog("c").type != "rest":  # SeaweedFS's server removes a dropped table's files itself
        assert io.exists(table.metadata_location)  # without --purge the files stay
    with pytest.raises(NotFoundError) as e:  # dropped meanwhile: exit 3, nothing else happens
        drop_table(table)
    assert e.value.exit_code == ExitCode.NOT_FOUND


def test_drop_purge_deletes_every_metadata_file_after_the_entry_and_refuses_gc_disabled(config: Config) -> None:
    io = io_for(config)
    ident = created_table(config, io)
    commit(load_table(ident, config, io), props("gc.enabled", "false"))
    table = load_table(ident, config, io)
    with pytest.raises(RefusedError) as e:
        drop_table(table, purge=True)
    assert e.value.exit_code == ExitCode.REFUSED and "gc.enabled" in e.value.message
    assert load_table(ident, config, io).metadata_location == table.metadata_location  # nothing changed
    commit(table, props("gc.enabled", "true"))
    table = load_table(ident, config, io)
    files = [table.metadata_location, *(e.metadata_file for e in table.metadata.metadata_log)]
    assert len(files) == 3 and all(io.exists(f) for f in files)
    preview = drop_table(table, purge=True, dry_run=True)
    assert isinstance(preview.would_delete, dict)
    listed = set(preview.would_delete["metadata_files"])
    assert {f.removeprefix("file:") for f in files} <= {p.removeprefix("file:") for p in listed}
    assert all(io.exists(f) for f in files)
    res = drop_table(table, purge=True)
    assert res.dropped is True and not res.failures and res.deleted["metadata_files"] >= 3
    with pytest.raises(NotFoundError):
        load_table(ident, config, io)
    assert not any(io.exists(f) for f in files)


# Which config type each kind is: every type of config.CATALOG_TYPES needs a kind here (issue 28).
KIND_TYPES = {"hadoop": "hadoop", "sqlite": "sql", "postgres": "sql", "rest": "rest", "glue": "glue"}


def test_every_catalog_type_runs_this_contract() -> None:
    """A fifth catalog type without a kind (and a real server behind it) fails here, instead of
    falling into someone's ``else`` branch unseen."""
    assert set(KIND_TYPES) == set(KINDS)
    assert set(CATALOG_TYPES) <= set(KIND_TYPES.values()), sorted(set(CATALOG_TYPES) - set(KIND_TYPES.values()))


def test_capabilities_say_what_the_catalog_is(config: Config) -> None:
    """What differs between catalogs is asked of the operations (never their class): each kind's
    answers, and register/drop/expire act on them (the tests above and below)."""
    io = io_for(config)
    ident = created_table(config, io)
    _, ns, name = ident.split(".")
    catalog = open_catalog(config, io, "c")
    ops = catalog.table_operations((ns,), name)
    kind = config.catalog("c").type
    folder_table = kind == "hadoop"
    assert ops.entry_is_metadata_files is folder_table and catalog.table_is_its_folder is folder_table
    assert (ops.table_dir is not None) is folder_table
    assert ops.max_format_version == (3 if kind == "rest" else None)
    assert ops.register_checks_namespace is (kind in ("rest", "glue"))
    assert catalog.server_writes_metadata is (kind == "rest")
    assert ops.settle_seconds() == (0.5 if folder_table else 0.0)  # the warehouse here is a local folder
    current = ops.refresh()
    pointer = ops.current_pointer()
    assert (pointer is not None) is (kind in ("sql", "glue"))
    if pointer is not None:
        assert pointer.removeprefix("file:") == current.location.removeprefix("file:")
    assert current.location in ops.describe_entry(ident, current.location) or folder_table


def test_expire_removes_old_snapshots_and_their_files_in_every_catalog(config: Config, tmp_path: Path) -> None:
    """Three appends through the catalog, then expire keeping the last one: the two older manifest
    lists go, the current one and every data file (all still live) stay, and the catalog's entry
    names the new metadata."""
    io = io_for(config)
    ident = created_table(config, io)
    table = load_table(ident, config, io)
    location = table.metadata.location
    assert location
    files = []
    for i in range(3):
        buf = pa.BufferOutputStream()
        pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "name": [f"n{i}"]}), buf)
        path = f"{location.rstrip('/')}/data/f{i}.parquet"
        io.write(path, buf.getvalue().to_pybytes())
        files.append(path)
        add_files(load_table(ident, config, io), [path])
    table = load_table(ident, config, io)
    snaps = table.metadata.snapshots
    assert len(snaps) == 3
    lists = [s.manifest_list for s in snaps]
    before = table.metadata_location
    res = expire_snapshots(table, ExpirePolicy(older_than_ms=now_ms() + 1000, retain_last=1))
    assert res.exit_code == 0, res.failures
    after = load_table(ident, config, io)
    assert [s.snapshot_id for s in after.metadata.snapshots] == [snaps[-1].snapshot_id]
    assert after.metadata_location != before  # the entry moved on
    assert not any(io.exists(p) for p in lists[:2] if p) and lists[2] and io.exists(lists[2])
    assert all(io.exists(f) for f in files)  # every data file is still live
