"""The Glue test server itself: what PyIceberg stores in moto's Glue, and what moto does not check.

These facts are what icectl's Glue catalog is written against; if moto changes, these fail first.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from support.glue import GlueEnv, glue_table

pytestmark = pytest.mark.e2e

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string())])


def test_pyiceberg_creates_and_appends_an_iceberg_glue_table(glue_env: GlueEnv) -> None:
    cat = glue_env.server.pyiceberg()
    t = cat.create_table(f"{glue_env.database}.t", schema=SCHEMA)
    first = t.metadata_location
    t.append(pa.table({"id": [1, 2], "s": ["a", "b"]}, schema=SCHEMA))
    g = glue_table(glue_env.server, glue_env.database, "t")
    params = g["Parameters"]
    assert params["table_type"] == "ICEBERG"
    assert params["metadata_location"] == t.metadata_location != first
    assert params["previous_metadata_location"] == first
    assert g["VersionId"] == "2"  # one per CreateTable/UpdateTable
    assert g["TableType"] == "EXTERNAL_TABLE"
    assert g["StorageDescriptor"]["Location"] == f"{glue_env.server.warehouse}/{glue_env.database}.db/t"
    assert [c["Name"] for c in g["StorageDescriptor"]["Columns"]] == ["id", "s"]
    assert g["StorageDescriptor"]["Columns"][0]["Parameters"]["iceberg.field.id"] == "1"
    assert cat.load_table(f"{glue_env.database}.t").scan().to_arrow().num_rows == 2


def test_moto_ignores_version_id_on_update_table(glue_env: GlueEnv) -> None:
    """Glue refuses an UpdateTable whose VersionId is not the table's; moto 5.2 accepts it.

    So the conflict path of icectl's Glue commits cannot be shown against moto: the tests check
    that the condition is sent instead. When this fails, moto enforces it: test the conflict.
    """
    client = glue_env.server.client()
    db = glue_env.database
    client.create_table(DatabaseName=db, TableInput={"Name": "v", "Parameters": {"table_type": "ICEBERG"}})
    client.update_table(DatabaseName=db, VersionId="999",
                        TableInput={"Name": "v", "Parameters": {"table_type": "ICEBERG", "k": "1"}})
    t = client.get_table(DatabaseName=db, Name="v")["Table"]
    assert t["Parameters"]["k"] == "1"
    assert t["VersionId"] == "2"


def test_glue_state_is_per_region(glue_env: GlueEnv) -> None:
    other = glue_env.server.client(region="eu-west-1")
    names = {d["Name"] for d in other.get_databases()["DatabaseList"]}
    assert glue_env.database not in names


def test_version_check_fixture_refuses_a_stale_version(glue_env: GlueEnv, glue_version_check: None) -> None:
    """The opt-in fixture makes moto refuse a stale VersionId, as Glue does."""
    from botocore.exceptions import ClientError

    client = glue_env.server.client()
    db = glue_env.database
    client.create_table(DatabaseName=db, TableInput={"Name": "v", "Parameters": {"table_type": "ICEBERG"}})
    client.update_table(DatabaseName=db, VersionId="1", TableInput={"Name": "v", "Parameters": {"k": "1"}})
    with pytest.raises(ClientError) as e:
        client.update_table(DatabaseName=db, VersionId="1", TableInput={"Name": "v", "Parameters": {"k": "2"}})
    assert e.value.response["Error"]["Code"] == "ConcurrentModificationException"
    assert client.get_table(DatabaseName=db, Name="v")["Table"]["Parameters"] == {"k": "1"}
