"""HTTP for the Iceberg REST catalog: one ``requests`` session, authentication, and error mapping.

Authentication, in PyIceberg's and Java's order: a static bearer ``token``; else OAuth2 client
credentials (``credential = "id:secret"``) exchanged at ``oauth2-server-uri`` (the spec's default
``{uri}/v1/oauth/tokens``) for a token that is fetched again shortly before it expires and once more
after a 401 (the server may drop tokens early). ``header.<Name>`` keys add headers to every request.

Every failure becomes one of icectl's errors with the catalog's URI in it (exit codes: 401/403 ->
8, 404 -> 3, connection refused or timeout -> 8). Commits need more care, since a commit request
that reached the server may have been applied: :meth:`RestClient.send` reports whether a failure
happened before anything was sent (:class:`NotSentError`) so the caller can tell a sure failure
from an unknown commit state.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from icectl import __version__
from icectl.errors import IcectlError, NotFoundError, StorageError

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0
REFRESH_MARGIN_S = 60.0  # fetch a new token this long before the old one expires (or at 90% of its life)
NAMESPACE_SEPARATOR = "\x1f"  # the REST spec's multipart namespace separator (%1F in URLs)


class NotSentError(StorageError):
    """The request never reached the server (connection refused, connect timeout): nothing happened."""


class ResponseError(IcectlError):
    """The server answered with an HTTP error that the caller maps itself (4xx other than 401/403/404)."""

    def __init__(self, message: str, *, status: int, detail: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.detail = detail  # the server's "<type>: <message>"


class UnknownOutcomeError(StorageError):
    """The request may have been applied: 5xx, a read timeout, a reset connection, an unreadable body."""


def encode_namespace(namespace: tuple[str, ...]) -> str:
    return quote(NAMESPACE_SEPARATOR.join(namespace), safe="")


def encode_name(name: str) -> str:
    return quote(name, safe="")


def error_detail(body: Any, text: str) -> tuple[str, str]:
    """``(type, message)`` from an ``ErrorModel`` or OAuth error body; the raw text otherwise."""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return str(err.get("type") or ""), str(err.get("message") or "")
        if isinstance(err, str):  # OAuth2 token endpoint: {"error": "invalid_client", "error_description": ...}
            return err, str(body.get("error_description") or "")
    if body is None and text.lstrip().startswith("<"):
        return "", "an HTML/XML answer, not a REST catalog's JSON (is uri the catalog's base URL?)"
    return "", " ".join(text.split())[:200]


@dataclass
class _Token:
    value: str
    refresh_at: float | None  # time.monotonic() after which it is fetched again; None: never expires


class RestClient:
    """One catalog's HTTP session: base URI, headers, bearer token."""

    def __init__(self, uri: str, properties: Mapping[str, Any], *, where: str) -> None:
        import requests  # lazy: only REST catalogs need it

        self.uri = uri.rstrip("/")
        self.where = where  # "[catalog.NAME] in <config file>", for hints
        self.properties = dict(properties)
        self.session = requests.Session()
        self.session.trust_env = True
        self.session.headers.update({
            "User-Agent": f"icectl/{__version__}",
            "X-Client-Version": f"icectl/{__version__}",
            "Content-Type": "application/json",
        })
        for key, value in self.properties.items():
            if key.startswith("header."):
                self.session.headers[key[len("header."):]] = str(value)
        nested = self.properties.get("header")  # TOML: [catalog.NAME.header] or header = {X-Name = "v"}
        if isinstance(nested, dict):
            self.session.headers.update({str(k): str(v) for k, v in nested.items()})
        timeout = self.properties.get("timeout")
        self.timeout = (CONNECT_TIMEOUT_S, float(timeout) if timeout else READ_TIMEOUT_S)
        self._token: _Token | None = None
        self._lock = threading.Lock()  # one token fetch at a time (commands may use threads)
        static = self.properties.get("token")
        if static:
            self._token = _Token(str(static), None)

    # ------------------------------------------------------------------------------- auth

    @property
    def token_endpoint(self) -> str:
        explicit = self.properties.get("oauth2-server-uri")
        return str(explicit) if explicit else f"{self.uri}/v1/oauth/tokens"

    def _fetch_token(self) -> _Token:
        import requests

        credential = str(self.properties["credential"])
        client_id, _, secret = credential.rpartition(":")
        data = {"grant_type": "client_credentials", "client_secret": secret,
                "scope": str(self.properties.get("scope") or "catalog")}
        if client_id:
            data["client_id"] = client_id
        for extra in ("audience", "resource"):
            if self.properties.get(extra):
                data[extra] = str(self.properties[extra])
        endpoint = self.token_endpoint
        try:
            resp = self.session.post(endpoint, data=data, timeout=self.timeout,
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        except requests.RequestException as e:
            raise self._transport_error(e, "POST", endpoint) from e
        body = _json_or_none(resp)
        if resp.status_code in (400, 401, 403):
            kind, msg = error_detail(body, resp.text)
            raise StorageError(f"credentials rejected by REST catalog {self.uri}: {kind or resp.status_code}"
                               f"{': ' + msg if msg else ''} (token endpoint {endpoint})",
                               hint=f"check credential in {self.where}")
        if resp.status_code != 200 or not isinstance(body, dict) or not body.get("access_token"):
            kind, msg = error_detail(body, resp.text)
            raise StorageError(f"REST catalog {self.uri} gave no token (HTTP {resp.status_code} from {endpoint}"
                               f"{': ' + msg if msg else ''})", hint=f"check oauth2-server-uri in {self.where}")
        expires = body.get("expires_in")
        refresh_at = None
        if isinstance(expires, (int, float)) and expires > 0:
            refresh_at = time.monotonic() + expires - min(REFRESH_MARGIN_S, expires * 0.1)
        return _Token(str(body["access_token"]), refresh_at)

    def _auth_header(self, *, force_new: bool = False) -> dict[str, str]:
        if "credential" not in self.properties or not self.properties.get("credential"):
            return {"Authorization": f"Bearer {self._token.value}"} if self._token else {}
        with self._lock:
            tok = self._token
            if force_new or tok is None or (tok.refresh_at is not None and time.monotonic() >= tok.refresh_at):
                self._token = tok = self._fetch_token()
        return {"Authorization": f"Bearer {tok.value}"}

    @property
    def can_refresh_token(self) -> bool:
        return bool(self.properties.get("credential"))

    # ------------------------------------------------------------------------------- requests

    def url(self, *parts: str) -> str:
        return "/".join([self.uri, "v1", *(p for p in parts if p)])

    def send(self, method: str, url: str, *, json: Any = None, params: Mapping[str, str] | None = None,
             headers: Mapping[str, str] | None = None, auth: bool = True) -> Any:
        """The parsed JSON answer of a 2xx response (None for 204).

        Raises StorageError (401/403, unreachable), NotFoundError (404), ResponseError (other 4xx),
        NotSentError (nothing reached the server) or UnknownOutcomeError (5xx, read timeout, reset,
        unreadable body: the server may have acted on it).
        """
        import requests

        for attempt in (0, 1):
            hdrs = dict(headers or {})
            if auth:
                hdrs.update(self._auth_header(force_new=attempt == 1))
            try:
                resp = self.session.request(method, url, json=json, params=params, headers=hdrs,
                                            timeout=self.timeout)
            except requests.RequestException as e:
                raise self._transport_error(e, method, url) from e
            if resp.status_code == 401 and attempt == 0 and auth and self.can_refresh_token:
                continue  # the token may have been revoked or expired early: one fresh token, once
            return self._answer(resp, method, url)
        raise AssertionError("unreachable")

    def _answer(self, resp: Any, method: str, url: str) -> Any:
        status = resp.status_code
        if status == 204:
            return None
        body = _json_or_none(resp)
        if 200 <= status < 300:
            if body is None:
                raise UnknownOutcomeError(f"REST catalog {self.uri} sent an unreadable answer to {method} {url} "
                                          f"(HTTP {status}, not JSON)")
            return body
        kind, msg = error_detail(body, resp.text)
        detail = f"{kind}: {msg}" if kind and msg else (kind or msg or f"HTTP {status}")
        if status in (401, 403):
            raise StorageError(f"credentials rejected by REST catalog {self.uri}: {detail}",
                               hint=f"check credential or token in {self.where}")
        if status == 404:
            raise NotFoundError(f"{detail} (REST catalog {self.uri})")
        if status >= 500:
            raise UnknownOutcomeError(f"REST catalog {self.uri} failed on {method} {url}: HTTP {status} {detail}")
        raise ResponseError(f"REST catalog {self.uri} answered HTTP {status} to {method} {url}: {detail}",
                            status=status, detail=detail)

    def _transport_error(self, e: Exception, method: str, url: str) -> StorageError:
        import requests

        # ConnectTimeout subclasses both ConnectionError and Timeout: test it first.
        if isinstance(e, requests.ConnectTimeout) or _refused(e):
            return NotSentError(f"cannot reach REST catalog {self.uri}: {_short(e)}",
                                hint=f"check uri in {self.where} and that the server is running")
        if isinstance(e, requests.Timeout):
            return UnknownOutcomeError(f"REST catalog {self.uri} did not answer {method} {url} within "
                                       f"{self.timeout[1]:g}s")
        return UnknownOutcomeError(f"connection to REST catalog {self.uri} failed during {method} {url}: "
                                   f"{_short(e)}")


def _json_or_none(resp: Any) -> Any:
    try:
        return resp.json()
    except ValueError:
        return None


def _refused(e: Exception) -> bool:
    """True when the connection was never established (so the server saw nothing)."""
    import urllib3

    seen: set[int] = set()
    stack: list[Any] = [e]
    while stack:
        cur = stack.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, (ConnectionRefusedError, urllib3.exceptions.NewConnectionError,
                            urllib3.exceptions.NameResolutionError)):
            return True
        if isinstance(cur, urllib3.exceptions.MaxRetryError):
            stack.append(cur.reason)
        stack.extend(a for a in getattr(cur, "args", ()) if isinstance(a, BaseException))
        stack.extend((cur.__cause__, cur.__context__))
    return False


def _short(e: Exception) -> str:
    text = " ".join(str(e).split())
    for marker in ("Connection refused", "Name or service not known", "Connection reset by peer",
                   "Remote end closed connection without response", "timed out"):
        if marker in text:
            return marker.lower()
    return text[:160]
