"""AWS Glue for tests: moto's server (the one :mod:`support.s3` starts) serves Glue and S3 at once.

* The session fixture ``glue_server`` is ``s3_server`` plus a bucket for Glue warehouses; it yields a
  :class:`GlueServer`. One moto server answers every AWS API on its port, so the Glue catalog and the
  table files live on the same ``http://127.0.0.1:<port>``.
* ``glue_env`` (per test) points the AWS SDK at it (``s3_env``), gives the test its own Glue database
  and writes an icectl config with ``[catalog.glue]`` and ``[s3]``; ``$ICECTL_CONFIG`` names it.
* :meth:`GlueServer.pyiceberg` is PyIceberg 0.12's ``GlueCatalog`` on the same server: the second
  client that writes tables, commits, and judges what icectl did.

Facts about moto 5.2 that the tests build on (checked against the server):

* ``UpdateTable`` ignores ``VersionId``: a stale or made-up version is accepted and the table's
  version still goes up by one. Glue's optimistic lock cannot be proven here; tests check that the
  request carries the condition (:func:`record_calls`), and the fresh ``GetTable`` check before it.
* Glue state is per region: a client on another region sees none of the databases.
* Any credentials are accepted, so a bad key cannot be tested; an endpoint where nothing listens can.
* PyIceberg's default (PyArrow) S3 writes fail against moto (``CompleteMultipartUpload`` answers an
  error inside a 200), so PyIceberg uses its fsspec FileIO here.

Use the fixtures by importing them into a test module::

    from support.glue import glue_env, glue_server  # noqa: F401
    from support.s3 import s3_env, s3_server  # noqa: F401
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .s3 import ACCESS_KEY, REGION, SECRET_KEY, create_bucket, s3_filesystem

BUCKET = "icectl-glue"  # the Glue tests' own bucket: listings before/after see only their files
_databases = itertools.count()


@dataclass(frozen=True)
class GlueServer:
    endpoint: str  # http://127.0.0.1:<port>, Glue and S3
    bucket: str = BUCKET
    region: str = REGION

    @property
    def warehouse(self) -> str:
        return f"s3://{self.bucket}/wh"

    def client(self, region: str | None = None) -> Any:
        """A boto3 Glue client on the server (dummy credentials, no retries)."""
        import boto3
        from botocore.config import Config

        return boto3.client("glue", endpoint_url=self.endpoint, region_name=region or self.region,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                            config=Config(retries={"max_attempts": 1}, connect_timeout=2))

    def pyiceberg(self, **properties: str) -> Any:
        """PyIceberg's GlueCatalog on the server, with the same warehouse as icectl's config."""
        from pyiceberg.catalog.glue import GlueCatalog

        props = {
            "glue.endpoint": self.endpoint, "glue.region": self.region,
            "glue.access-key-id": ACCESS_KEY, "glue.secret-access-key": SECRET_KEY,
            "s3.endpoint": self.endpoint, "s3.region": self.region,
            "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY,
            "warehouse": self.warehouse,
            "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",  # see the module docstring
            **properties,
        }
        return GlueCatalog("glue", **props)

    def list_objects(self, prefix: str) -> set[str]:
        """Every object under ``s3://bucket/<prefix>`` as full ``s3://`` URLs (not cached)."""
        fs = s3_filesystem(self.endpoint)
        root = f"{self.bucket}/{prefix.strip('/')}"
        if not fs.exists(root):
            return set()
        return {f"s3://{p}" for p in fs.find(root)}


def config_text(server: GlueServer, *, endpoint: str | None = None, region: str | None = None,
                warehouse: str | None = None, extra: str = "") -> str:
    """An icectl config: the ``glue`` catalog (default) on the server, and ``[s3]`` on the same port."""
    return (
        'default-catalog = "glue"\n[catalog.glue]\ntype = "glue"\n'
        f'endpoint = "{endpoint or server.endpoint}"\n'
        f'region = "{region or server.region}"\n'
        f'warehouse = "{warehouse or server.warehouse}"\n{extra}\n'
        f'[s3]\nendpoint = "{server.endpoint}"\nregion = "{server.region}"\n'
    )


@dataclass
class GlueEnv:
    server: GlueServer
    database: str  # this test's own Glue database (created)
    config: Path  # $ICECTL_CONFIG

    def write_config(self, **kwargs: Any) -> None:
        self.config.write_text(config_text(self.server, **kwargs))

    def table_prefix(self, table: str) -> str:
        """The bucket prefix of ``database.table`` at the default location (``wh/<db>.db/<t>``)."""
        return f"wh/{self.database}.db/{table}"


@pytest.fixture(scope="session")
def glue_server(s3_server: str) -> GlueServer:
    """moto's server (shared with the S3 tests) with the Glue warehouse bucket."""
    try:
        import boto3  # noqa: F401
        import pyiceberg.catalog.glue  # noqa: F401
    except ImportError as e:  # pragma: no cover - CI installs both
        pytest.skip(f"Glue tests need boto3 and pyiceberg: {e}")
    create_bucket(s3_server, BUCKET)
    return GlueServer(s3_server)


@pytest.fixture
def glue_env(glue_server: GlueServer, s3_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GlueEnv:
    """A fresh Glue database and an icectl config naming the server; ``$ICECTL_CONFIG`` points at it."""
    database = f"db{next(_databases)}_{tmp_path.name.lower().replace('-', '_')[:40]}"
    glue_server.client().create_database(DatabaseInput={"Name": database})
    env = GlueEnv(glue_server, database, tmp_path / "icectl.toml")
    env.write_config()
    monkeypatch.setenv("ICECTL_CONFIG", str(env.config))
    return env


@pytest.fixture
def glue_catalog_config(glue_server: GlueServer, glue_version_check: None) -> dict[str, Any]:
    """For the catalog contract (tests/unit/catalog/test_catalog_contract.py): catalog ``c`` on moto's
    Glue with static keys in the config (no environment needed), a warehouse of its own, ``[s3]``.
    The contract races two writers, so moto checks ``VersionId`` as Glue does (plain moto lets a
    stale update through, and one of the two commits would be lost to moto, not to icectl)."""
    return {
        "catalog": {"c": {"type": "glue", "endpoint": glue_server.endpoint, "region": glue_server.region,
                          "access-key-id": ACCESS_KEY, "secret-access-key": SECRET_KEY,
                          "warehouse": f"{glue_server.warehouse}/contract-{next(_databases)}"}},
        "s3": {"endpoint": glue_server.endpoint, "region": glue_server.region,
               "access-key-id": ACCESS_KEY, "secret-access-key": SECRET_KEY},
    }


_update_lock = threading.Lock()


@pytest.fixture
def glue_version_check(glue_server: GlueServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """For one test, moto's UpdateTable does what Glue does with ``VersionId``: refuses it with
    ``ConcurrentModificationException`` unless it names the table's current version.

    Without it moto lets a writer with a stale version overwrite another's commit (the module
    docstring), and a test with two writers could only show that moto loses updates. The check
    and the update run under one lock: moto's threaded server answers requests concurrently.
    """
    from moto.glue.exceptions import GlueClientError
    from moto.glue.responses import GlueResponse

    original = GlueResponse.update_table

    def update_table(self: Any) -> Any:
        version = self.parameters.get("VersionId")
        with _update_lock:
            if version is not None:
                table = self.glue_backend.get_table(self.parameters.get("DatabaseName"),
                                                    (self.parameters.get("TableInput") or {}).get("Name"))
                current = table.as_dict()["VersionId"]
                if str(version) != current:
                    raise GlueClientError("ConcurrentModificationException",
                                          f"Table version {version} is not the current version {current}")
            return original(self)

    monkeypatch.setattr(GlueResponse, "update_table", update_table)


@pytest.fixture
def glue_refuses_credentials(glue_server: GlueServer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """For one test, moto's Glue answers every table and database call as AWS does for a key it does
    not know (``UnrecognizedClientException``, HTTP 400); moto itself accepts any key. Returns the
    operations refused, so a test can tell the refusal came from the server."""
    from moto.core.exceptions import JsonRESTError
    from moto.glue.responses import GlueResponse

    refused: list[str] = []

    def refuse(name: str) -> Callable[[Any], Any]:
        def handler(self: Any) -> Any:
            refused.append(name)
            raise JsonRESTError("UnrecognizedClientException", "The security token included in the request "
                                "is invalid.")
        return handler

    for name in ("get_table", "get_tables", "get_database", "get_databases", "update_table", "create_table",
                 "create_database"):
        monkeypatch.setattr(GlueResponse, name, refuse(name))
    return refused


def record_calls(client: Any, operation: str) -> list[dict[str, Any]]:
    """The parameters of every ``operation`` call ``client`` makes from now on, as sent.

    A botocore ``before-call`` hook: it sees the request after validation, just before it goes
    on the wire, so what it records is what the server received.
    """
    calls: list[dict[str, Any]] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        calls.append(json.loads(params.get("body") or b"{}"))  # Glue speaks JSON: the body as sent

    client.meta.events.register(f"before-call.glue.{operation}", hook)
    return calls


def glue_table(server: GlueServer, database: str, table: str) -> dict[str, Any]:
    """GetTable's ``Table`` (Parameters, VersionId, StorageDescriptor, ...)."""
    return server.client().get_table(DatabaseName=database, Name=table)["Table"]

