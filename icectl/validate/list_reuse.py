"""The per-list rules over only a list's new rows when the rest are an earlier list's very rows.

A fast append's manifest list is its new rows followed by its parent's rows, and the list decoder
(:class:`~icectl.codec.manifest_list_delta.ListDecoder`) then hands back the parent's very
``ManifestFile`` objects for them: 2,000 such snapshots make 2M rows, nearly all seen before. When
a list's rows after its first ``k`` are, object for object, the rows of a list checked earlier in
this run, what the per-list rules would find in those rows is known already:

* every one of their manifests is in ``checked`` (nothing to read or recheck);
* ``note_listings``: each has a listing with a sequence number <= the earlier snapshot's, so a
  snapshot with a sequence number not below it changes none of them;
* ``check_snapshot_list`` (v2 sequence numbers): a row can only break it if it was added by this
  snapshot, i.e. if this snapshot's id is among the earlier list's ``added_snapshot_id`` values;
  v3 row-id ranges span the whole list and are always checked whole;
* ``check_snapshot_deletes`` does nothing without a delete manifest in the list.

Anything else is checked over the whole list, as before.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import operator
from collections import deque
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from icectl.spec.manifest import ManifestContent, ManifestFile, PartitionFieldSummary
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIdentity
from icectl.table.manifest_cache import manifest_cache
from icectl.validate.context import checker_fingerprint


@dataclass
class CheckedList:
    """A list whose per-list rules ran in this run, with what a list sharing its rows needs."""

    manifests: list[ManifestFile]
    sequence_number: int
    added_ids: set[int | None]  # every row's added_snapshot_id
    has_deletes: bool  # a delete manifest among the rows
    location: str | None = None  # the list file, and the identity of the version its rows are of
    identity: FileIdentity | None = None


class ListReuse:
    """The last few lists checked (the decoder shares rows with the last few lists it decoded)."""

    def __init__(self, keep: int = 4) -> None:
        self.recent: deque[CheckedList] = deque(maxlen=keep)

    def split(self, manifests: list[ManifestFile]) -> tuple[int, CheckedList | None]:
        """``(k, earlier)``: ``manifests[k:]`` are ``earlier``'s rows, the same objects in the same
        order; ``(len(manifests), None)`` when no recent list is its tail."""
        n = len(manifests)
        for earlier in reversed(self.recent):
            rows = earlier.manifests
            k = n - len(rows)
            if k < 0 or not rows or manifests[k] is not rows[0]:
                continue
            if all(map(operator.is_, itertools.islice(manifests, k, None), rows)):
                return k, earlier
        return n, None

    def rebuild(self, stored: StoredList) -> list[ManifestFile] | None:
        """A stored list's rows: its new rows and its earlier list's, when that list was checked in
        this run with the very identity it had then; None otherwise (the list is read)."""
        if stored.parent is None:
            return list(stored.rows)
        location, identity = stored.parent
        for earlier in reversed(self.recent):
            if earlier.location == location and earlier.identity is not None \
                    and _identity_text(earlier.identity) == identity:
                return [*stored.rows, *earlier.manifests]
        return None

    def remember(self, snap: Snapshot, manifests: list[ManifestFile], k: int, earlier: CheckedList | None,
                 location: str | None = None, identity: FileIdentity | None = None) -> None:
        fresh = manifests[:k] if earlier is not None else manifests
        added = set(earlier.added_ids) if earlier is not None else set()
        added.update(m.added_snapshot_id for m in fresh)
        deletes = (earlier is not None and earlier.has_deletes) or any(
            m.content == ManifestContent.DELETES for m in fresh)
        self.recent.append(CheckedList(manifests, snap.sequence_number, added, deletes, location, identity))


# --------------------------------------------------------------------------- the same, across runs

# A list checked once is kept in the manifest cache as its new rows and the (location, identity)
# of the earlier list its other rows were, object for object; a later run whose earlier list has
# that very identity again rebuilds it without reading or decompressing it. Same objects mean same
# row bytes (the decoder shares rows only when their bytes are equal), so the rebuilt list equals
# a decode of the file. Rows are kept as exact JSON (checked to round-trip before they are put).
LIST_VERSION = 1


@dataclass(frozen=True)
class StoredList:
    identity: FileIdentity
    parent: tuple[str, str] | None  # the earlier list's location and identity (None: rows are all)
    rows: list[ManifestFile]


def _identity_text(identity: FileIdentity) -> str:
    return json.dumps([identity.length, identity.version])


def _value(v: Any) -> Any:
    if v is None or type(v) in (str, int, bool):
        return v
    if type(v) is bytes:
        return {"b": v.hex()}
    if type(v) is ManifestContent:
        return {"c": int(v)}
    if type(v) is tuple and all(type(p) is PartitionFieldSummary for p in v):
        return {"p": [[_value(getattr(p, f.name)) for f in dataclasses.fields(p)] for p in v]}
    raise TypeError(f"no exact JSON form for {type(v).__name__}")


def _from(v: Any) -> Any:
    if type(v) is not dict:
        return v
    if "b" in v:
        return bytes.fromhex(v["b"])
    if "c" in v:
        return ManifestContent(v["c"])
    return tuple(PartitionFieldSummary(*[_from(x) for x in p]) for p in v["p"])


def _rows_json(rows: list[ManifestFile]) -> str | None:
    try:
        text = json.dumps([[_value(getattr(m, f.name)) for f in dataclasses.fields(m)] for m in rows])
    except TypeError:
        return None
    return text if _rows_from(text) == rows else None


def _rows_from(text: str) -> list[ManifestFile]:
    return [ManifestFile(*[_from(x) for x in row]) for row in json.loads(text)]


_LIST_SCHEMA = pa.schema([("parent_location", pa.string()), ("parent_identity", pa.string()), ("rows", pa.string())])


def _kind(format_version: int) -> str:
    # v1 defaults depend on the version; the fingerprint: lists kept by other code are not rebuilt
    return f"validate-list/{LIST_VERSION}/{checker_fingerprint()}/v{format_version}"


def load_list(location: str, identity: FileIdentity | None, format_version: int) -> StoredList | None:
    cache = manifest_cache()
    if cache is None or identity is None or not identity.cacheable:
        return None
    table = cache.get(_kind(format_version), location, identity)
    if table is None or table.schema != _LIST_SCHEMA or table.num_rows != 1:
        return None
    row = table.to_pylist()[0]
    try:
        rows = _rows_from(row["rows"])
    except (ValueError, TypeError, KeyError, IndexError):
        return None
    loc, ident = row["parent_location"], row["parent_identity"]
    return StoredList(identity, (loc, ident) if loc is not None and ident is not None else None, rows)


def store_list(location: str, identity: FileIdentity | None, format_version: int, fresh: list[ManifestFile],
               earlier: CheckedList | None) -> None:
    cache = manifest_cache()
    if cache is None or identity is None or not identity.cacheable:
        return
    parent: tuple[str | None, str | None] = (None, None)
    if earlier is not None:
        if earlier.location is None or earlier.identity is None:
            return
        parent = (earlier.location, _identity_text(earlier.identity))
    text = _rows_json(fresh)
    if text is None:
        return
    table = pa.Table.from_pylist([{"parent_location": parent[0], "parent_identity": parent[1], "rows": text}],
                                 schema=_LIST_SCHEMA)
    cache.put(_kind(format_version), location, identity, table)
