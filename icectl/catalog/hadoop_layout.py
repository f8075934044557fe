"""The file-system table layout of Spark's Hadoop catalog: version files and the version hint.

A table directory holds ``metadata/vN.metadata.json`` (or ``vN.gz.metadata.json``, or the
legacy ``vN.metadata.json.gz``) and ``metadata/version-hint.text`` naming the newest N.
Finding the current version follows HadoopTableOperations: trust the hint, fall back to
listing, then probe ``v(N+1)`` upward because the hint is updated after the commit.
"""

from __future__ import annotations

import re

from icectl.errors import CorruptInputError, NotFoundError
from icectl.storage import FileIO, join

VERSION_HINT = "version-hint.text"
_VERSION_FILE = re.compile(r"^v(\d+)(\.gz\.metadata\.json|\.metadata\.json|\.metadata\.json\.gz)$")
# Files a metastore catalog writes: 00001-<uuid>.metadata.json
_METASTORE_FILE = re.compile(r"^(\d+)-[0-9a-fA-F-]+(\.gz)?\.metadata\.json$")
_SUFFIXES = (".metadata.json", ".gz.metadata.json", ".metadata.json.gz")


def metadata_dir(table_dir: str) -> str:
    return join(table_dir, "metadata")


def version_file(io: FileIO, table_dir: str, version: int) -> str | None:
    """The path of ``v<version>`` in whichever naming it was written, or None."""
    for suffix in _SUFFIXES:
        p = join(metadata_dir(table_dir), f"v{version}{suffix}")
        if io.exists(p):
            return p
    return None


def read_version_hint(io: FileIO, table_dir: str) -> int | None:
    hint = join(metadata_dir(table_dir), VERSION_HINT)
    try:
        text = io.read(hint).decode("utf-8", "replace").strip()
    except NotFoundError:
        return None
    try:
        return int(text)
    except ValueError:
        return None  # Java also falls back to listing on a bad hint


def current_version(io: FileIO, table_dir: str) -> tuple[int, str]:
    """The newest committed version of a file-system table and its metadata file."""
    names = io.list_names(metadata_dir(table_dir))
    listed: dict[int, str] = {}
    for n in names:
        if m := _VERSION_FILE.match(n):
            listed.setdefault(int(m.group(1)), join(metadata_dir(table_dir), n))
    version = read_version_hint(io, table_dir)
    if version is None or version not in listed:
        if not listed:
            return _metastore_current(names, table_dir)
        version = max(listed)
    # The hint is written after the commit's atomic create, so a newer version may exist.
    while version + 1 in listed:
        version += 1
    return version, listed[version]


def _metastore_current(names: list[str], table_dir: str) -> tuple[int, str]:
    versions = [(int(m.group(1)), n) for n in names if (m := _METASTORE_FILE.match(n))]
    if not versions:
        raise NotFoundError(
            f"no Iceberg table at {table_dir}: no metadata/{VERSION_HINT} or metadata/vN.metadata.json",
            path=table_dir, hint="pass a table directory, a *.metadata.json file or namespace.table")
    v, name = max(versions)
    return v, join(metadata_dir(table_dir), name)


def is_version_file(name: str) -> bool:
    """``v<N>.metadata.json`` (any codec spelling): a file-system table's version file."""
    return _VERSION_FILE.match(name) is not None


def version_of(metadata_location: str) -> int | None:
    name = metadata_location.rstrip("/").rsplit("/", 1)[-1]
    if m := _VERSION_FILE.match(name):
        return int(m.group(1))
    if m := _METASTORE_FILE.match(name):
        return int(m.group(1))
    return None


def check_table_dir_name(name: str) -> None:
    if not name or "/" in name or name in {".", ".."}:
        raise CorruptInputError(f"invalid table or namespace name {name!r}")
