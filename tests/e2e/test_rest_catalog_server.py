"""The SeaweedFS REST catalog the other REST tests rely on: what it answers, checked against it.

If SeaweedFS changes one of these answers, this file says which, before the icectl tests fail
in a less obvious way (the facts are summed up in ``support.seaweedfs.SERVER_FACTS``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
import requests
from support.seaweedfs import SeaweedFS, fresh_namespace


def _token(server: SeaweedFS, secret: str = "S") -> requests.Response:
    return requests.post(f"{server.rest_uri}/v1/oauth/tokens", timeout=5,
                         data={"grant_type": "client_credentials", "client_id": "K",
                               "client_secret": secret, "scope": "catalog"})


def _session(server: SeaweedFS) -> requests.Session:
    s = requests.Session()
    s.headers["Authorization"] = f"Bearer {_token(server).json()['access_token']}"
    return s


@pytest.fixture
def pyiceberg_table(seaweedfs: SeaweedFS) -> tuple[Any, str]:
    cat = seaweedfs.pyiceberg_catalog()
    ns = fresh_namespace("facts")
    cat.create_namespace(ns)
    table = cat.create_table(f"{ns}.t", schema=pa.schema([("id", pa.int64())]))
    for i in range(3):
        table.append(pa.table({"id": [i]}))
    return cat.load_table(f"{ns}.t"), ns


def test_pyiceberg_writes_and_reads_through_the_catalog(pyiceberg_table: tuple[Any, str]) -> None:
    table, _ = pyiceberg_table
    assert len(table.snapshots()) == 3
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [0, 1, 2]
    assert table.metadata_location.endswith("/metadata/v4.metadata.json")


def test_config_and_oauth(seaweedfs: SeaweedFS) -> None:
    cfg = requests.get(f"{seaweedfs.rest_uri}/v1/config", params={"warehouse": seaweedfs.warehouse},
                       timeout=5).json()
    assert cfg["overrides"] == {"prefix": "warehouse"}
    ok = _token(seaweedfs).json()
    assert ok["token_type"].lower() == "bearer" and ok["expires_in"] > 0
    bad = _token(seaweedfs, secret="wrong")
    assert bad.status_code == 401 and bad.json()["error"] == "invalid_client"


def test_error_answers(seaweedfs: SeaweedFS, pyiceberg_table: tuple[Any, str]) -> None:
    _, ns = pyiceberg_table
    base = f"{seaweedfs.rest_uri}/v1/warehouse/namespaces"
    assert requests.get(f"{base}/{ns}/tables/t", timeout=5).status_code == 403  # no token
    assert requests.get(f"{base}/{ns}/tables/t", timeout=5,
                        headers={"Authorization": "Bearer junk"}).status_code == 401
    s = _session(seaweedfs)
    missing = s.get(f"{base}/{ns}/tables/nope", timeout=5)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchTableException"
    loaded = s.get(f"{base}/{ns}/tables/t", timeout=5).json()
    # No vended keys without -s3.iceberg.credentialRole: only where and how to reach S3.
    assert set(loaded["config"]) == {"s3.endpoint", "s3.region", "s3.path-style-access"}
    ident = {"namespace": [ns], "name": "t"}
    stale = s.post(f"{base}/{ns}/tables/t", timeout=5, json={
        "identifier": ident,
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main",
                          "snapshot-id": loaded["metadata"]["snapshots"][0]["snapshot-id"]}],
        "updates": [{"action": "set-properties", "updates": {"x": "1"}}]})
    assert stale.status_code == 409 and stale.json()["error"]["type"] == "CommitFailedException"
    v4 = s.post(f"{base}/{ns}/tables/t", timeout=5, json={
        "identifier": ident, "requirements": [],
        "updates": [{"action": "upgrade-format-version", "format-version": 4}]})
    assert v4.status_code == 400
    after = s.get(f"{base}/{ns}/tables/t", timeout=5).json()
    assert after["metadata-location"] == loaded["metadata-location"]  # neither answer committed


def test_create_of_an_existing_table_answers_with_it(seaweedfs: SeaweedFS,
                                                     pyiceberg_table: tuple[Any, str]) -> None:
    """Not the spec's 409: why icectl's create looks before it posts."""
    table, ns = pyiceberg_table
    s = _session(seaweedfs)
    again = s.post(f"{seaweedfs.rest_uri}/v1/warehouse/namespaces/{ns}/tables", timeout=5, json={
        "name": "t", "schema": {"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "other", "required": False, "type": "string"}]}})
    assert again.status_code == 200
    assert again.json()["metadata-location"] == table.metadata_location


def test_v3_tables(seaweedfs: SeaweedFS) -> None:
    cat = seaweedfs.pyiceberg_catalog()
    ns = fresh_namespace("v3")
    cat.create_namespace(ns)
    table = cat.create_table(f"{ns}.t", schema=pa.schema([("id", pa.int64())]),
                             properties={"format-version": "3"})
    # The server makes v3 tables; PyIceberg 0.12 reads them but cannot write v3 manifests.
    table = cat.load_table(f"{ns}.t")
    assert table.format_version == 3 and table.scan().to_arrow().num_rows == 0
