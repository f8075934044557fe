"""Object storage for tests: moto's S3 server on 127.0.0.1, and Spark tables copied onto it.

* :func:`start_moto_server` / the session fixture ``s3_server`` run moto's server mode (the same
  S3 emulation s3fs tests itself with) in a thread of this process, on a free loopback port.
  Nothing listens on another address and nothing leaves the machine.
* ``s3_env`` points the AWS SDK (and so icectl's ``FileIO``) at it with dummy credentials.
* :func:`relocate_table` copies a Spark-written local table to ``s3://...``: Iceberg metadata holds
  absolute paths, so metadata JSON, manifest lists and manifests are rewritten; data and Puffin
  files are copied byte for byte so their sizes and deletion-vector offsets stay valid.

Use the fixtures by importing them into a test module::

    from support.s3 import s3_env, s3_server  # noqa: F401
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import socket
import struct
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from icectl.codec.puffin import MAGIC as PUFFIN_MAGIC
from icectl.codec.puffin import read_puffin_footer

HOST = "127.0.0.1"  # loopback only: tests never talk to anything else
ACCESS_KEY = "icectl-test-key"  # moto accepts any credentials; these only have to exist
SECRET_KEY = "icectl-test-secret"
REGION = "us-east-1"  # the one region where CreateBucket needs no LocationConstraint

FsPut = Callable[[str, bytes], None]
"""``fs_put(url, data)``: store ``data`` at ``url`` (``s3://bucket/key``), replacing any object.

Called from several threads at once (s3fs filesystems are safe for that)."""


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


# --------------------------------------------------------------------------- relocating a table

# Iceberg field ids of the Avro fields that hold paths or a manifest's length (spec: "Manifests").
_MANIFEST_PATH_ID = 500
_MANIFEST_LENGTH_ID = 501
_DATA_FILE_ID = 2
_FILE_PATH_ID = 100
_REFERENCED_DATA_FILE_ID = 143
_FILE_SIZE_ID = 104

# Keys of the metadata JSON that must name a file of the table (anything else is left alone
# unless it starts with the table location, e.g. write.data.path).
_JSON_PATH_KEYS = {"location", "manifest-list", "manifests", "metadata-file", "statistics-path"}

_METADATA_JSON_SUFFIXES = (".metadata.json", ".metadata.json.gz")


class _PathMapper:
    """Maps absolute paths under the source table directory to the destination location.

    Spark writes ``/abs/path``, ``file:/abs/path`` or ``file:///abs/path`` depending on the version
    and catalog; all of them, for the directory as given and as resolved, name the source.
    """

    def __init__(self, src: Path, dst: str) -> None:
        self.dst = dst.rstrip("/")
        dirs = {str(src.absolute()).rstrip("/"), str(src.resolve()).rstrip("/")}
        # Longest first so "file:///x" wins over a shorter form that is its suffix or prefix.
        self.prefixes = sorted({form for d in dirs for form in (d, f"file:{d}", f"file://{d}")},
                               key=len, reverse=True)

    def maybe(self, value: str) -> str | None:
        """The relocated path, or None when ``value`` is not under the source directory."""
        for prefix in self.prefixes:
            if value == prefix:
                return self.dst
            if value.startswith(prefix + "/"):
                return self.dst + value[len(prefix):]
        return None

    def __call__(self, value: str) -> str:
        out = self.maybe(value)
        if out is None:
            # A file outside the table directory was not copied: the relocated table would
            # silently point back at the local disk.
            raise ValueError(f"path {value!r} is not under the table directory {self.prefixes[-1]}")
        return out


def _rewrite_json(value: Any, mapper: _PathMapper, key: str | None = None) -> Any:
    if isinstance(value, dict):
        return {k: _rewrite_json(v, mapper, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_rewrite_json(v, mapper, key) for v in value]
    if isinstance(value, str):
        if key in _JSON_PATH_KEYS:
            return mapper(value)
        return mapper.maybe(value) or value
    return value


def _rewrite_metadata_json(data: bytes, mapper: _PathMapper) -> bytes:
    compressed = data[:2] == b"\x1f\x8b"  # vN.gz.metadata.json and vN.metadata.json.gz
    doc = json.loads(gzip.decompress(data) if compressed else data)
    out = json.dumps(_rewrite_json(doc, mapper), separators=(",", ":")).encode()
    return gzip.compress(out, mtime=0) if compressed else out


def _avro_header(data: bytes) -> tuple[dict[str, bytes], bytes, int]:
    """``(metadata, sync marker, offset of the first block)`` of an Avro container file."""
    import fastavro
    from fastavro.read import HEADER_SCHEMA

    stream = io.BytesIO(data)
    header = fastavro.schemaless_reader(stream, HEADER_SCHEMA)
    if header["magic"] != b"Obj\x01":
        raise ValueError("not an Avro container file")
    return dict(header["meta"]), bytes(header["sync"]), stream.tell()


def _strip_logical_types(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_strip_logical_types(s) for s in schema]
    return schema


def _read_raw_avro(data: bytes) -> tuple[dict[str, Any], dict[str, bytes], bytes, list[dict[str, Any]]]:
    """Records of an Avro file with logical types NOT applied, so values round-trip bit for bit.

    fastavro applies logical types from the writer schema (a decimal becomes a Decimal, a
    timestamp a datetime) and re-encodes them on write, which need not reproduce Java's bytes.
    Reading through a copy of the file whose header schema has no logical types yields the
    stored ints and bytes, which fastavro's writer passes through unchanged.
    """
    import fastavro
    from fastavro.read import HEADER_SCHEMA

    meta, sync, body_start = _avro_header(data)
    schema = json.loads(meta["avro.schema"])
    raw_meta = {**meta, "avro.schema": json.dumps(_strip_logical_types(schema)).encode()}
    header = io.BytesIO()
    fastavro.schemaless_writer(header, HEADER_SCHEMA, {"magic": b"Obj\x01", "meta": raw_meta, "sync": sync})
    records = list(fastavro.reader(io.BytesIO(header.getvalue() + data[body_start:])))
    return schema, meta, sync, records


def _write_avro(schema: dict[str, Any], meta: dict[str, bytes], sync: bytes,
                records: list[dict[str, Any]]) -> bytes:
    """Write ``records`` with the original writer schema, codec, key-value metadata and sync marker."""
    import fastavro

    codec = meta.get("avro.codec", b"null").decode()
    extra = {k: v.decode() for k, v in meta.items() if not k.startswith("avro.")}
    out = io.BytesIO()
    fastavro.writer(out, schema, records, codec=codec, metadata=extra, sync_marker=sync)
    return out.getvalue()


def _field_name(record_schema: dict[str, Any], field_id: int, default: str) -> str:
    """The Avro name of the field with Iceberg ``field-id`` (old writers spell names differently)."""
    for f in record_schema.get("fields", []):
        if f.get("field-id") == field_id:
            return str(f["name"])
    return default


def _record_type(field_type: Any) -> dict[str, Any]:
    if isinstance(field_type, list):  # an optional record: ["null", {...}]
        field_type = next(t for t in field_type if isinstance(t, dict))
    return field_type


def _avro_kind(data: bytes) -> str:
    """``manifest-list``, ``manifest`` or ``other`` by the writer schema's field ids."""
    try:
        meta, _, _ = _avro_header(data)
        schema = json.loads(meta["avro.schema"])
    except Exception:
        return "other"
    ids = {f.get("field-id") for f in schema.get("fields", [])} if isinstance(schema, dict) else set()
    names = {f.get("name") for f in schema.get("fields", [])} if isinstance(schema, dict) else set()
    if _MANIFEST_PATH_ID in ids or "manifest_path" in names:
        return "manifest-list"
    if _DATA_FILE_ID in ids or "data_file" in names:
        return "manifest"
    return "other"


def _rewrite_manifest(data: bytes, mapper: _PathMapper, sizes: dict[str, int]) -> bytes:
    schema, meta, sync, records = _read_raw_avro(data)
    df_field = _field_name(schema, _DATA_FILE_ID, "data_file")
    df_schema = _record_type(next(f["type"] for f in schema["fields"] if f["name"] == df_field))
    path_field = _field_name(df_schema, _FILE_PATH_ID, "file_path")
    size_field = _field_name(df_schema, _FILE_SIZE_ID, "file_size_in_bytes")
    ref_field = _field_name(df_schema, _REFERENCED_DATA_FILE_ID, "referenced_data_file")
    for rec in records:
        df = rec[df_field]
        df[path_field] = mapper(df[path_field])
        if df[path_field] in sizes:  # a Puffin file whose footer was rewritten
            df[size_field] = sizes[df[path_field]]
        if df.get(ref_field) is not None:
            df[ref_field] = mapper(df[ref_field])
    return _write_avro(schema, meta, sync, records)


def _rewrite_puffin(data: bytes, mapper: _PathMapper) -> bytes:
    """A DV's footer names its data file (``referenced-data-file``): relocate that name too.

    Blob offsets do not move (only the footer changes); the footer is written uncompressed.
    """
    footer = read_puffin_footer(data)
    start = len(data) - footer.footer_size
    doc = json.loads(data[start + 4:start + footer.footer_size - 12])
    changed = False
    for blob in doc.get("blobs", ()):
        props = blob.get("properties") or {}
        if "referenced-data-file" in props:
            props["referenced-data-file"] = mapper(props["referenced-data-file"])
            changed = True
    if not changed:
        return data
    payload = json.dumps(doc, separators=(",", ":")).encode()
    return data[:start] + PUFFIN_MAGIC + payload + struct.pack("<iI", len(payload), 0) + PUFFIN_MAGIC


def _rewrite_manifest_list(data: bytes, mapper: _PathMapper, lengths: dict[str, int]) -> bytes:
    schema, meta, sync, records = _read_raw_avro(data)
    path_field = _field_name(schema, _MANIFEST_PATH_ID, "manifest_path")
    length_field = _field_name(schema, _MANIFEST_LENGTH_ID, "manifest_length")
    for rec in records:
        rec[path_field] = mapper(rec[path_field])
        # A rewritten manifest has a new size; readers may trust manifest_length.
        if rec[path_field] in lengths:
            rec[length_field] = lengths[rec[path_field]]
    return _write_avro(schema, meta, sync, records)


def _is_checksum(path: Path) -> bool:
    # Hadoop's local file system writes ".<name>.crc" beside every file; object stores have none.
    return path.name.startswith(".") and path.name.endswith(".crc")


def relocate_table(src_table_dir: Path, dst_location: str, fs_put: FsPut) -> str:
    """Copy a local table directory to ``dst_location``, rewriting every absolute path in it.

    ``dst_location`` is the new table directory (``s3://bucket/wh/db/t``); ``fs_put(url, data)``
    stores one object (it is called from several threads).  Metadata JSON (plain or gzip) gets
    every path under the table directory rewritten; manifests and manifest lists are re-encoded
    with their own writer schema, codec and key-value metadata, with new ``file_path``,
    ``referenced_data_file``, ``manifest_path`` and ``manifest_length``; Puffin deletion-vector
    files get their footers' ``referenced-data-file`` rewritten (and their new sizes recorded in
    the manifests).  Everything else (data, statistics, ``version-hint.text``) is copied byte for
    byte; Hadoop ``.crc`` side files
    are skipped.  Works for format v1-v3.  Returns the new table location.
    """
    src = Path(src_table_dir)
    dst = dst_location.rstrip("/")
    mapper = _PathMapper(src, dst)
    files = sorted(p for p in src.rglob("*") if p.is_file() and not _is_checksum(p))

    manifests: list[tuple[str, bytes]] = []
    manifest_lists: list[tuple[str, bytes]] = []
    metadata: list[tuple[str, bytes]] = []
    plain: list[tuple[str, bytes]] = []
    for p in files:
        url = f"{dst}/{p.relative_to(src).as_posix()}"
        data = p.read_bytes()
        if p.name.endswith(_METADATA_JSON_SUFFIXES):
            metadata.append((url, data))
        elif p.name == "version-hint.text":
            pass  # written last, below
        elif p.suffix == ".avro" and (kind := _avro_kind(data)) != "other":
            (manifests if kind == "manifest" else manifest_lists).append((url, data))
        else:
            plain.append((url, data))

    out: list[tuple[str, bytes]] = []
    sizes: dict[str, int] = {}
    for url, data in plain:
        if url.endswith(".puffin"):
            data = _rewrite_puffin(data, mapper)
            sizes[url] = len(data)
        out.append((url, data))
    lengths: dict[str, int] = {}
    for url, data in manifests:
        new = _rewrite_manifest(data, mapper, sizes)
        lengths[url] = len(new)
        out.append((url, new))
    out.extend((url, _rewrite_manifest_list(data, mapper, lengths)) for url, data in manifest_lists)
    out.extend((url, _rewrite_metadata_json(data, mapper)) for url, data in metadata)
    # Uploads are round trips, not work: run them side by side (v2_part: 200 objects, ~3 s -> <1 s).
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in pool.map(lambda item: fs_put(*item), out):
            pass  # iterate to re-raise the first failed upload
    hint = src / "metadata" / "version-hint.text"
    if hint.is_file():
        # Last: a table becomes visible under its hint only once all of its files are there.
        fs_put(f"{dst}/metadata/version-hint.text", hint.read_bytes())
    return dst
