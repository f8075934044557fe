"""REST catalog answers SeaweedFS cannot be made to give: a tiny local HTTP stub on 127.0.0.1.

Only for what the real server (tests/unit/catalog/test_rest.py) cannot produce on demand: a token
that expires within the test, a 5xx, a hang or a dropped connection during a commit, a 200 that is
not JSON. Everything else is tested against SeaweedFS.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from icectl.catalog.operations import CommitFailedError, CommitStateUnknownError, Current
from icectl.catalog.rest import RestCatalog
from icectl.config import CatalogConfig
from icectl.errors import NotFoundError, RefusedError, StorageError
from icectl.spec.updates import SetProperties, TableChange, UpgradeFormatVersion
from icectl.storage import FileIO

METADATA = {
    "format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1", "location": "s3://b/db/t",
    "last-sequence-number": 0, "last-updated-ms": 1, "last-column-id": 1, "current-schema-id": 0,
    "schemas": [{"type": "struct", "schema-id": 0,
                 "fields": [{"id": 1, "name": "id", "required": False, "type": "long"}]}],
    "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
    "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], "properties": {},
}
TABLE_PATH = "/v1/p/namespaces/db/tables/t"

Reply = tuple[int, Any]  # (status, JSON body, or bytes sent as they are)


class Stub:
    """Routes ``(method, path)`` to a reply function and records every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.tokens_issued = 0
        self.expires_in = 3600
        self.routes: dict[tuple[str, str], Callable[[], Reply | None]] = {
            ("GET", "/v1/config"): lambda: (200, {"defaults": {"x": "d"}, "overrides": {"prefix": "p"}}),
            ("POST", "/v1/oauth/tokens"): self._token,
            ("GET", TABLE_PATH): lambda: (200, {"metadata-location": "s3://b/db/t/metadata/00001-a.metadata.json",
                                                "metadata": METADATA,
                                                "config": {"s3.access-key-id": "vended",
                                                           "s3.secret-access-key": "vsecret",
                                                           "s3.session-token": "vtoken"}}),
        }

    def _token(self) -> Reply:
        self.tokens_issued += 1
        return 200, {"access_token": f"tok-{self.tokens_issued}", "token_type": "bearer",
                     "expires_in": self.expires_in}

    def auth_of(self, method: str, path: str) -> list[str]:
        return [h.get("Authorization", "") for m, p, h, _ in self.requests if m == method and p == path]


@pytest.fixture
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            state.requests.append((self.command, path, dict(self.headers), body))
            route = state.routes.get((self.command, path))
            reply = route() if route else (404, {"error": {"message": f"no {path}", "type": "NoSuchTableException",
                                                           "code": 404}})
            if reply is None:  # drop the connection without an answer
                self.close_connection = True
                self.connection.close()
                return
            status, payload = reply
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def open_stub(uri: str, **props: Any) -> RestCatalog:
    cc = CatalogConfig(name="r", type="rest", warehouse="s3://b/", uri=uri,
                       properties={"credential": "id:secret", **props})
    return RestCatalog.from_config(cc, FileIO())


def loaded(cat: RestCatalog) -> tuple[Any, Current]:
    ops = cat.table_operations(("db",), "t")
    return ops, ops.refresh()


def test_config_prefix_headers_and_vended_credentials(stub: tuple[Stub, str]) -> None:
    state, uri = stub
    cat = open_stub(uri, **{"header.X-Tenant": "acme", "header": {"X-Team": "data"}})
    assert cat.prefix == "p" and cat.properties["x"] == "d"
    ops, cur = loaded(cat)
    assert cur.metadata.table_uuid == METADATA["table-uuid"] and cur.version == 1
    assert (ops.io.s3.access_key_id, ops.io.s3.secret_access_key, ops.io.s3.session_token) == \
        ("vended", "vsecret", "vtoken")
    assert cat.io.s3.access_key_id is None  # the catalog-wide FileIO keeps its own settings
    method, _, headers, body = state.requests[0]  # the token, before GET /v1/config
    assert method == "POST" and b"client_id=id" in body and b"client_secret=secret" in body \
        and b"scope=catalog" in body
    _, _, headers, _ = state.requests[-1]
    assert headers["X-Tenant"] == "acme" and headers["X-Team"] == "data"
    assert headers["Authorization"] == "Bearer tok-1"
    assert headers["X-Iceberg-Access-Delegation"] == "vended-credentials"


def test_token_is_fetched_again_before_it_expires(stub: tuple[Stub, str]) -> None:
    state, uri = stub
    state.expires_in = 1  # refreshed after 90% of its life
    cat = open_stub(uri)
    loaded(cat)
    time.sleep(1.0)
    loaded(cat)
    assert state.auth_of("GET", TABLE_PATH) == ["Bearer tok-1", "Bearer tok-2"]


def test_a_rejected_token_is_replaced_once(stub: tuple[Stub, str]) -> None:
    state, uri = stub
    cat = open_stub(uri)
    first = state.routes[("GET", TABLE_PATH)]
    calls = []

    def revoke_first() -> Reply | None:
        calls.append(1)
        return (401, {"error": {"message": "expired", "type": "NotAuthorizedException", "code": 401}}) \
            if len(calls) == 1 else first()

    state.routes[("GET", TABLE_PATH)] = revoke_first
    loaded(cat)
    assert state.auth_of("GET", TABLE_PATH) == ["Bearer tok-1", "Bearer tok-2"]


def test_static_token_and_no_token_fetch(stub: tuple[Stub, str]) -> None:
    state, uri = stub
    cc = CatalogConfig(name="r", type="rest", warehouse="s3://b/", uri=uri, properties={"token": "static-1"})
    loaded(RestCatalog.from_config(cc, FileIO()))
    assert state.tokens_issued == 0 and state.auth_of("GET", TABLE_PATH) == ["Bearer static-1"]


def test_oauth2_server_uri_and_scope(stub: tuple[Stub, str]) -> None:
    state, uri = stub
    state.routes[("POST", "/elsewhere/token")] = state._token
    open_stub(uri, **{"oauth2-server-uri": f"{uri}/elsewhere/token", "scope": "PRINCIPAL_ROLE:ALL"})
    posted = [(p, b) for m, p, _, b in state.requests if m == "POST"]
    assert posted[0][0] == "/elsewhere/token" and b"scope=PRINCIPAL_ROLE%3AALL" in posted[0][1]


def _commit(cat: RestCatalog) -> Any:
    ops, cur = loaded(cat)
    return ops.commit_change(cur, TableChange(updates=(SetProperties({"k": "v"}),)))


@pytest.mark.parametrize("reply", [
    (500, {"error": {"message": "boom", "type": "InternalServerError", "code": 500}}),
    (503, b"<html>unavailable</html>"),
    (200, b"not json"),
    (200, {"metadata-location": "s3://b/x"}),  # no metadata
    None,  # connection dropped
], ids=["500", "503-html", "200-garbage", "200-no-metadata", "dropped"])
def test_commit_state_unknown(stub: tuple[Stub, str], reply: Reply | None) -> None:
    state, uri = stub
    state.routes[("POST", TABLE_PATH)] = lambda: reply
    with pytest.raises(CommitStateUnknownError) as info:
        _commit(open_stub(uri))
    line = info.value.one_line()
    assert "may or may not have happened" in line and "nothing was cleaned up" in line and "\n" not in line
    assert info.value.exit_code == 5


def test_commit_that_hangs_is_unknown(stub: tuple[Stub, str]) -> None:
    state, uri = stub

    answered = threading.Event()

    def hang() -> Reply:
        # No answer until the client has given up: only its timeout can end the wait, however slow
        # the machine (the cap only frees the server thread if the client never gives up).
        answered.wait(timeout=120)
        return 200, {}

    state.routes[("POST", TABLE_PATH)] = hang
    try:
        with pytest.raises(CommitStateUnknownError, match="did not answer"):
            _commit(open_stub(uri, timeout="0.5"))
    finally:
        answered.set()


def test_commit_conflict_and_rejection(stub: tuple[Stub, str]) -> None:
    state, uri = stub
    state.routes[("POST", TABLE_PATH)] = lambda: (409, {"error": {
        "message": "branch main has changed", "type": "CommitFailedException", "code": 409}})
    with pytest.raises(CommitFailedError, match="branch main has changed"):
        _commit(open_stub(uri))
    state.routes[("POST", TABLE_PATH)] = lambda: (400, {"error": {
        "message": "unknown update", "type": "BadRequestException", "code": 400}})
    with pytest.raises(RefusedError, match="nothing was committed"):
        _commit(open_stub(uri))


def test_v4_is_refused_before_anything_is_sent(stub: tuple[Stub, str]) -> None:
    state, uri = stub
    ops, cur = loaded(open_stub(uri))
    with pytest.raises(RefusedError, match="format version 4") as info:
        ops.commit_change(cur, TableChange(updates=(UpgradeFormatVersion(4),)))
    assert info.value.exit_code == 6
    v4 = Current(cur.location, cur.metadata.replace(format_version=4), cur.version)
    with pytest.raises(RefusedError):
        ops.commit_change(v4, TableChange(updates=(SetProperties({"k": "v"}),)))
    assert not [r for r in state.requests if r[0] == "POST" and r[1] == TABLE_PATH]


def test_errors_on_load(stub: tuple[Stub, str]) -> None:
    state, uri = stub
    cat = open_stub(uri)
    with pytest.raises(NotFoundError, match=r"db\.nope not found"):
        cat.table_operations(("db",), "nope").refresh()
    state.routes[("GET", TABLE_PATH)] = lambda: (403, {"error": {"message": "Access Denied.",
                                                               "type": "ForbiddenException", "code": 403}})
    with pytest.raises(StorageError, match="credentials rejected by REST catalog") as info:
        loaded(cat)
    assert info.value.exit_code == 8
    state.routes[("GET", TABLE_PATH)] = lambda: (502, b"bad gateway")
    with pytest.raises(StorageError, match="HTTP 502"):
        loaded(cat)


def test_storage_credentials_by_longest_prefix(stub: tuple[Stub, str]) -> None:
    state, uri = stub
    load = state.routes[("GET", TABLE_PATH)]()
    assert load is not None
    body = {**load[1], "config": {"s3.endpoint": "http://127.0.0.1:1", "s3.path-style-access": "true"},
            "storage-credentials": [
                {"prefix": "s3://b/", "config": {"s3.access-key-id": "wide", "s3.secret-access-key": "w",
                                                 "s3.session-token": "wide-token"}},
                {"prefix": "s3://b/db/t", "config": {"s3.access-key-id": "table", "s3.secret-access-key": "t"}},
                {"prefix": "s3://other/", "config": {"s3.access-key-id": "other", "s3.secret-access-key": "o"}}]}
    state.routes[("GET", TABLE_PATH)] = lambda: (200, body)
    ops, _ = loaded(open_stub(uri))
    s3 = ops.io.s3
    assert (s3.access_key_id, s3.secret_access_key, s3.session_token, s3.endpoint, s3.path_style) == \
        ("table", "t", None, "http://127.0.0.1:1", True)  # the wide entry's token is not paired with it
    assert s3.fsspec_options()["config_kwargs"]["s3"] == {"addressing_style": "path"}
