"""icectl/catalog/glue.py against moto's Glue server (no in-process mocks of boto).

moto 5.2 ignores ``VersionId`` on ``UpdateTable`` (tests/e2e/test_glue_server.py pins it), so a lost
conditional update cannot be provoked here. What is tested instead: every ``UpdateTable`` icectl
sends carries the ``VersionId`` of the ``GetTable`` it read just before (recorded by a botocore
``before-call`` hook on the client, i.e. the request as it goes on the wire), and the check that runs
before it (the fresh ``metadata_location`` must still be the base) makes a stale commit lose.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pyarrow as pa
import pytest
from support.forge import property_change
from support.glue import GlueEnv, glue_table, record_calls
from support.s3 import closed_endpoint

from icectl.catalog.glue import GlueCatalog, GlueOperations, glue_columns, glue_type
from icectl.catalog.operations import CommitFailedError
from icectl.config import CatalogConfig
from icectl.errors import CorruptInputError, NotFoundError, RefusedError, StorageError, UsageError
from icectl.spec.schema import DecimalType, ListType, MapType, NestedField, PrimitiveType, StructType
from icectl.storage import FileIO, S3Settings

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])


def rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "s": [f"r{i}" for i in range(start, start + n)]},
                    schema=SCHEMA)


def catalog(env: GlueEnv, **props: Any) -> GlueCatalog:
    props = {k: v for k, v in {"endpoint": env.server.endpoint, "region": env.server.region, **props}.items()
             if v is not None}
    io = FileIO(S3Settings(endpoint=env.server.endpoint, region=env.server.region))
    return GlueCatalog.from_config(CatalogConfig("glue", "glue", env.server.warehouse, None, props), io)


def pyiceberg_table(env: GlueEnv, name: str, appends: int = 1) -> Any:
    t = env.server.pyiceberg().create_table(f"{env.database}.{name}", schema=SCHEMA)
    for i in range(appends):
        t.append(rows(2, 10 * i))
    return t


# ------------------------------------------------------------------ configuration


def test_from_config_reads_icectl_and_pyiceberg_key_spellings(glue_env: GlueEnv) -> None:
    cc = CatalogConfig("g", "glue", "s3://b/wh/", None,
                       {"glue.region": "eu-west-1", "endpoint": "http://127.0.0.1:1", "profile": "p"})
    c = GlueCatalog.from_config(cc, FileIO(S3Settings()))
    assert (c.region, c.endpoint, c.profile, c.warehouse) == ("eu-west-1", "http://127.0.0.1:1", "p", "s3://b/wh")


def test_from_config_refuses_unknown_keys() -> None:
    cc = CatalogConfig("g", "glue", "", None, {"regoin": "eu-west-1"}, source="/etc/icectl.toml")
    with pytest.raises(CorruptInputError, match=r"unknown key.*regoin.* in /etc/icectl.toml") as e:
        GlueCatalog.from_config(cc, FileIO(S3Settings()))
    assert e.value.exit_code == 4


def test_missing_boto3_names_the_extra(glue_env: GlueEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    c = catalog(glue_env)
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 now raises ImportError
    with pytest.raises(UsageError, match="boto3") as e:
        c.list_namespaces()
    assert "pip install 'icectl[glue]'" in (e.value.hint or "")


# ------------------------------------------------------------------ namespaces and tables


def test_list_namespaces_and_tables_only_iceberg(glue_env: GlueEnv) -> None:
    client = glue_env.server.client()
    db = glue_env.database
    pyiceberg_table(glue_env, "ice", appends=0)
    client.create_table(DatabaseName=db, TableInput={"Name": "hive", "TableType": "EXTERNAL_TABLE"})
    client.create_table(DatabaseName=db, TableInput={"Name": "lower", "Parameters": {
        "table_type": "iceberg", "metadata_location": "s3://x/y.metadata.json"}})
    c = catalog(glue_env)
    assert (db,) in c.list_namespaces()
    assert c.list_namespaces((db,)) == []  # Glue databases do not nest
    assert sorted(c.list_tables((db,))) == [(db, "ice"), (db, "lower")]


def test_listing_follows_next_token(glue_env: GlueEnv) -> None:
    """moto answers every page at once; a hook cuts its answers into pages of one so the loop is used."""
    c = catalog(glue_env)
    for name in ("a", "b", "c"):
        glue_env.server.client().create_table(DatabaseName=glue_env.database, TableInput={
            "Name": name, "Parameters": {"table_type": "ICEBERG", "metadata_location": "s3://x/m.metadata.json"}})
    tokens: list[str | None] = []

    def before(params: dict[str, Any], **_: Any) -> None:
        tokens.append(json.loads(params["body"] or b"{}").get("NextToken"))

    def after(parsed: dict[str, Any], **_: Any) -> None:
        start = int(tokens[-1] or 0)
        key = "TableList" if "TableList" in parsed else "DatabaseList"
        items = parsed[key]
        parsed[key] = items[start:start + 1]
        if start + 1 < len(items):
            parsed["NextToken"] = str(start + 1)

    events = c.client.meta.events
    events.register("before-call.glue.GetTables", before)
    events.register("after-call.glue.GetTables", after)
    assert sorted(c.list_tables((glue_env.database,))) == [(glue_env.database, n) for n in "abc"]
    assert tokens == [None, "1", "2"]


def test_create_namespace_exist_ok_and_location(glue_env: GlueEnv) -> None:
    c = catalog(glue_env)
    new = f"{glue_env.database}_new"
    assert c.create_namespace((new,), {"location": "s3://elsewhere/x/", "owner": "me"}) is True
    assert c.create_namespace((new,), exist_ok=True) is False
    with pytest.raises(RefusedError, match="already exists"):
        c.create_namespace((new,))
    d = glue_env.server.client().get_database(Name=new)["Database"]
    assert (d["LocationUri"], d["Parameters"]) == ("s3://elsewhere/x/", {"owner": "me"})
    # Java's defaultWarehouseLocation: the database's location wins over the warehouse
    assert c.default_table_location((new,), "t") == "s3://elsewhere/x/t"
    assert c.default_table_location((glue_env.database,), "t") == \
        f"{glue_env.server.warehouse}/{glue_env.database}.db/t"
    with pytest.raises(UsageError, match="one level"):
        c.create_namespace(("a", "b"))


def test_missing_database(glue_env: GlueEnv) -> None:
    c = catalog(glue_env)
    with pytest.raises(NotFoundError, match="database nope does not exist") as e:
        c.list_tables(("nope",))
    assert e.value.exit_code == 3


# ------------------------------------------------------------------ loading


def test_refresh_reads_what_pyiceberg_committed(glue_env: GlueEnv) -> None:
    t = pyiceberg_table(glue_env, "t", appends=2)
    current = catalog(glue_env).table_operations((glue_env.database,), "t").refresh()
    assert current.location == t.metadata_location
    assert current.version == 2  # 00002-<uuid>.metadata.json
    assert [s.snapshot_id for s in current.metadata.snapshots] == [s.snapshot_id for s in t.metadata.snapshots]


def test_refresh_missing_and_non_iceberg_tables(glue_env: GlueEnv) -> None:
    glue_env.server.client().create_table(DatabaseName=glue_env.database,
                                          TableInput={"Name": "hive", "TableType": "EXTERNAL_TABLE"})
    c = catalog(glue_env)
    with pytest.raises(NotFoundError, match="does not exist") as e:
        c.table_operations((glue_env.database,), "nope").refresh()
    assert e.value.exit_code == 3
    with pytest.raises(NotFoundError, match="not an Iceberg table") as e:
        c.table_operations((glue_env.database,), "hive").refresh()
    assert e.value.exit_code == 3


def test_endpoint_down_is_a_storage_error(glue_env: GlueEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # one retry, not two with backoff
    c = catalog(glue_env, endpoint=closed_endpoint())
    with pytest.raises(StorageError, match=r"cannot reach Glue at http://127\.0\.0\.1") as e:
        c.table_operations((glue_env.database,), "t").refresh()
    assert e.value.exit_code == 8


def test_unknown_credentials_are_a_storage_error(glue_env: GlueEnv,
                                                glue_refuses_credentials: list[str]) -> None:
    c = catalog(glue_env)
    with pytest.raises(StorageError, match="UnrecognizedClientException") as e:
        c.table_operations((glue_env.database,), "t").refresh()
    assert e.value.exit_code == 8 and "credentials" in (e.value.hint or "")
    with pytest.raises(StorageError):
        c.list_namespaces()
    assert glue_refuses_credentials == ["get_table", "get_databases"]


def test_no_region_is_a_usage_error(glue_env: GlueEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    c = catalog(glue_env, region=None)
    with pytest.raises(UsageError, match="no region") as e:
        c.list_namespaces()
    assert e.value.exit_code == 2


def test_an_endpoint_that_is_not_glue(glue_env: GlueEnv) -> None:
    """A web server that answers 404 pages (the wrong port of a host): one line, exit 8."""
    with not_glue_server() as endpoint:
        c = catalog(glue_env, endpoint=endpoint)
        with pytest.raises(StorageError, match="answered get_table with HTTP 404, not as Glue does") as e:
            c.table_operations((glue_env.database,), "t").refresh()
    assert e.value.exit_code == 8 and "\n" not in e.value.message


class NotGlue(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = b"<!DOCTYPE html>\n<html>\n<body>Not Found</body>\n</html>\n"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def not_glue_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotGlue)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_wrong_region_finds_no_table(glue_env: GlueEnv) -> None:
    pyiceberg_table(glue_env, "t", appends=0)
    c = catalog(glue_env, region="eu-west-1")  # moto keeps Glue per region, as AWS does
    with pytest.raises(NotFoundError):
        c.table_operations((glue_env.database,), "t").refresh()


# ------------------------------------------------------------------ commits


def test_commit_sends_version_id_and_keeps_parameters(glue_env: GlueEnv) -> None:
    pyiceberg_table(glue_env, "t", appends=1)
    glue_env.server.client().update_table(DatabaseName=glue_env.database, TableInput={
        **{k: v for k, v in glue_table(glue_env.server, glue_env.database, "t").items()
           if k in ("Name", "TableType", "StorageDescriptor")},
        "Description": "kept", "Parameters": {**t_params(glue_env), "team": "data"}})
    before = glue_table(glue_env.server, glue_env.database, "t")
    c = catalog(glue_env)
    updates = record_calls(c.client, "UpdateTable")
    gets = record_calls(c.client, "GetTable")
    ops = c.table_operations((glue_env.database,), "t")
    base = ops.refresh()
    location, _ = ops.commit_change(base, property_change({"icectl.test": "1"}))
    after = glue_table(glue_env.server, glue_env.database, "t")
    assert len(updates) == 1
    assert updates[0]["VersionId"] == before["VersionId"]  # the condition Glue checks (moto does not)
    assert updates[0]["SkipArchive"] is True
    assert len(gets) == 2  # refresh, then the fresh read the swap is conditioned on
    params = after["Parameters"]
    assert params["metadata_location"] == location != base.location
    assert params["previous_metadata_location"] == base.location
    assert (params["table_type"], params["team"], after["Description"]) == ("ICEBERG", "data", "kept")
    assert after["StorageDescriptor"]["Location"] == base.metadata.location
    assert [col["Name"] for col in after["StorageDescriptor"]["Columns"]] == ["id", "s"]
    assert location.split("/")[-1].startswith("00002-")  # create 00000, append 00001
    reloaded = glue_env.server.pyiceberg().load_table(f"{glue_env.database}.t")
    assert reloaded.metadata_location == location
    assert reloaded.properties["icectl.test"] == "1"
    assert reloaded.scan().to_arrow().num_rows == 2


def t_params(env: GlueEnv) -> dict[str, str]:
    return dict(glue_table(env.server, env.database, "t")["Parameters"])


def test_stale_base_loses_and_leaves_no_file(glue_env: GlueEnv) -> None:
    t = pyiceberg_table(glue_env, "t", appends=1)
    c = catalog(glue_env)
    updates = record_calls(c.client, "UpdateTable")
    ops = c.table_operations((glue_env.database,), "t")
    base = ops.refresh()
    t.append(rows(1, 100))  # another writer moves the pointer after our refresh
    files_before = glue_env.server.list_objects(glue_env.table_prefix("t") + "/metadata")
    with pytest.raises(CommitFailedError, match="another writer"):
        ops.commit_change(base, property_change({"x": "1"}))
    assert updates == []  # lost on the fresh GetTable, before any UpdateTable
    assert t_params(glue_env)["metadata_location"] == t.metadata_location
    assert glue_env.server.list_objects(glue_env.table_prefix("t") + "/metadata") == files_before


def test_concurrent_modification_loses_and_keeps_the_other_commit(glue_env: GlueEnv,
                                                                   glue_version_check: None) -> None:
    """Another writer commits between the swap's fresh GetTable and its UpdateTable: Glue (moto with
    ``glue_version_check``) refuses the stale VersionId, the attempt loses, our file is removed."""
    t = pyiceberg_table(glue_env, "t", appends=1)
    c = catalog(glue_env)
    ops = c.table_operations((glue_env.database,), "t")
    base = ops.refresh()

    def other_writer_first(**_: Any) -> None:
        if t_params(glue_env)["metadata_location"] == base.location:  # once: before our UpdateTable
            t.append(rows(1, 100))

    c.client.meta.events.register("before-call.glue.UpdateTable", other_writer_first)
    files_before = glue_env.server.list_objects(glue_env.table_prefix("t") + "/metadata")
    with pytest.raises(CommitFailedError):
        ops.commit_change(base, property_change({"x": "1"}))
    assert t_params(glue_env)["metadata_location"] == t.metadata_location  # the other writer's commit
    after = glue_env.server.list_objects(glue_env.table_prefix("t") + "/metadata")
    assert {p for p in after - files_before if p.endswith(".metadata.json")} == {t.metadata_location}  # ours is gone


def test_a_refused_retry_of_our_own_update_is_a_success(glue_env: GlueEnv,
                                                         glue_version_check: None) -> None:
    """boto3 retries an UpdateTable whose answer was lost although Glue applied it; the retry is then
    refused (ConcurrentModificationException: the version moved). The swap looks and finds its own
    location current: committed, not lost (and its metadata file must stay)."""
    pyiceberg_table(glue_env, "t", appends=1)
    c = catalog(glue_env)
    ops = c.table_operations((glue_env.database,), "t")
    base = ops.refresh()
    first_attempt = glue_env.server.client()

    def first_attempt_landed(params: dict[str, Any], **_: Any) -> None:
        body = json.loads(params["body"])
        if t_params(glue_env)["metadata_location"] == base.location:
            first_attempt.update_table(**body)  # the same request, applied once already

    c.client.meta.events.register("before-call.glue.UpdateTable", first_attempt_landed)
    location, _ = ops.commit_change(base, property_change({"x": "1"}))
    assert t_params(glue_env)["metadata_location"] == location
    assert location in glue_env.server.list_objects(glue_env.table_prefix("t") + "/metadata")


def test_create_registers_and_refuses_a_taken_name(glue_env: GlueEnv) -> None:
    t = pyiceberg_table(glue_env, "t", appends=1)
    c = catalog(glue_env)
    ops = c.table_operations((glue_env.database,), "copy")
    assert isinstance(ops, GlueOperations)
    metadata = c.table_operations((glue_env.database,), "t").refresh().metadata
    location, _ = ops.create(metadata)
    assert t_params_of(glue_env, "copy")["metadata_location"] == location
    assert location.split("/")[-1].startswith("00000-")
    taken = c.table_operations((glue_env.database,), "t")
    before = glue_env.server.list_objects(glue_env.table_prefix("t"))
    with pytest.raises(RefusedError, match="already exists") as e:
        taken.create(metadata)
    assert e.value.exit_code == 6
    assert t_params(glue_env)["metadata_location"] == t.metadata_location
    assert glue_env.server.list_objects(glue_env.table_prefix("t")) == before  # our file was removed


def t_params_of(env: GlueEnv, name: str) -> dict[str, str]:
    return dict(glue_table(env.server, env.database, name)["Parameters"])


# ------------------------------------------------------------------ columns


def test_glue_types_as_pyiceberg_names_them() -> None:
    long_, string = PrimitiveType("long"), PrimitiveType("string")
    assert glue_type(long_) == "bigint"
    assert glue_type(PrimitiveType("timestamptz")) == "timestamp"
    assert glue_type(DecimalType(10, 2)) == "decimal(10,2)"
    assert glue_type(ListType(3, long_)) == "array<bigint>"
    assert glue_type(MapType(4, string, 5, long_)) == "map<string,bigint>"
    assert glue_type(StructType((NestedField(6, "a", long_),))) == "struct<a:bigint>"


def test_columns_match_pyiceberg(glue_env: GlueEnv) -> None:
    t = pyiceberg_table(glue_env, "t", appends=0)
    with t.update_schema() as u:
        u.delete_column("s")
    with t.update_schema() as u:
        u.add_column("d", pa_decimal())
    stored = glue_table(glue_env.server, glue_env.database, "t")["StorageDescriptor"]["Columns"]
    metadata = catalog(glue_env).table_operations((glue_env.database,), "t").refresh().metadata
    assert glue_columns(metadata) == stored


def pa_decimal() -> Any:
    from pyiceberg.types import DecimalType as PyDecimal

    return PyDecimal(9, 3)
