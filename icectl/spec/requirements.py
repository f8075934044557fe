"""Table requirements (REST spec ``TableRequirement``): what must hold on the base for a change to apply.

Each requirement carries the REST spec's ``type`` name and :meth:`to_json` gives its body in the
``CommitTableRequest`` shape. :func:`check_requirements` is Java's ``UpdateRequirement.validate``:
a requirement that does not hold is a commit conflict (another writer changed the table), named
in the error so a retry or a user can tell which assumption broke.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from icectl.errors import CommitConflictError
from icectl.spec.metadata import TableMetadata


class RequirementFailedError(CommitConflictError):
    """A requirement does not hold on the base (Java: CommitFailedException "Requirement failed")."""

    def __init__(self, requirement: TableRequirement, why: str) -> None:
        super().__init__(f"requirement {requirement.type} failed: {why}",
                         hint="another writer changed the table; run it again")
        self.requirement = requirement


@dataclass(frozen=True)
class AssertCreate:
    type: ClassVar[str] = "assert-create"

    def check(self, base: TableMetadata | None) -> None:
        if base is not None:
            raise RequirementFailedError(self, "table already exists")

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type}


@dataclass(frozen=True)
class AssertTableUUID:
    type: ClassVar[str] = "assert-table-uuid"
    uuid: str

    def check(self, base: TableMetadata | None) -> None:
        actual = base.table_uuid if base is not None else None
        if actual != self.uuid:
            raise RequirementFailedError(self, f"UUID does not match: expected {self.uuid} != {actual}")

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "uuid": self.uuid}


@dataclass(frozen=True)
class AssertRefSnapshotId:
    """``ref`` is at ``snapshot_id``; ``None``: the ref must not exist."""

    type: ClassVar[str] = "assert-ref-snapshot-id"
    ref: str
    snapshot_id: int | None

    def check(self, base: TableMetadata | None) -> None:
        ref = base.refs.get(self.ref) if base is not None else None
        if ref is not None:
            kind = "branch" if ref.is_branch else "tag"
            if self.snapshot_id is None:
                raise RequirementFailedError(self, f"{kind} {self.ref} was created concurrently")
            if self.snapshot_id != ref.snapshot_id:
                raise RequirementFailedError(self, f"{kind} {self.ref} has changed: expected id "
                                                   f"{self.snapshot_id} != {ref.snapshot_id}")
        elif self.snapshot_id is not None:
            raise RequirementFailedError(self, f"branch or tag {self.ref} is missing, expected {self.snapshot_id}")

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "ref": self.ref, "snapshot-id": self.snapshot_id}


@dataclass(frozen=True)
class _AssertId:
    """A requirement that one id of the base is still ``expected`` (its REST field ``key``)."""

    type: ClassVar[str]
    what: ClassVar[str]  # the words of Java's message
    attribute: ClassVar[str]  # the TableMetadata attribute compared

    @property
    def expected(self) -> int:
        return int(getattr(self, dataclasses.fields(self)[0].name))

    def check(self, base: TableMetadata | None) -> None:
        actual = getattr(base, self.attribute) if base is not None else None
        if actual != self.expected:
            # _AssertId is abstract: self is one of its subclasses, all in TableRequirement
            raise RequirementFailedError(cast("TableRequirement", self),
                                         f"{self.what} changed: expected id {self.expected} != {actual}")

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, dataclasses.fields(self)[0].name.replace("_", "-"): self.expected}


@dataclass(frozen=True)
class AssertLastAssignedFieldId(_AssertId):
    type: ClassVar[str] = "assert-last-assigned-field-id"
    what: ClassVar[str] = "last assigned field id"
    attribute: ClassVar[str] = "last_column_id"
    last_assigned_field_id: int


@dataclass(frozen=True)
class AssertCurrentSchemaId(_AssertId):
    type: ClassVar[str] = "assert-current-schema-id"
    what: ClassVar[str] = "current schema"
    attribute: ClassVar[str] = "current_schema_id"
    current_schema_id: int


@dataclass(frozen=True)
class AssertLastAssignedPartitionId(_AssertId):
    type: ClassVar[str] = "assert-last-assigned-partition-id"
    what: ClassVar[str] = "last assigned partition id"
    attribute: ClassVar[str] = "last_partition_id"
    last_assigned_partition_id: int


@dataclass(frozen=True)
class AssertDefaultSpecId(_AssertId):
    type: ClassVar[str] = "assert-default-spec-id"
    what: ClassVar[str] = "default partition spec"
    attribute: ClassVar[str] = "default_spec_id"
    default_spec_id: int


@dataclass(frozen=True)
class AssertDefaultSortOrderId(_AssertId):
    type: ClassVar[str] = "assert-default-sort-order-id"
    what: ClassVar[str] = "default sort order"
    attribute: ClassVar[str] = "default_sort_order_id"
    default_sort_order_id: int


TableRequirement = (AssertCreate | AssertTableUUID | AssertRefSnapshotId | AssertLastAssignedFieldId
                    | AssertCurrentSchemaId | AssertLastAssignedPartitionId | AssertDefaultSpecId
                    | AssertDefaultSortOrderId)


def check_requirements(base: TableMetadata | None, requirements: Iterable[TableRequirement]) -> None:
    """Raise :class:`RequirementFailedError` for the first requirement ``base`` does not meet."""
    for requirement in requirements:
        requirement.check(base)


__all__ = [
    "AssertCreate", "AssertCurrentSchemaId", "AssertDefaultSortOrderId", "AssertDefaultSpecId",
    "AssertLastAssignedFieldId", "AssertLastAssignedPartitionId", "AssertRefSnapshotId", "AssertTableUUID",
    "RequirementFailedError", "TableRequirement", "check_requirements",
]
