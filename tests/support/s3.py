"""Object storage for tests: moto's S3 server on 127.0.0.1, and Spark tables copied onto it.

* :func:`start_moto_server` / the session fixture ``s3_server`` run moto's server mode (the same
  S3 emulation s3fs tests itself with) in a thread of this process, on a free loopback port.
  Nothing listens on another address and nothing leaves the machine.
* ``s3_env`` points the AWS SDK (and so icectl's ``FileIO``) at it with dummy credentials.
* :func:`relocate_table` copies a Spark-written local table to ``s3://...``: Iceberg metadata holds
  absolute paths, so metadata JSON, manifest lists and manifests are rewritten; data and Puffin
  files are copied byte for byte so their sizes and deletion-vector offsets stay valid.

The fixtures are registered for every test by ``pytest_plugins`` in tests/conftest.py (as those of
support.glue, support.seaweedfs and support.postgres are): name them as arguments, never import
them (an imported session fixture is a second fixture, and starts a second server).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

# relocate_table lived here first: S3 tests import it (and FsPut) from this module.
from .relocate import FsPut, relocate_table  # noqa: F401

HOST = "127.0.0.1"  # loopback only: tests never talk to anything else
ACCESS_KEY = "icectl-test-key"  # moto accepts any credentials; these only have to exist
SECRET_KEY = "icectl-test-secret"
REGION = "us-east-1"  # the one region where CreateBucket needs no LocationConstraint



# --------------------------------------------------------------------------- the server


def start_moto_server() -> tuple[Any, str]:
    """Start moto's threaded S3 server on a free 127.0.0.1 port: ``(server, endpoint URL)``."""
    from moto.server import ThreadedMotoServer  # lazy: moto is only needed by S3 tests

    # Werkzeug logs every request to stderr at INFO; typer's CliRunner swaps sys.stderr while a
    # command runs, so those lines would land in the command's stderr that the tests check.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)  # port 0: the OS picks
    server.start()
    host, port = server.get_host_and_port()
    assert host == HOST, host
    return server, f"http://{HOST}:{port}"


def closed_endpoint() -> str:
    """An ``http://127.0.0.1:<port>`` URL where nothing listens (the port was free a moment ago)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    return f"http://{HOST}:{port}"


class CountingCloser:
    """An ``http://127.0.0.1:<port>`` endpoint that accepts each connection and closes it at once,
    counting them: a storage that is there but never answers. ``attempts`` tells how often a client
    tried, which bounds its retries without timing it."""

    def __init__(self) -> None:
        import socketserver
        import threading

        counter = self
        self.attempts = 0

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                counter.attempts += 1  # one handler at a time per connection; += under the GIL suffices here

        self._server = socketserver.ThreadingTCPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://{HOST}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _check_loopback(endpoint: str) -> None:
    host = urlparse(endpoint).hostname
    if host not in {HOST, "localhost"}:
        raise ValueError(f"test S3 endpoint must be on {HOST}, not {endpoint}")


def s3_filesystem(endpoint: str) -> Any:
    """A private s3fs filesystem on ``endpoint`` with the dummy credentials.

    Not fsspec's shared instance (``skip_instance_cache``) and no listings cache: the tests write
    objects with it while icectl's own filesystem reads them, and neither may see stale listings.
    """
    _check_loopback(endpoint)
    import s3fs

    return s3fs.S3FileSystem(
        key=ACCESS_KEY, secret=SECRET_KEY, skip_instance_cache=True, use_listings_cache=False,
        client_kwargs={"endpoint_url": endpoint, "region_name": REGION},
        config_kwargs={"connect_timeout": 2, "retries": {"max_attempts": 1}},
    )


def create_bucket(endpoint: str, bucket: str) -> None:
    """Create ``bucket`` on the server (no error when it already exists)."""
    _check_loopback(endpoint)
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                          aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass


def s3_put(fs: Any) -> FsPut:
    """An ``fs_put`` for :func:`relocate_table` that writes through the s3fs filesystem ``fs``."""

    def put(url: str, data: bytes) -> None:
        fs.pipe_file(url.split("://", 1)[1], data)

    return put


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """moto's S3 server for the whole session; yields its endpoint URL (``http://127.0.0.1:<port>``)."""
    t0 = time.perf_counter()
    server, endpoint = start_moto_server()
    print(f"[s3] moto server on {endpoint}: {time.perf_counter() - t0:.2f}s", flush=True)
    try:
        yield endpoint
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Point the AWS SDK at ``s3_server`` for one test; returns the endpoint URL.

    Also shuts out everything on the machine that could redirect or slow down the SDK (profiles,
    config files, the EC2 metadata service, proxies) and any icectl config file: with an empty
    ``$ICECTL_CONFIG`` icectl takes the endpoint from ``AWS_ENDPOINT_URL`` alone.
    """
    missing = str(tmp_path_factory.getbasetemp() / "no-such-aws-file")
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "ICECTL_WAREHOUSE", "ICECTL_DEBUG", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                 "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    empty_config = tmp_path_factory.getbasetemp() / "icectl-empty-config.toml"
    empty_config.touch()
    env = {
        "AWS_ENDPOINT_URL": s3_server,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": missing,
        "AWS_SHARED_CREDENTIALS_FILE": missing,
        "AWS_EC2_METADATA_DISABLED": "true",
        "NO_PROXY": f"{HOST},localhost",
        "no_proxy": f"{HOST},localhost",
        "ICECTL_CONFIG": str(empty_config),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return s3_server
