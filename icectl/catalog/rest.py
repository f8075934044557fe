"""Iceberg REST catalog (``type = "rest"``): tables whose commits the server applies.

Config keys are PyIceberg's: ``uri``, ``warehouse``, ``prefix``, ``credential``, ``token``,
``scope``, ``oauth2-server-uri``, ``header.<Name>``; also ``timeout`` (seconds) and Java's
``rest-page-size`` (HTTP details in :mod:`.rest_http`). At open the client asks
``GET /v1/config?warehouse=...``: the server's ``defaults`` apply under the config file's keys and
its ``overrides`` over them (SeaweedFS, Polaris and S3 Tables give ``prefix`` this way).

Unlike file-system and metastore catalogs, a commit is not a file written by icectl: the change is
sent as requirements and updates (``POST .../tables/{t}``), the server checks the requirements
against its current metadata, writes the new metadata file and answers with it. 409 is a lost race
(the commit loop reloads and retries); a 5xx, a timeout or an unreadable answer leaves the outcome
unknown, and then nothing is cleaned up. A change the protocol cannot carry (a v4 table: root
manifests have no REST representation yet) is refused before anything is sent.

A table load may carry storage settings and credentials for that table (``config``, and
``storage-credentials`` by path prefix); the table's FileIO uses them over the ``[s3]`` settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from icectl.catalog.operations import (
    CatalogTable,
    CommitFailedError,
    CommitStateUnknownError,
    Current,
    metastore_version,
)
from icectl.catalog.rest_http import (
    NotSentError,
    ResponseError,
    RestClient,
    UnknownOutcomeError,
    encode_name,
    encode_namespace,
)
from icectl.config import CatalogConfig
from icectl.errors import CorruptInputError, IcectlError, NotFoundError, RefusedError, StorageError
from icectl.spec.metadata import TableMetadata
from icectl.spec.updates import TableChange, UpgradeFormatVersion, apply_change
from icectl.storage import FileIO, file_key

MAX_REST_FORMAT_VERSION = 3  # v4's root manifests have no REST representation yet


@dataclass
class RestCatalog:
    name: str
    uri: str
    warehouse: str  # as the server has it after /v1/config ("" when neither side names one)
    io: FileIO
    client: RestClient
    prefix: str = ""
    properties: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cc: CatalogConfig, io: FileIO) -> RestCatalog:
        where = f"[catalog.{cc.name}]" + (f" of {cc.source}" if cc.source else "")
        if not cc.uri:
            raise CorruptInputError(f"REST catalog '{cc.name}' has no uri", hint=f"set uri in {where}")
        try:
            parsed = urlparse(str(cc.uri))
            valid = parsed.scheme in ("http", "https") and bool(parsed.hostname)
        except ValueError:  # e.g. an unclosed IPv6 bracket
            valid = False
        if not valid:
            raise CorruptInputError(f"uri of REST catalog '{cc.name}' is not an http(s) URL: {cc.uri}",
                                    hint=f"fix {where}")
        try:
            if float(cc.properties.get("timeout") or 1) <= 0:
                raise ValueError
        except (TypeError, ValueError):
            raise CorruptInputError(f"timeout of REST catalog '{cc.name}' is not a number of seconds: "
                                    f"{cc.properties.get('timeout')!r}", hint=f"fix {where}") from None
        props: dict[str, Any] = {k: v for k, v in cc.properties.items() if v is not None}
        if cc.warehouse:
            props["warehouse"] = cc.warehouse
        if "credential" in props and not isinstance(props["credential"], str):
            raise CorruptInputError(f"credential of catalog '{cc.name}' must be a string \"id:secret\"",
                                    hint=f"fix {where}")
        client = RestClient(cc.uri, props, where=where)
        params = {"warehouse": str(props["warehouse"])} if props.get("warehouse") else None
        server = client.send("GET", client.url("config"), params=params)
        if not isinstance(server, dict):
            raise StorageError(f"REST catalog {client.uri} answered GET /v1/config with {type(server).__name__}")
        merged = {**(server.get("defaults") or {}), **props, **(server.get("overrides") or {})}
        if merged.get("uri") and str(merged["uri"]).rstrip("/") != client.uri:
            client.uri = str(merged["uri"]).rstrip("/")  # the server may point clients elsewhere
        client.properties.update(merged)
        return cls(name=cc.name, uri=client.uri, warehouse=str(merged.get("warehouse") or ""), io=io, client=client,
                   prefix=str(merged.get("prefix") or "").strip("/"), properties=merged)

    # ------------------------------------------------------------------------------- URLs

    def _url(self, *parts: str) -> str:
        return self.client.url(self.prefix, *parts)

    def namespace_url(self, namespace: tuple[str, ...], *rest: str) -> str:
        return self._url("namespaces", encode_namespace(namespace), *rest)

    def table_url(self, namespace: tuple[str, ...], table: str) -> str:
        return self.namespace_url(namespace, "tables", encode_name(table))

    # ------------------------------------------------------------------------------- listing

    def _pages(self, url: str, key: str, params: dict[str, str]) -> list[Any]:
        items: list[Any] = []
        seen: set[str] = set()
        page_size = self.properties.get("rest-page-size")  # Java's key; without it the server decides
        if page_size:
            params = {**params, "pageSize": str(page_size)}
        while True:
            body = self.client.send("GET", url, params=params)
            if not isinstance(body, dict):
                raise StorageError(f"REST catalog {self.uri} sent no '{key}' list from {url}")
            items.extend(body.get(key) or [])
            token = body.get("next-page-token")
            if not token or token in seen:  # a server repeating a token would loop forever
                return items
            seen.add(token)
            params = {**params, "pageToken": str(token)}

    def list_namespaces(self, parent: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        params = {"parent": "\x1f".join(parent)} if parent else {}
        found = [tuple(ns) for ns in self._pages(self._url("namespaces"), "namespaces", params)]
        if parent and not found:
            self._require_namespace(parent)
        # Some servers list every descendant or the parent itself: keep the direct children only.
        return [ns for ns in found if len(ns) == len(parent) + 1 and ns[:len(parent)] == parent]

    def list_tables(self, namespace: tuple[str, ...]) -> list[tuple[str, ...]]:
        try:
            idents = self._pages(self.namespace_url(namespace, "tables"), "identifiers", {})
        except NotFoundError as e:
            raise self._no_namespace(namespace, e) from e
        if not idents:
            self._require_namespace(namespace)
        return [(*ident["namespace"], ident["name"]) for ident in idents]

    def _require_namespace(self, namespace: tuple[str, ...]) -> None:
        """The spec answers a missing namespace with 404 (NoSuchNamespaceException); a server that
        lists nothing instead (SeaweedFS) is asked for the namespace itself (loadNamespaceMetadata)."""
        try:
            self.client.send("GET", self.namespace_url(namespace))
        except NotFoundError as e:
            raise self._no_namespace(namespace, e) from e

    @property
    def table_is_its_folder(self) -> bool:
        return False

    @property
    def server_writes_metadata(self) -> bool:
        return True

    def _no_namespace(self, namespace: tuple[str, ...], e: NotFoundError) -> NotFoundError:
        return NotFoundError(f"namespace {'.'.join(namespace)} not found in REST catalog {self.name}: {e.message}",
                             hint="list the namespaces with 'icectl list'")

    def create_namespace(self, namespace: tuple[str, ...], properties: dict[str, str] | None = None, *,
                         exist_ok: bool = False) -> bool:
        try:
            self.client.send("POST", self._url("namespaces"),
                             json={"namespace": list(namespace), "properties": dict(properties or {})})
        except ResponseError as e:
            if e.status != 409:
                raise
            if exist_ok:
                return False
            raise RefusedError(f"namespace {'.'.join(namespace)} already exists in catalog {self.name}") from e
        return True

    def default_table_location(self, namespace: tuple[str, ...], table: str) -> str | None:
        return None  # the server picks it

    def table_operations(self, namespace: tuple[str, ...], table: str) -> RestOperations:
        return RestOperations(self, tuple(namespace), table, self.io)


def table_file_io(base: FileIO, location: str | None, load: Mapping[str, Any]) -> FileIO:
    """The FileIO for one table: ``base`` with the load response's storage config over it.

    ``storage-credentials`` entries apply to the table location when their prefix covers it (the
    longest prefix wins, as in Java's ``S3FileIO``); ``config`` applies to the whole table.
    """
    props: dict[str, Any] = dict(load.get("config") or {})
    # Only the one best entry applies: merging several could pair one entry's key with another's token.
    covering = [c for c in load.get("storage-credentials") or ()
                if location and file_key(location).startswith(file_key(str(c.get("prefix") or "")))]
    if covering:
        props.update(max(covering, key=lambda c: len(str(c.get("prefix") or ""))).get("config") or {})
    settings = base.s3.with_properties(props)
    return base if settings == base.s3 else FileIO(s3=settings)


@dataclass
class RestOperations(CatalogTable):
    """TableOperations of one REST table: the server applies every commit."""

    catalog: RestCatalog
    namespace: tuple[str, ...]
    name: str
    io: FileIO

    @property
    def url(self) -> str:
        return self.catalog.table_url(self.namespace, self.name)

    @property
    def max_format_version(self) -> int | None:
        return MAX_REST_FORMAT_VERSION

    def _ident(self) -> dict[str, Any]:
        return {"namespace": list(self.namespace), "name": self.name}

    def _not_found(self) -> NotFoundError:
        return NotFoundError(f"table {self.identifier} not found in REST catalog {self.catalog.name} "
                             f"({self.catalog.uri})")

    def _result(self, body: Any, what: str) -> tuple[str, TableMetadata, Mapping[str, Any]]:
        """``(metadata-location, metadata, whole body)`` of a LoadTableResult."""
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict) \
                or not body.get("metadata-location"):
            raise CorruptInputError(f"REST catalog {self.catalog.uri} sent no table metadata for "
                                    f"{self.identifier} ({what})")
        try:
            md = TableMetadata.from_json(body["metadata"])
        except IcectlError as e:
            e.message = f"{e.message} in the metadata of {self.identifier} from REST catalog {self.catalog.uri}"
            raise
        return str(body["metadata-location"]), md, body

    def refresh(self) -> Current:
        try:
            body = self.catalog.client.send("GET", self.url,
                                            headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
        except NotFoundError as e:
            raise self._not_found() from e
        location, md, body = self._result(body, "load")
        self.io = table_file_io(self.catalog.io, md.location, body)
        return Current(location, md, metastore_version(location))

    def _refuse_unsupported(self, base: TableMetadata | None, change: TableChange | None,
                            md: TableMetadata | None = None) -> None:
        versions = [m.format_version for m in (base, md) if m is not None]
        if change is not None:
            versions += [u.format_version for u in change.updates if isinstance(u, UpgradeFormatVersion)]
        if versions and max(versions) > MAX_REST_FORMAT_VERSION:
            raise RefusedError(
                f"cannot commit format version {max(versions)} to {self.identifier} through REST catalog "
                f"{self.catalog.name}: the REST protocol has no representation of v4 root manifests",
                hint=f"REST tables stay at format version {MAX_REST_FORMAT_VERSION} or below")

    def commit_change(self, base: Current, change: TableChange) -> tuple[str, TableMetadata] | None:
        self._refuse_unsupported(base.metadata, change)
        # Applied locally first, as Java's client builds the new metadata before sending its updates:
        # a change that changes nothing is not sent (the server would write a new version anyway),
        # and a requirement that fails on this base already is a lost race without a request.
        if apply_change(base.metadata, change) is base.metadata:
            return None
        body = {"identifier": self._ident(), **change.to_json()}
        try:
            answer = self.catalog.client.send("POST", self.url, json=body)
        except NotSentError:
            raise  # nothing reached the server: a plain storage error, nothing to resolve
        except NotFoundError as e:
            raise self._not_found() from e
        except ResponseError as e:
            if e.status == 409:
                raise CommitFailedError(f"commit to {self.identifier} lost to another writer ({e.detail})") from e
            raise RefusedError(f"REST catalog {self.catalog.name} rejected the commit to {self.identifier} "
                               f"(nothing was committed): {e.detail}") from e
        except UnknownOutcomeError as e:
            raise self._unknown(e.message) from e
        try:
            location, md, _ = self._result(answer, "commit")
        except IcectlError as e:
            raise self._unknown(e.message) from e
        return location, md

    def _exists(self) -> RefusedError:
        return RefusedError(f"table {self.identifier} already exists in catalog {self.catalog.name}",
                            hint="choose another name")

    def _unknown(self, why: str) -> CommitStateUnknownError:
        err = CommitStateUnknownError(f"commit to {self.identifier} may or may not have happened: {why}",
                                      location=self.url)
        err.hint = (f"the commit state is unknown and nothing was cleaned up: reload the table "
                    f"(icectl inspect snapshots {self.identifier}) to see whether the change is there "
                    "before running again")
        return err

    def _post_new(self, endpoint: str, body: dict[str, Any], what: str,
                  doing: str) -> tuple[str, TableMetadata, Mapping[str, Any]]:
        """POST a new table (``tables``: create, ``register``) under the namespace; a taken name is
        refused. SeaweedFS answers a create of an existing table with that table (not the spec's
        409): look first, so a command never takes someone's table for the one it just made."""
        try:
            self.refresh()
        except NotFoundError:
            pass
        else:
            raise self._exists()
        try:
            answer = self.catalog.client.send("POST", self.catalog.namespace_url(self.namespace, endpoint), json=body,
                                              headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
        except NotFoundError as e:
            raise NotFoundError(f"namespace {'.'.join(self.namespace)} not found in REST catalog "
                                f"{self.catalog.name}: {e.message}") from e
        except ResponseError as e:
            if e.status == 409:
                raise self._exists() from e
            done = {"create": "created", "register": "registered"}[what]
            raise RefusedError(f"REST catalog {self.catalog.name} rejected {doing} {self.identifier} "
                               f"(nothing was {done}): {e.detail}") from e
        return self._result(answer, what)

    def create(self, metadata: TableMetadata) -> tuple[str, TableMetadata]:
        self._refuse_unsupported(None, None, metadata)
        props = dict(metadata.properties)
        props.setdefault("format-version", str(metadata.format_version))
        body: dict[str, Any] = {
            "name": self.name,
            "schema": metadata.schema().to_json(),
            "partition-spec": metadata.spec().to_json(),
            "write-order": metadata.sort_order().to_json(),
            "properties": props,
            "stage-create": False,
        }
        if metadata.location:
            body["location"] = metadata.location
        location, md, answer = self._post_new("tables", body, "create", "creating")
        if md.snapshots or md.metadata_log:  # created meanwhile by another client, answered as above
            raise self._exists()
        self.io = table_file_io(self.catalog.io, md.location, answer)
        return location, md

    def register(self, metadata_location: str, metadata: TableMetadata) -> tuple[str, TableMetadata]:
        """RESTSessionCatalog.registerTable: ``POST {prefix}/namespaces/{ns}/register`` with the name
        and the metadata location; the server points the table at that file."""
        self._refuse_unsupported(None, None, metadata)
        location, md, answer = self._post_new(
            "register", {"name": self.name, "metadata-location": metadata_location}, "register", "registering")
        if metadata.table_uuid and md.table_uuid != metadata.table_uuid:  # another client's table answered for the name
            raise self._exists()
        self.io = table_file_io(self.catalog.io, md.location, answer)
        return location, md

    def drop(self, base: Current) -> list[str]:
        """``DELETE .../tables/{t}`` without ``purgeRequested``, as Spark's purgeTable drops before it
        deletes the files itself. The REST protocol has no condition on the current metadata."""
        try:
            self.catalog.client.send("DELETE", self.url)
        except NotFoundError as e:
            raise NotFoundError(f"table {self.identifier} was dropped from REST catalog {self.catalog.name} "
                                "by another client meanwhile") from e
        except ResponseError as e:
            raise RefusedError(f"REST catalog {self.catalog.name} rejected dropping {self.identifier} "
                               f"(nothing was dropped): {e.detail}") from e
        return []
