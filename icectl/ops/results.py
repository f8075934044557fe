"""The result of each operation: its JSON contract, one dataclass per command.

Each class lists the keys of the command's ``--json`` document in order (``icectl.results``
explains the rules: a field left ``UNSET`` is not in the document, ``None`` is ``null``). Keys
that only a dry run carries (``would_write``, ``would_delete``) and keys only a commit carries
(``snapshot_id``, ``metadata_location``, ``commit_attempts``, ...) sit in the same class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

# The inspect-table results live in view_results (light to import); importable from here as well.
from icectl.ops.view_results import SchemaBrief as SchemaBrief
from icectl.ops.view_results import SnapshotBrief as SnapshotBrief
from icectl.ops.view_results import SortOrderBrief as SortOrderBrief
from icectl.ops.view_results import SpecBrief as SpecBrief
from icectl.ops.view_results import TableOverview as TableOverview
from icectl.ops.view_results import TableViewMeta
from icectl.results import UNSET, CommandResult, MessageResult, Part, Unset, json_key, plain

# The file categories of an expiry: Spark's expire_snapshots output names (deleted_<category>_count)
# in its order, which is also Java's delete order.
EXPIRE_CATEGORIES = ("data_files", "position_delete_files", "equality_delete_files", "manifest_files",
                     "manifest_lists", "statistics_files")

NEXT_METADATA = "a new table metadata file (the next version)"  # a would_write line of every writing command


# --------------------------------------------------------------------------- shared parts


@dataclass
class FileRef(Part):
    """A manifest (or leaf) a command would replace."""

    path: str
    bytes: int | None


@dataclass
class WrittenFile(Part):
    """A manifest (or leaf) a command wrote, with its entry count."""

    path: str
    bytes: int | None
    entries: int


@dataclass
class PlannedWrite(Part):
    """A file a dry run would write; ``group`` names the compaction group it belongs to."""

    path: str
    group: str | Unset = UNSET


# --------------------------------------------------------------------------- expire-snapshots


@dataclass(kw_only=True)
class ExpireCutoff(Part):
    """The cutoff of an expiry (Java's ``expireOlderThan``): snapshots older than it may go, unless a
    branch keeps them (its min-snapshots-to-keep) or its own max-snapshot-age-ms says otherwise."""

    expire_older_than_ms: int  # the cutoff, ms since the epoch
    expire_older_than: str  # the same as an ISO-8601 UTC timestamp
    max_snapshot_age_ms: int  # the age it came from: now - cutoff
    source: str  # "--older-than", "history.expire.max-snapshot-age-ms" (the table property) or "default"
    now_ms: int  # the run's "now" the ages are counted from
    min_snapshots_to_keep: int  # the default for branches without their own
    min_snapshots_to_keep_source: str  # "--retain-last", "history.expire.min-snapshots-to-keep" or "default"
    max_ref_age_ms: int  # the default for refs without their own (Long.MAX_VALUE: forever)
    max_ref_age_source: str  # "history.expire.max-ref-age-ms" or "default"


@dataclass(kw_only=True)
class RefPolicy(Part):
    """One ref's retention as the expiry applied it; each setting with where it came from ("ref": the
    ref's own setting in the metadata)."""

    name: str
    type: str  # branch | tag
    snapshot_id: int
    snapshot_age_ms: int | None  # age of the ref's snapshot (None: not in the table)
    max_ref_age_ms: int | None  # None for main, which is never removed
    max_ref_age_source: str  # "ref", "history.expire.max-ref-age-ms", "default" or "main"
    removed: bool  # dropped: its snapshot is older than max_ref_age_ms (or missing)
    expire_older_than_ms: int | Unset = UNSET  # branches kept: the cutoff for their ancestors
    max_snapshot_age_ms: int | Unset = UNSET  # ... and the age it came from
    max_snapshot_age_source: str | Unset = UNSET  # "ref" or the cutoff's source
    min_snapshots_to_keep: int | Unset = UNSET
    min_snapshots_to_keep_source: str | Unset = UNSET  # "ref" or the default's source


@dataclass(kw_only=True)
class ExpireResult(CommandResult):
    """``icectl expire-snapshots``. Counts are derived from the lists, so they always agree.

    The order of the keys after ``skipped_metadata`` depends on how far the run got, see
    :meth:`to_json`.
    """

    view: ClassVar[str] = "expire_snapshots"

    table: str
    dry_run: bool
    expired_snapshots: list[int]
    removed_refs: list[str]
    retained_snapshot_count: int
    leftover_snapshots: list[int]  # expired by an earlier run, still on disk
    skipped_metadata: list[str]  # earlier metadata files not read as leftovers, and why
    would_write: list[str] | Unset = UNSET  # dry run
    would_delete: dict[str, list[str]] | Unset = UNSET  # dry run: paths per category
    metadata_location: str | Unset = UNSET  # committed
    commit_attempts: int | Unset = UNSET  # committed
    kept_external_files: list[str] | Unset = UNSET  # outside the table location: not deleted
    kept_shared_files: list[str] | Unset = UNSET  # reached by another table (shared_with): not deleted
    shared_with: list[str] | Unset = UNSET  # the tables that reach kept_shared_files
    deletes_refused: str | Unset = UNSET  # committed, but the deletions were refused
    already_gone: int | Unset = UNSET  # deletions done
    failures: list[Any] | Unset = UNSET  # deletions done
    deleted: dict[str, int] = field(default_factory=dict)  # count per category (0 when missing)
    cleanup_skipped: str | Unset = UNSET  # committed, but nothing deleted: why
    cutoff: ExpireCutoff | Unset = UNSET  # the policy applied (issue 16: after every earlier key)
    ref_policies: list[RefPolicy] | Unset = UNSET

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "view": self.view, "table": self.table, "dry_run": self.dry_run,
            "expired_snapshot_count": len(self.expired_snapshots), "expired_snapshots": self.expired_snapshots,
            "removed_refs": self.removed_refs, "retained_snapshot_count": self.retained_snapshot_count,
            "leftover_snapshots": self.leftover_snapshots, "skipped_metadata": self.skipped_metadata,
        }
        deleted = {f"deleted_{c}_count": self.deleted.get(c, 0) for c in EXPIRE_CATEGORIES}
        kept = ({} if isinstance(self.kept_external_files, Unset) else
                {"kept_external_files_count": len(self.kept_external_files),
                 "kept_external_files": self.kept_external_files})
        if isinstance(self.kept_shared_files, list):
            kept.update({"kept_shared_files_count": len(self.kept_shared_files),
                         "kept_shared_files": self.kept_shared_files, "shared_with": self.shared_with})
        policy = {k: plain(v) for k, v in (("cutoff", self.cutoff), ("ref_policies", self.ref_policies))
                  if v is not UNSET}
        if self.dry_run:  # the plan, then the counts it would delete, then what the fence keeps
            return {**doc, "would_write": self.would_write, "would_delete": self.would_delete, **deleted, **kept,
                    **policy}
        done = {k: v for k, v in (("metadata_location", self.metadata_location),
                                  ("commit_attempts", self.commit_attempts),
                                  ("deletes_refused", self.deletes_refused),
                                  ("already_gone", self.already_gone), ("failures", self.failures))
                if v is not UNSET}
        refused = {"deletes_refused": done.pop("deletes_refused")} if "deletes_refused" in done else {}
        outcome: dict[str, Any] = {k: done.pop(k) for k in ("already_gone", "failures") if k in done}
        skipped = {} if self.cleanup_skipped is UNSET else {"cleanup_skipped": self.cleanup_skipped}
        return {**doc, **done, **kept, **refused, **outcome, **deleted, **skipped, **policy}


# --------------------------------------------------------------------------- compact


@dataclass(kw_only=True)
class CompactGroup(Part):
    """One (partition spec, content) group of a compaction: skipped, or rewritten."""

    spec_id: int
    content: str  # data, deletes
    action: str  # rewrite, skip
    reason: str
    manifests_in: int
    bytes_in: int
    leaves_kept: int | Unset = UNSET  # v4
    root_files_in: int | Unset = UNSET  # v4
    live_entries: int | Unset = UNSET  # rewritten groups from here on
    deleted_entries_dropped: int | Unset = UNSET
    manifest_dvs_applied: int | Unset = UNSET  # v4
    dv_rows_dropped: int | Unset = UNSET  # v4
    sort_by: list[str] | Unset = UNSET
    manifests_out: int | Unset = UNSET
    estimated_bytes_out: int | Unset = UNSET  # planned, not written
    replaced: list[FileRef] | Unset = UNSET  # dry run
    flushed: list[str] | Unset = UNSET  # dry run, v4: root-level data files moved into leaves
    bytes_out: int | Unset = UNSET  # written
    written: list[WrittenFile] | Unset = UNSET  # written


@dataclass(kw_only=True)
class CompactResult(CommandResult):
    """``icectl compact``, of manifest lists (v1-v3) and of v4 roots and leaves (the v4-only keys)."""

    view: ClassVar[str] = "compact"

    table: str
    branch: str
    dry_run: bool
    format_version: int | Unset = UNSET  # v4 only
    base_snapshot_id: int | None
    target_size_bytes: int
    manifests_replaced: int
    manifests_created: int
    manifests_kept: int
    entries_processed: int
    root_files_flushed: int | Unset = UNSET  # v4
    manifest_dvs_applied: int | Unset = UNSET  # v4
    root_deleted_entries_dropped: int | Unset = UNSET  # v4
    groups: list[CompactGroup]
    would_write: list[PlannedWrite] | Unset = UNSET  # dry run
    would_delete: list[str] | Unset = UNSET  # dry run
    snapshot_id: int | Unset = UNSET  # committed from here on
    sequence_number: int | Unset = UNSET
    metadata_location: str | Unset = UNSET
    root_manifest: str | Unset = UNSET  # v4
    commit_attempts: int | Unset = UNSET
    reapplied_on: list[int] | Unset = UNSET
    replanned: bool | Unset = UNSET  # not a dry run: whether a concurrent commit made it plan again


# --------------------------------------------------------------------------- upgrade


@dataclass
class UpgradeBranch(Part):
    """A branch head and the new snapshot ``--to 4`` gives it (a root manifest over its manifests)."""

    branch: str
    head_snapshot_id: int
    new_snapshot_id: int
    sequence_number: int
    root_manifest: str | None
    manifests: int
    live_files: int
    first_row_id: int | None
    added_rows: int | None


@dataclass(kw_only=True)
class UpgradeResult(CommandResult):
    """``icectl upgrade``."""

    view: ClassVar[str] = "upgrade"

    table: str
    dry_run: bool
    from_version: int
    to_version: int
    branches: list[UpgradeBranch]  # --to 4 only; empty otherwise
    warning: str | Unset = UNSET  # --to 4 from an older version
    committed: bool | Unset = UNSET  # False when the table is at the version already
    would_write: list[str] | Unset = UNSET  # dry run
    would_delete: list[str] | Unset = UNSET  # dry run
    written: list[str] | Unset = UNSET  # committed from here on
    metadata_location: str | Unset = UNSET
    commit_attempts: int | Unset = UNSET
    seconds: float | Unset = UNSET


# --------------------------------------------------------------------------- add-files, remove-files


@dataclass
class AddedFile(Part):
    file_path: str
    partition: Any  # the partition tuple as the plan shows it
    record_count: int


@dataclass
class CreatedBranch(Part):
    """The branch add-files creates (``--create-branch``), starting at main's head."""

    name: str
    from_ref: str = field(metadata=json_key("from"))
    from_snapshot_id: int | None


@dataclass(kw_only=True)
class AddFilesResult(CommandResult):
    """``icectl add-files``."""

    view: ClassVar[str] = "add_files"

    table: str
    dry_run: bool
    branch: str
    spec_id: int
    added_data_files: int
    added_records: int
    added_files_size: int
    files: list[AddedFile]
    created_branch: CreatedBranch | Unset = UNSET
    name_mapping: str  # created, extended, unchanged (a dry run: "would be ...")
    layout: str | Unset = UNSET  # v4: "root" or "new leaf"
    would_write: list[str] | Unset = UNSET  # dry run
    would_delete: list[str] | Unset = UNSET  # dry run
    snapshot_id: int | Unset = UNSET  # committed from here on
    metadata_location: str | Unset = UNSET
    commit_attempts: int | Unset = UNSET
    written: list[str] | Unset = UNSET  # v4: the leaf (if any) and the root


@dataclass
class RemovedFile(Part):
    file_path: str
    content: int  # 0 data, 1 position deletes (a DV)
    record_count: int
    via: str  # "root DELETED entry" or "manifest DV on <leaf>"
    partition: dict[str, Any]  # partition field name -> human value


@dataclass(kw_only=True)
class RemoveFilesResult(CommandResult):
    """``icectl remove-files`` (v4 tables)."""

    view: ClassVar[str] = "remove_files"

    table: str
    dry_run: bool
    branch: str
    removed_data_files: int
    removed_records: int
    removed_delete_files: int
    files: list[RemovedFile]
    committed: bool | Unset = UNSET  # False: nothing matched; True: committed
    would_write: list[str] | Unset = UNSET  # dry run
    would_delete: list[str] | Unset = UNSET  # dry run
    snapshot_id: int | Unset = UNSET  # committed from here on
    metadata_location: str | Unset = UNSET
    commit_attempts: int | Unset = UNSET
    written: list[str | None] | Unset = UNSET


# --------------------------------------------------------------------------- create, namespace create


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
    metadata_location: str | Unset = UNSET  # created


# --------------------------------------------------------------------------- rows views' meta


@dataclass(kw_only=True)
class TreeMeta(TableViewMeta):
    """``inspect tree``: what the snapshot's metadata tree is rooted in, and its entries by kind."""

    kind: str | None  # "root", "manifest-list" or "manifests"
    root: str | None
    by_type_and_status: dict[str, int]


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
