"""remove-orphan-files' matching (Java's ``FileURI``): which listed file is a valid one.

A listed file and a valid file are the same when their URI paths are equal and their schemes and
authorities agree (after ``equal_schemes`` / ``equal_authorities``; a valid file without one agrees
with any); a local file that IS a valid file under another name (an in-table link) is valid; a
Hadoop checksum sidecar ``.<name>.crc`` of a valid file is valid. The valid files a snapshot
reaches stay Arrow columns (:class:`ValidFiles`), matched with ``is_in``; see the package doc.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icectl.errors import UsageError
from icectl.storage import scheme_of
from icectl.storage.path_arrays import member_mask
from icectl.table.delete_fence import file_identity

_CRC = re.compile(r"^\.(.+)\.crc$")


@dataclass
class ValidFiles:
    """Every file the table reaches: path as written -> kind (Spark's FileInfo type names:
    data_files, position_delete_files, equality_delete_files, manifest_files, manifest_lists,
    statistics_files, metadata_files). What snapshots reach stays Arrow columns (``columns``:
    :meth:`icectl.table.reach.FileSet.table`, ``identity``, ``path``, ``category``); ``paths``
    holds the rest (metadata and statistics files)."""

    paths: dict[str, str] = field(default_factory=dict)
    metadata_location: str = ""
    columns: pa.Table | None = None

    def add(self, path: str, kind: str) -> None:
        self.paths.setdefault(path, kind)

    def __len__(self) -> int:
        """How many distinct paths (as written)."""
        if self.columns is None or not self.paths:
            return len(self.paths) + (self.columns.num_rows if self.columns is not None else 0)
        extra = pa.array(list(self.paths), pa.large_string())
        both = member_mask(extra, self.columns.column("path").combine_chunks())
        return self.columns.num_rows + len(self.paths) - int(np.count_nonzero(both.to_numpy(zero_copy_only=False)))



# --------------------------------------------------------------------------- matching (Java's FileURI)


def parse_equal_map(text: str | None, option: str) -> dict[str, str]:
    """``s3a=s3,s3n=s3`` (Spark's ``map('s3a', 's3', ...)``) as a dict; {} for None or ''."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise UsageError(f"{option} {text!r}: expected FROM=TO pairs separated by commas (s3a=s3,s3n=s3)")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class FileURI:
    scheme: str | None
    authority: str | None
    path: str


def file_uri(path: str, equal_schemes: Mapping[str, str], equal_authorities: Mapping[str, str]) -> FileURI:
    """Hadoop's ``new Path(s).toUri()`` reduced to what the match needs, schemes and authorities
    mapped. A bare path has no scheme; ``file:/x`` and ``file:///x`` have no authority."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path) and not re.match(r"^[A-Za-z]:[\\/]", path):
        parts = urlsplit(path)
        scheme: str | None = parts.scheme or None
        authority: str | None = parts.netloc or None
        rest = parts.path + (f"?{parts.query}" if parts.query else "")
    else:
        scheme, authority, rest = None, None, path
    rest = re.sub(r"/{2,}", "/", rest)
    if len(rest) > 1:
        rest = rest.rstrip("/")
    if scheme is not None:
        scheme = equal_schemes.get(scheme, scheme)
    if authority is not None:
        authority = equal_authorities.get(authority, authority)
    return FileURI(scheme, authority, rest)


def _agrees(valid: str | None, actual: str | None) -> bool:
    return not valid or (actual is not None and valid.lower() == actual.lower())


@dataclass
class Matcher:
    """The valid files indexed by URI path (and, on a local disk, by real path). What snapshots
    reach stays in Arrow columns (:meth:`index` of a :class:`ValidFiles` with ``columns``); a batch
    of listed files (:meth:`judge_all`) is matched against them with ``is_in``, and only the valid
    files that can decide a listed file that is not plainly valid are indexed one by one."""

    equal_schemes: Mapping[str, str]
    equal_authorities: Mapping[str, str]
    by_path: dict[str, list[tuple[str | None, str | None]]] = field(default_factory=dict)
    identities: set[str] | None = None  # local real paths of the valid files, built when first needed
    local: list[str] = field(default_factory=list)
    columns: list[pa.Table] = field(default_factory=list)  # (identity, path) of reached files
    _names: list[pa.Array] = field(default_factory=list)  # each columns table's file names (lazily)

    def index(self, valid: ValidFiles) -> None:
        for p in valid.paths:
            self._index_one(p)
        if valid.columns is not None:
            self.columns.append(valid.columns.select(["identity", "path"]))
        self.identities = None

    def _index_one(self, p: str) -> None:
        u = file_uri(p, self.equal_schemes, self.equal_authorities)
        self.by_path.setdefault(u.path, []).append((u.scheme, u.authority))
        if scheme_of(p) == "file":
            self.local.append(p)

    def listed_uri(self, path: str) -> FileURI:
        u = file_uri(path, self.equal_schemes, self.equal_authorities)
        if u.scheme is None:  # a listed local file: Hadoop lists it qualified, as file:/...
            u = FileURI(self.equal_schemes.get("file", "file"), None, u.path)
        return u

    def judge(self, path: str, same_file: set[str] | frozenset[str] = frozenset()
              ) -> tuple[str, tuple[str, str] | None]:
        """``valid``, ``orphan`` or ``mismatch`` (with the first differing (valid, listed) pair), by
        the files indexed one by one; ``same_file``: listed paths known to be a valid file by
        their local identity. For files the columns may decide, use :meth:`judge_all`."""
        u = self.listed_uri(path)
        spellings = self.by_path.get(u.path)
        if spellings:
            for scheme, authority in spellings:
                if _agrees(scheme, u.scheme) and _agrees(authority, u.authority):
                    return "valid", None
            scheme, authority = spellings[0]
            if not _agrees(scheme, u.scheme):
                return "mismatch", (str(scheme), str(u.scheme))
            return "mismatch", (str(authority), str(u.authority))
        if scheme_of(path) == "file":
            if path in same_file:
                return "valid", None
            if self.identities is None:
                self.identities = {file_identity(p) for p in self.local}
            if file_identity(path) in self.identities:
                return "valid", None  # the same file as a valid one, reached by another name
        return "orphan", None

    def judge_all(self, paths: list[str]) -> list[tuple[str, tuple[str, str] | None]]:
        """:meth:`judge` of each path, a checksum sidecar ``.<name>.crc`` of a valid file counting as
        valid. A path spelled exactly as a reached file is valid (its URI is that file's); the
        others are judged by :meth:`judge`, after the reached files that could decide them (the
        same file name, or the same local identity) are indexed."""
        todo = list(range(len(paths)))
        out: list[tuple[str, tuple[str, str] | None]] = [("orphan", None)] * len(paths)
        same: set[str] = set()
        if self.columns and paths:
            listed = pa.array(paths, pa.large_string())
            plain = np.zeros(len(paths), dtype=bool)
            for t in self.columns:
                plain |= member_mask(listed, t.column("path").combine_chunks()).to_numpy(zero_copy_only=False)
            todo = [i for i in todo if not plain[i]]
            for k in np.flatnonzero(plain).tolist():
                out[k] = ("valid", None)
            asked = [paths[i] for i in todo] + [t for t in (_sidecar_target(paths[i]) for i in todo) if t]
            same = self._prepare(asked)
        for i in todo:
            verdict = self.judge(paths[i], same)
            target = _sidecar_target(paths[i]) if verdict[0] != "valid" else None
            out[i] = ("valid", None) if target and self.judge(target, same)[0] == "valid" else verdict
        return out

    def _prepare(self, asked: list[str]) -> set[str]:
        """Index the reached files that share a file name with one of ``asked`` (or whose URI's
        name may differ from the text after its last ``/``: a ``#`` fragment, a trailing ``/``);
        the local ``asked`` paths whose identity is a reached file's."""
        if not asked:
            return set()
        # A name "" stands for a reached path ending in "/"; a "#" fragment is no part of a URI path.
        names = pa.array(sorted({posixpath.basename(self.listed_uri(p).path) for p in asked} | {""}),
                         pa.large_string())
        for k, t in enumerate(self.columns):
            if k == len(self._names):
                self._names.append(pc.replace_substring_regex(t.column("path"), r"^.*/", ""))
            hit = pc.or_(member_mask(self._names[k], names), pc.match_substring(t.column("path"), "#"))
            for p in t.column("path").filter(hit).to_pylist():
                self._index_one(p)
        self.identities = None
        local = [p for p in asked if scheme_of(p) == "file"]
        if not local:
            return set()
        ids = pa.array([file_identity(p) for p in local], pa.large_string())
        found = np.zeros(len(local), dtype=bool)
        for t in self.columns:
            found |= member_mask(ids, t.column("identity").combine_chunks()).to_numpy(zero_copy_only=False)
        return {p for p, f in zip(local, found, strict=True) if f}


def _sidecar_target(path: str) -> str | None:
    """The file a Hadoop checksum sidecar ``.<name>.crc`` belongs to, or None."""
    head, name = posixpath.split(path)
    m = _CRC.match(name)
    return f"{head}/{m.group(1)}" if m else None


# The Spark engine joins the listing with the valid files on these (icectl.engine.spark_reach.orphan_candidates):
# ``exact`` equal means agreeing spellings (so: valid, as judge says); the keys are everything judge
# looks a listed file up by, so the driver's matcher gets every valid file it needs for the rest.


def _exact(u: FileURI) -> str:
    return "\0".join((u.path, (u.scheme or "\1").lower(), (u.authority or "\1").lower()))


def valid_lookup(matcher: Matcher, path: str) -> tuple[str, list[str]]:
    """A valid file's exact spelling and keys: its URI path and, on a local disk, its identity."""
    u = file_uri(path, matcher.equal_schemes, matcher.equal_authorities)
    return _exact(u), [f"u{u.path}", *([f"i{file_identity(path)}"] if scheme_of(path) == "file" else [])]


def listed_lookup(matcher: Matcher, path: str) -> tuple[str, list[str]]:
    """A listed file's exact spelling and the keys :meth:`Matcher.judge` (of it, and of the file a
    ``.crc`` sidecar belongs to) looks valid files up by."""
    head, name = posixpath.split(path)
    m = _CRC.match(name)
    keys: list[str] = []
    for p in (path, f"{head}/{m.group(1)}") if m else (path,):
        keys.append(f"u{matcher.listed_uri(p).path}")
        if scheme_of(p) == "file":
            keys.append(f"i{file_identity(p)}")
    return _exact(matcher.listed_uri(path)), keys


__all__ = ["FileURI", "Matcher", "ValidFiles", "file_uri", "listed_lookup", "parse_equal_map", "valid_lookup"]
