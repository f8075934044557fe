"""Paths and URLs: one spelling per file, whatever the scheme (local, ``file:``, ``s3://``/``s3a://``)."""

from __future__ import annotations

import os
import posixpath
from urllib.parse import urlparse

# Hadoop's S3 connectors use these schemes for the same buckets (Spark tables often say s3a://).
S3_SCHEMES = {"s3", "s3a", "s3n"}


def scheme_of(path: str) -> str:
    p = urlparse(path)
    # A Windows drive letter or a bare path has no real scheme.
    return p.scheme.lower() if len(p.scheme) > 1 else "file"


def is_relative_path(path: str) -> bool:
    """A path with no URI scheme and no leading ``/`` (``data/x.parquet``, ``./x``, ``file:x``): it
    names a file only against some base. Before format v4 every path in metadata is absolute (the
    spec's "Full URI for the file"); v4 resolves such a path against the table location."""
    if len(urlparse(path).scheme) > 1:
        return path.lower().startswith("file:") and not local_path(path).startswith("/")
    return not path.startswith("/")


def local_path(path: str) -> str:
    """``file:/x``, ``file:///x`` and ``/x`` all name the same local file."""
    if path.startswith("file:"):
        p = urlparse(path)
        return p.path or "/"
    return path


def join(base: str, *parts: str) -> str:
    out = base.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


def parent(path: str) -> str:
    if "://" in path:
        scheme, rest = path.split("://", 1)
        return f"{scheme}://{posixpath.dirname(rest.rstrip('/'))}"
    return posixpath.dirname(path.rstrip("/"))


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/"))


def is_within(path: str, location: str) -> bool:
    """True when ``path`` lies under the directory ``location`` (scheme and s3a/s3 aliases folded)."""
    return file_key(path).startswith(file_key(location).rstrip("/") + "/")


def checksum_sidecar(path: str) -> str | None:
    """Hadoop's local file system (Spark's ``file:`` tables) writes ``.<name>.crc`` next to every
    file and removes it with the file; deleting only the file would leave it behind for good
    (orphan-file cleanup skips hidden names). ``None`` off local disks."""
    if scheme_of(path) != "file":
        return None
    return posixpath.join(parent(path), f".{basename(path)}.crc")


def file_key(path: str) -> str:
    """One spelling per physical file: ``file:///x``, ``file:/x``, ``/x`` and ``/a/../x`` are one
    local file, ``s3a://`` and ``s3://`` one object. Compare locations by this, never as text."""
    s = scheme_of(path)
    if s == "file":
        return posixpath.normpath(local_path(path))
    if s in S3_SCHEMES:
        return "s3://" + path.split("://", 1)[1]
    return path


def path_identity(path: str, folders: dict[str, str] | None = None) -> str:
    """One key per physical file or folder: the real path on a local disk (links resolved, so a
    link cannot alias a file or lead out of a folder unseen), :func:`file_key` elsewhere.
    ``folders`` caches the real paths of folders already resolved (a link as the last part is
    still resolved)."""
    if scheme_of(path) != "file":
        return file_key(path).rstrip("/")
    local = local_path(path)
    folder, name = os.path.split(local)
    if folders is None or name in ("", ".", ".."):
        return os.path.realpath(local)
    real_folder = folders.get(folder)
    if real_folder is None:
        real_folder = folders[folder] = os.path.realpath(folder)
    candidate = os.path.join(real_folder, name)
    return os.path.realpath(candidate) if os.path.islink(candidate) else candidate
