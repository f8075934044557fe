"""Commits for tests: real changes as updates, and forged metadata for states no command makes.

icectl commits only ``TableChange`` (REST-style requirements and updates, :mod:`icectl.spec.updates`).
Tests also need states no update produces (a restored snapshot list, hand-made refs, a clock the
model controls): :func:`forge_commit` writes such metadata through the catalog's own atomic swap,
so the table stays a valid, committed table.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping

from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import SnapshotRef
from icectl.spec.updates import (
    RemoveProperties,
    SetProperties,
    SetSnapshotRef,
    TableChange,
    TableUpdate,
    prepare_commit,
)
from icectl.table import Table
from icectl.table.commit import operations_for


def property_change(updates: Mapping[str, str] | None = None, removals: Iterable[str] = ()) -> TableChange:
    """set-properties (and remove-properties) as one change."""
    ups: list[TableUpdate] = [SetProperties(dict(updates or {}))]
    if removals:
        ups.append(RemoveProperties(tuple(removals)))
    return TableChange((), tuple(ups))


def ref_change(name: str, ref: SnapshotRef) -> TableChange:
    """set-snapshot-ref: create or move a branch or tag."""
    return TableChange((), (SetSnapshotRef(name, ref),))


def forge_commit(table: Table, build: Callable[[TableMetadata], TableMetadata]) -> str:
    """Commit ``build(base)`` as the next version (metadata-log and last-updated-ms as any commit);
    returns the new metadata location. One attempt: a test that forges owns the table."""
    ops = operations_for(table)
    current = ops.refresh()
    new = prepare_commit(current.metadata, build(current.metadata), current.location, time.time_ns() // 1_000_000)
    location = ops.commit(current, new)
    table.metadata = new
    table.address = dataclasses.replace(table.address, metadata_location=location)
    return location
