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

import itertools
import operator
from collections import deque
from dataclasses import dataclass

from icectl.spec.manifest import ManifestContent, ManifestFile
from icectl.spec.snapshots import Snapshot


@dataclass
class CheckedList:
    """A list whose per-list rules ran in this run, with what a list sharing its rows needs."""

    manifests: list[ManifestFile]
    sequence_number: int
    added_ids: set[int | None]  # every row's added_snapshot_id
    has_deletes: bool  # a delete manifest among the rows


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

    def remember(self, snap: Snapshot, manifests: list[ManifestFile], k: int, earlier: CheckedList | None) -> None:
        fresh = manifests[:k] if earlier is not None else manifests
        added = set(earlier.added_ids) if earlier is not None else set()
        added.update(m.added_snapshot_id for m in fresh)
        deletes = (earlier is not None and earlier.has_deletes) or any(
            m.content == ManifestContent.DELETES for m in fresh)
        self.recent.append(CheckedList(manifests, snap.sequence_number, added, deletes))
