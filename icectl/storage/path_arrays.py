"""The path rules of :mod:`icectl.storage.paths` over Arrow string arrays, for the hot paths that
judge millions of paths at once (reachability, orphan matching).

Each function gives, row for row, exactly what its one-path twin gives. The common spellings
(``/x``, ``file:/x``, ``file:///x``, ``s3://b/x``, ``gs://b/x`` ...) are computed with Arrow
kernels; a row in any other spelling (a ``file://host/`` URI, a ``?`` or ``#`` that ``urlparse``
would split off, brackets, control characters, a name ``.`` or ``..``) goes through the one-path
function itself, so the two can never disagree on it.

Local identities (:func:`identities`) resolve each distinct folder once (``realpath``) and list it
once (``os.scandir``) to learn which of its names are symbolic links; only those are resolved one
by one. That is what ``path_identity`` does per file (one ``lstat`` each), per folder instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icectl.storage.paths import is_relative_path, path_identity

# Rows no kernel rule covers: urlparse would split or strip something, or refuse the row.
_UNUSUAL = r"[\[\]\t\r\n?#;]"
_ODD = r"[^\x20-\x7e]|[\[\]]"  # anything but printable ASCII, or brackets (urlparse may refuse the netloc)
_SCHEME = r"^[A-Za-z][A-Za-z0-9+.\-]+:"  # a scheme of two or more characters (one is a drive letter)
_FILE = r"^[Ff][Ii][Ll][Ee]:"
_S3 = r"^[sS]3[aAnN]?://"
_LOCAL_FILE_URI = r"^file:(//)?/[^/]"  # file:/x and file:///x: urlparse's path is everything after the prefix


def _mask(array: pa.Array, pattern: str) -> pa.BooleanArray:
    return pc.fill_null(pc.match_substring_regex(array, pattern), False)


def _by_row(paths: pa.Array, todo: pa.BooleanArray, one: Callable[[str], object], out: pa.Array,
            type_: pa.DataType) -> pa.Array:
    """``out`` with the rows of ``todo`` replaced by ``one(path)`` (the one-path rule)."""
    if not pc.any(todo).as_py():
        return out
    values = [one(p) for p in paths.filter(todo).to_pylist()]
    return pc.replace_with_mask(out, todo, pa.array(values, type_))


def relative_mask(paths: pa.Array) -> pa.BooleanArray:
    """:func:`icectl.storage.paths.is_relative_path` of each row (nulls: False)."""
    slash = pc.fill_null(pc.starts_with(paths, "/"), False)
    absolute = pc.and_(slash, pc.invert(pc.fill_null(pc.starts_with(paths, "//"), False)))
    if not pc.all(absolute).as_py():
        # urlparse refuses some netlocs (brackets, some non-ASCII): such rows keep its own verdict.
        odd = _mask(paths, _ODD)
        schemed = pc.and_(_mask(paths, _SCHEME), pc.invert(_mask(paths, _FILE)))
        file_uri = pc.fill_null(pc.starts_with(paths, "file:/"), False)  # its path starts with /
        absolute = pc.or_(absolute, pc.and_(pc.or_(schemed, file_uri), pc.invert(odd)))
    unsure = pc.and_(pc.invert(absolute), pc.is_valid(paths))
    return _by_row(paths, unsure, is_relative_path, pc.and_(pc.invert(absolute), pc.is_valid(paths)), pa.bool_())


def first_relative(paths: pa.Array) -> int | None:
    """The index of the first row :func:`relative_mask` is true for, or None."""
    mask = relative_mask(paths)
    if not pc.any(mask).as_py():
        return None
    return int(pc.index(mask, True).as_py())


def _any(mask: pa.BooleanArray) -> bool:
    return bool(pc.any(mask).as_py())


def _assemble(n: int, parts: list[tuple[pa.BooleanArray, pa.Array]], type_: pa.DataType) -> pa.Array:
    """One array of ``n`` rows from disjoint ``(mask, values of the masked rows)`` parts (rows in no
    part: null). A part covering every row is returned as it is (the usual case: one spelling)."""
    parts = [(m, v) for m, v in parts if len(v)]
    for _m, v in parts:
        if len(v) == n:
            return v.cast(type_)
    if not parts:
        return pa.nulls(n, type_)
    rows = np.concatenate([np.flatnonzero(m.to_numpy(zero_copy_only=False)) for m, _v in parts])
    values = pa.concat_arrays([v.cast(type_) for _m, v in parts])
    order = np.empty(n, dtype=np.int64)
    order.fill(len(values))  # a row in no part points past the end: null below
    order[rows] = np.arange(len(rows), dtype=np.int64)
    values = pa.concat_arrays([values, pa.nulls(1, type_)])
    return pc.take(values, pa.array(order))


def _starts(paths: pa.Array, prefix: str) -> pa.BooleanArray:
    return pc.fill_null(pc.starts_with(paths, prefix), False)


def identities(paths: pa.Array, folders: dict[str, str] | None = None) -> pa.Array:
    """:func:`icectl.storage.paths.path_identity` of each row (``folders``: the resolved-folder
    cache it shares). Nulls stay null."""
    paths = paths.cast(pa.large_string())
    n = len(paths)
    if n == 0:
        return pa.array([], pa.large_string())
    folders = folders if folders is not None else {}
    # /x (not //x: urlparse would read a netloc), file:/x, file:///x: local paths, the prefix dropped.
    bare = pc.and_(_starts(paths, "/"), pc.invert(_starts(paths, "//")))
    triple = pc.and_(_starts(paths, "file:///"), pc.invert(_starts(paths, "file:////")))
    single = pc.and_(_starts(paths, "file:/"), pc.invert(_starts(paths, "file://")))
    parts: list[tuple[pa.BooleanArray, pa.Array]] = []
    for mask, cut in ((bare, 0), (triple, 7), (single, 5)):
        if not _any(mask):
            continue
        got = paths if pc.all(mask).as_py() else paths.filter(mask)
        if cut:  # urlparse splits ?, # and ; off a file: URI
            plain = pc.invert(_mask(got, r"[?#;\t\r\n]"))
            if not pc.all(plain).as_py():
                mask, got = pc.replace_with_mask(mask, mask, plain), got.filter(plain)
            got = pc.utf8_slice_codeunits(got, cut)
        values, final = _local_identities(got, folders)
        if not pc.all(final).as_py():  # some rows are left to the one-path rule
            mask, values = pc.replace_with_mask(mask, mask, final), values.filter(final)
        parts.append((mask, values))
    rest = pc.invert(pc.or_(pc.or_(bare, triple), single))
    if _any(rest):
        schemed = pc.and_(pc.and_(rest, pc.invert(_mask(paths, _UNUSUAL))), _mask(paths, _SCHEME))
        schemed = pc.and_(schemed, pc.invert(pc.or_(_mask(paths, _FILE), _mask(paths, _ODD))))
        s3 = pc.and_(schemed, _mask(paths, _S3))
        other = pc.and_(schemed, pc.invert(_mask(paths, r"^[sS]3[aAnN]?:")))  # an s3 one without // is the rule's
        if _any(s3):
            parts.append((s3, pc.utf8_rtrim(pc.replace_substring_regex(paths.filter(s3), _S3, "s3://"), "/")))
        if _any(other):
            parts.append((other, pc.utf8_rtrim(paths.filter(other), "/")))
    out = _assemble(n, parts, pa.large_string())
    done = pa.array(np.zeros(n, dtype=bool))
    for m, _v in parts:
        done = pc.or_(done, m)
    todo = pc.and_(pc.invert(done), pc.is_valid(paths))
    return _by_row(paths, todo, lambda p: path_identity(p, folders), out, pa.large_string())


def _local_identities(locals_: pa.Array, folders: dict[str, str]) -> tuple[pa.Array, pa.BooleanArray]:
    """Identities of absolute local paths, and which rows they are final for (the others: a name
    that is ``.`` or ``..``, or in a folder that cannot be listed, left to the one-path rule).

    The identity is the folder's real path joined with the name, the name resolved when it is a
    link. When every folder is its own real path and holds no link (the usual table), that is the
    path itself, and no string is built."""
    dirs = pc.replace_substring_regex(locals_, r"/[^/]*$", "")
    encoded = pc.dictionary_encode(dirs)
    idx = encoded.indices
    prefixes: list[str] = []
    links: list[frozenset[str] | None] = []
    clean = True
    for d in encoded.dictionary.to_pylist():
        folder = d or "/"
        real = folders.get(folder)
        if real is None:
            real = folders[folder] = os.path.realpath(folder)
        names = _link_names(real)
        links.append(names)
        clean = clean and real == d and names == frozenset()
        prefixes.append(real if real.endswith("/") else real + "/")
    names_ = pc.replace_substring_regex(locals_, r"^.*/", "") if not clean else None
    # A name "", "." or "..": the whole path is resolved.
    special = pc.or_(pc.or_(pc.ends_with(locals_, "/"), pc.ends_with(locals_, "/.")), pc.ends_with(locals_, "/.."))
    final = pc.invert(special)
    unknown = [i for i, ls in enumerate(links) if ls is None]
    if unknown:
        final = pc.and_(final, pc.invert(pc.is_in(idx, value_set=pa.array(unknown, idx.type))))
    if names_ is None:
        return locals_, final
    out = pc.binary_join_element_wise(pc.take(pa.array(prefixes, pa.large_string()), idx), names_,
                                      pa.scalar("", pa.large_string()))
    linked = [i for i, ls in enumerate(links) if ls]
    if linked:
        # Only the folders that hold links: the named links are resolved one by one.
        rows = pc.and_(final, pc.is_in(idx, value_set=pa.array(linked, idx.type)))
        if _any(rows):
            row_idx = idx.filter(rows).to_pylist()
            row_names = names_.filter(rows).to_pylist()
            row_out = out.filter(rows).to_pylist()
            fixed = [os.path.realpath(o) if name in (links[i] or ()) else o
                     for i, name, o in zip(row_idx, row_names, row_out, strict=True)]
            out = pc.replace_with_mask(out, rows, pa.array(fixed, pa.large_string()))
    return out, final


def _link_names(folder: str) -> frozenset[str] | None:
    """The names in ``folder`` that are symbolic links (empty when it does not exist: a path in it
    is no link either); None when it cannot be listed (each path is then judged by itself)."""
    try:
        with os.scandir(folder) as it:
            return frozenset(e.name for e in it if e.is_symlink())
    except (FileNotFoundError, NotADirectoryError):
        return frozenset()
    except OSError:
        return None


def member_mask(values: pa.Array, others: pa.Array) -> pa.BooleanArray:
    """``is_in(values, others)``, hashing the smaller side: building the hash set costs ~20x probing
    it, so a few listed files against millions of reached ones hash the few."""
    if len(others) <= len(values):
        return pc.fill_null(pc.is_in(values, value_set=others), False)
    # The values some row of ``others`` equals (index_in gives one index per distinct value, so a
    # value repeated in ``values`` is marked through is_in, every copy of it).
    found = pc.drop_null(pc.index_in(others, value_set=values))
    return pc.fill_null(pc.is_in(values, value_set=pc.take(values, found)), False)


__all__ = ["first_relative", "identities", "member_mask", "relative_mask"]
