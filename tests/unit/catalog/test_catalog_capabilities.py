"""What differs between catalogs, judged by its outcome (test_catalog_contract.py checks what the
capabilities say; here register, drop, create and expire act on them and their refusals are checked).

Each catalog type is run against the real thing: a warehouse directory, SQLite, PostgreSQL,
SeaweedFS's REST catalog and moto's Glue (servers from tests/support, which skip with the reason
when they cannot run here). Ported from the i28-cat branch onto main's API (issue 28).
"""

from __future__ import annotations

import dataclasses
import io as _io
import sys
import time
import uuid
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icectl.catalog import open_catalog
from icectl.catalog.operations import encode_metadata, now_ms
from icectl.config import Config
from icectl.errors import ExitCode, NotFoundError, RefusedError, UsageError
from icectl.ops.create.metadata import new_table_metadata
from icectl.ops.expire import ExpirePolicy, expire_snapshots
from icectl.ops.files.add_files import add_files
from icectl.ops.lifecycle.drop import drop_table, drop_unreadable_entry
from icectl.ops.lifecycle.register import register_table
from icectl.spec.metadata import TableMetadata
from icectl.spec.updates import SetProperties, TableChange
from icectl.storage import FileIO
from icectl.table import Table, load_table
from icectl.table.commit import commit, create_table, operations_for

# The catalog kinds, their configs and the table schema are the contract test's: one list of kinds.
from unit.catalog import test_catalog_contract as contract

FAST, KINDS, SCHEMA = contract.FAST, contract.KINDS, contract.SCHEMA
config = contract.config  # fixtures, used by name
hadoop_catalog_config = contract.hadoop_catalog_config
sqlite_catalog_config = contract.sqlite_catalog_config


def kind_of(config: Config) -> str:
    return config.catalog("c").type


def created(config: Config, io: FileIO, *, name: str = "t") -> tuple[str, str]:
    """A new table in a fresh namespace: its address ``c.ns.name`` and the namespace."""
    catalog = open_catalog(config, io, "c")
    ns = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace((ns,))
    md = new_table_metadata(schema=SCHEMA, location=catalog.default_table_location((ns,), name),
                            partition_spec=None, sort_order=None, properties=dict(FAST), format_version=2)
    create_table(catalog, f"{ns}.{name}", md, config=config, io=io)
    return f"c.{ns}.{name}", ns


def append(config: Config, io: FileIO, ident: str, i: int, data: list[str]) -> Table:
    """One add-files snapshot of a one-row Parquet file written into the table's data/ folder."""
    table = load_table(ident, config, io)
    buf = _io.BytesIO()
    pq.write_table(pa.table({"id": pa.array([i], pa.int64()), "name": [f"n{i}"]}), buf)
    location = table.metadata.location
    assert location
    path = f"{location.rstrip('/')}/data/f{i}-{uuid.uuid4().hex[:6]}.parquet"
    io.write(path, buf.getvalue())
    add_files(table, [path])
    data.append(path)
    return load_table(ident, config, io)


def metadata_file(io: FileIO, location: str, md: TableMetadata) -> str:
    """Write ``md`` (located at ``location``) as a metadata file under ``location/metadata``."""
    path = f"{location}/metadata/00000-{uuid.uuid4()}.metadata.json"
    io.write(path, encode_metadata(dataclasses.replace(md, location=location), "none"))
    return path


def props(key: str, value: str) -> Callable[[TableMetadata], TableChange]:
    return lambda base: TableChange((), (SetProperties({key: value}),))


def entry_exists(config: Config, io: FileIO, ident: str) -> bool:
    try:
        load_table(ident, config, io)
    except NotFoundError:
        return False
    return True


# --------------------------------------------------------------------------- register


def test_a_register_dry_run_says_what_the_catalog_would_keep_and_writes_nothing(config: Config) -> None:
    io = FileIO(s3=config.s3)
    ident, ns = created(config, io)
    source = append(config, io, ident, 1, [])
    catalog = open_catalog(config, io, "c")
    preview = register_table(catalog, (ns, "copy"), source.metadata_location, dry_run=True)
    assert not entry_exists(config, io, f"c.{ns}.copy")
    if kind_of(config) == "hadoop":  # the entry is the table folder's v1 copy and its version-hint.text
        folder = catalog.default_table_location((ns,), "copy")
        assert preview.data["would_write"] == [
            f"{folder}/metadata/v1.metadata.json (a copy of {source.metadata_location}) and its version-hint.text"]
        assert not io.exists(f"{folder}/metadata/version-hint.text")
    else:  # a pointer to the given file: nothing copied
        assert preview.data["would_write"] == [f"a catalog entry c.{ns}.copy pointing at {source.metadata_location}"]
    missing = f"ns_{uuid.uuid4().hex[:8]}"
    if kind_of(config) in ("glue", "rest"):  # a dry run into a missing namespace says it too
        with pytest.raises(NotFoundError):
            register_table(catalog, (missing, "x"), source.metadata_location, dry_run=True)
    else:
        assert register_table(catalog, (missing, "x"), source.metadata_location, dry_run=True).data["would_write"]
    assert not entry_exists(config, io, f"c.{missing}.x")


def test_register_metadata_kept_elsewhere_only_where_the_catalog_can_find_it(config: Config) -> None:
    io = FileIO(s3=config.s3)
    ident, ns = created(config, io)
    catalog = open_catalog(config, io, "c")
    source = load_table(ident, config, io)
    location = source.metadata.location
    assert location
    own = f"{location.rstrip('/')}/metadata"
    if kind_of(config) == "hadoop":  # a file-system table finds its versions in <folder>/metadata only
        md = dataclasses.replace(source.metadata, properties={**source.metadata.properties, "write.metadata.path": own})
        path = metadata_file(io, location.rstrip("/"), md)
        for dry_run in (True, False):  # a dry run says it too, before anything is written
            with pytest.raises(RefusedError) as e:
                register_table(catalog, (ns, "e"), path, dry_run=dry_run)
            assert e.value.exit_code == ExitCode.REFUSED and "metadata elsewhere" in e.value.message
        assert not entry_exists(config, io, f"c.{ns}.e")
        return
    commit(source, props("write.metadata.path", own))  # the catalog writes its own metadata file with it
    path = load_table(ident, config, io).metadata_location
    register_table(catalog, (ns, "e"), path)
    assert entry_exists(config, io, f"c.{ns}.e")


def test_register_a_format_version_the_catalog_cannot_hold(config: Config) -> None:
    io = FileIO(s3=config.s3)
    ident, ns = created(config, io)
    location = f"{(load_table(ident, config, io).metadata.location or '').rstrip('/')}-v4"
    v3 = new_table_metadata(schema=SCHEMA, location=location, partition_spec=None, sort_order=None,
                            properties=dict(FAST), format_version=3)
    path = metadata_file(io, location, dataclasses.replace(v3, format_version=4))  # an empty v4 table
    catalog = open_catalog(config, io, "c")
    if kind_of(config) == "rest":  # the REST protocol has no representation of v4 root manifests
        for dry_run in (True, False):  # a dry run says it too
            with pytest.raises(RefusedError) as e:
                register_table(catalog, (ns, "v4"), path, dry_run=dry_run)
            assert e.value.exit_code == ExitCode.REFUSED and "format version 4" in e.value.message
        assert not entry_exists(config, io, f"c.{ns}.v4")
    else:
        register_table(catalog, (ns, "v4"), path)
        assert load_table(f"c.{ns}.v4", config, io).metadata.format_version == 4


# --------------------------------------------------------------------------- drop


def test_drop_purge_removes_the_entry_and_every_file_data_and_manifest_lists_too(config: Config) -> None:
    io = FileIO(s3=config.s3)
    ident, ns = created(config, io)
    data: list[str] = []
    append(config, io, ident, 1, data)
    table = append(config, io, ident, 2, data)
    md = table.metadata
    files = [table.metadata_location, *(e.metadata_file for e in md.metadata_log),
             *(s.manifest_list for s in md.snapshots if s.manifest_list)]
    assert len(data) == 2 and all(io.exists(f) for f in (*files, *data))
    preview = drop_table(table, purge=True, dry_run=True)
    if kind_of(config) == "hadoop":
        folder = open_catalog(config, io, "c").default_table_location((ns,), "t")
        assert preview.would_drop == f"the version files and version-hint.text in {folder}/metadata"
    else:
        assert preview.would_drop == f"the catalog entry {ns}.t (pointing at {table.metadata_location})"
    assert entry_exists(config, io, ident) and all(io.exists(f) for f in (*files, *data))
    res = drop_table(table, purge=True)
    assert res.dropped is True and not res.failures
    assert not entry_exists(config, io, ident)
    assert not any(io.exists(f) for f in (*files, *data))


def test_an_entry_is_dropped_without_its_metadata_only_where_the_catalog_keeps_a_pointer(config: Config) -> None:
    io = FileIO(s3=config.s3)
    ident, ns = created(config, io)
    table = load_table(ident, config, io)
    why = NotFoundError("the metadata cannot be read (stand-in)")
    catalog = open_catalog(config, io, "c")
    if kind_of(config) in ("hadoop", "rest"):  # no pointer apart from the metadata: the error itself
        with pytest.raises(NotFoundError) as e:
            drop_unreadable_entry(catalog, (ns, "t"), why)
        assert e.value is why
        assert entry_exists(config, io, ident)
        return
    preview = drop_unreadable_entry(catalog, (ns, "t"), why, dry_run=True)
    assert preview.dry_run and entry_exists(config, io, ident)
    res = drop_unreadable_entry(catalog, (ns, "t"), why)
    assert res.dropped is True and res.metadata_location == table.metadata_location
    assert not entry_exists(config, io, ident)
    assert io.exists(table.metadata_location)  # only the entry goes


def test_a_file_system_tables_folder_is_its_entry_and_purging_it_by_path_removes_the_catalog_table(
        config: Config) -> None:
    io = FileIO(s3=config.s3)
    ident, ns = created(config, io)
    data: list[str] = []
    append(config, io, ident, 1, data)
    ops = operations_for(load_table(ident, config, io))
    if kind_of(config) != "hadoop":  # only a file-system table has a folder that is its entry
        assert ops.table_dir is None
        return
    assert ops.table_dir == open_catalog(config, io, "c").default_table_location((ns,), "t")
    table = load_table(ops.table_dir, config, io)  # the same table, by its path
    files = [table.metadata_location, *data]
    res = drop_table(table, purge=True)
    assert res.dropped is True and not res.shared_with
    assert not entry_exists(config, io, ident) and not any(io.exists(f) for f in files)


# --------------------------------------------------------------------------- expire and create


def test_expire_moves_the_pointer_and_waits_for_the_commit_to_settle_where_the_catalog_asks(
        config: Config, monkeypatch: pytest.MonkeyPatch) -> None:
    io = FileIO(s3=config.s3)
    ident, _ = created(config, io)
    data: list[str] = []
    first = append(config, io, ident, 1, data)
    old = first.metadata.current_snapshot()
    assert old is not None and old.manifest_list
    table = append(config, io, ident, 2, data)
    before = table.metadata_location
    slept: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:  # only expire's own waits (servers' threads sleep too)
        if sys._getframe(1).f_globals.get("__name__") == "icectl.ops.expire":
            slept.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    res = expire_snapshots(table, ExpirePolicy(older_than_ms=now_ms() + 1000, retain_last=1))
    assert res.expired_snapshots == [old.snapshot_id]
    after = load_table(ident, config, io)
    assert after.metadata_location == res.commit.metadata_location != before  # the catalog's pointer moved
    ops = operations_for(after)
    pointer = ops.current_pointer()
    if pointer is not None:
        assert pointer == res.commit.metadata_location
    assert not io.exists(old.manifest_list) and all(io.exists(p) for p in data)
    # A check-then-rename catalog (a warehouse on a local disk) waits before trusting its commit.
    if kind_of(config) == "hadoop":
        assert slept and 0 < max(slept) <= 0.5
    else:
        assert not any(slept)


def test_create_places_a_table_where_the_catalog_keeps_it(config: Config) -> None:
    io = FileIO(s3=config.s3)
    ident, ns = created(config, io)
    elsewhere = f"{(load_table(ident, config, io).metadata.location or '').rstrip('/')}-elsewhere"
    md = new_table_metadata(schema=SCHEMA, location=elsewhere, partition_spec=None, sort_order=None,
                            properties=dict(FAST), format_version=2)
    catalog = open_catalog(config, io, "c")
    if kind_of(config) == "hadoop":  # a warehouse table is its directory <warehouse>/<ns>/<table>
        with pytest.raises(UsageError, match="location is its directory"):
            create_table(catalog, f"{ns}.other", md, config=config, io=io)
        assert not entry_exists(config, io, f"c.{ns}.other")
        return
    create_table(catalog, f"{ns}.other", md, config=config, io=io)
    assert load_table(f"c.{ns}.other", config, io).metadata.location == elsewhere  # the entry points there
