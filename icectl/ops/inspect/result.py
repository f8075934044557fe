"""The results of the views of the metadata file alone (``icectl inspect table``) and the keys every
inspect rows view puts before its rows.

Apart from :mod:`icectl.ops.results` (one dataclass per command, ~10 ms to import) so that
``inspect table`` and its like start fast (issue 15); the JSON rules are those of
:mod:`icectl.results`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from icectl.results import UNSET, CommandResult, Part, Unset

# --------------------------------------------------------------------------- inspect table


@dataclass
class SnapshotBrief(Part):
    snapshot_id: int
    committed_at: str | None
    operation: str | None
    sequence_number: int


@dataclass
class SchemaBrief(Part):
    schema_id: int
    columns: list[str]


@dataclass
class SpecBrief(Part):
    spec_id: int
    fields: list[str]


@dataclass
class SortOrderBrief(Part):
    order_id: int
    fields: list[str]


@dataclass(kw_only=True)
class TableOverview(CommandResult):
    """``icectl inspect table``: the overview of a table's metadata."""

    view: ClassVar[str] = "table"

    table: str
    metadata_location: str | None
    format_version: int
    table_uuid: str | None
    location: str | None
    last_updated: str | None
    last_sequence_number: int
    current_snapshot_id: int | None
    current_snapshot: SnapshotBrief | None
    snapshot_count: int
    refs: dict[str, str]  # name -> "<type> -> <snapshot id>"
    schema: SchemaBrief
    partition_spec: SpecBrief
    sort_order: SortOrderBrief
    properties: dict[str, str]
    totals: dict[str, str]  # the current snapshot's total-* summary properties
    next_row_id: int | Unset | None = UNSET  # v3 and later


# --------------------------------------------------------------------------- rows views' meta


@dataclass(kw_only=True)
class TableViewMeta(Part):
    """The keys an inspect rows view puts before ``rows``."""

    table: str
    metadata_location: str | None
    schema_id: int | Unset = UNSET  # inspect schema
    snapshot_id: int | Unset | None = UNSET  # views of one snapshot


@dataclass(kw_only=True)
class TreeMeta(TableViewMeta):
    """``inspect tree``: what the snapshot's metadata tree is rooted in, and its entries by kind."""

    kind: str | None  # "root", "manifest-list" or "manifests"
    root: str | None
    by_type_and_status: dict[str, int]
