"""The results of this family's commands:
their ``--json`` documents, one dataclass each (the rules are :mod:`icectl.results`'s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from icectl.results import UNSET, CommandResult, MessageResult, Part, Unset


@dataclass(kw_only=True)
class CreateResult(CommandResult):
    """``icectl create``: the table as it was (or would be) created."""

    view: ClassVar[str] = "create"

    table: str  # the address as given
    dry_run: bool
    location: str | None  # None until a catalog server that chooses it has created the table
    format_version: int
    schema: list[str]  # "<id>: <name> <type>[ not null]"
    partition_spec: list[str]  # "<name>=<transform>(<column>)"
    sort_order: list[str]  # "<transform>(<column>) <direction> <null order>"
    properties: dict[str, str]
    would_write: list[str] | Unset = UNSET  # dry run
    metadata_location: str | Unset = UNSET


@dataclass
class CatalogMeta(Part):
    """``list`` and ``namespace list``."""

    catalog: str
    warehouse: str | None


@dataclass(kw_only=True)
class NamespaceCreateResult(MessageResult):
    """``icectl namespace create``: the message, then the facts."""

    namespace: str
    catalog: str
    created: bool  # False: it existed already (--exist-ok)
