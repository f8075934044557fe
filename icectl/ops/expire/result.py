"""The results of this family's commands:
their ``--json`` documents, one dataclass each (the rules are :mod:`icectl.results`'s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from icectl.results import FLAT, UNSET, CommandResult, Committed, DryRun, Part, Unset, plain
from icectl.table.reach import CATEGORIES

# The file categories of an expiry: Spark's expire_snapshots output names (deleted_<category>_count)
# in its order, which is also Java's delete order.
EXPIRE_CATEGORIES = CATEGORIES


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
    terminal_report: ClassVar[str] = "icectl.cli.output.summaries:expire_report"
    one_line: ClassVar[str] = "icectl.cli.output.summaries:expire_line"

    table: str
    dry_run: bool
    expired_snapshots: list[int]
    removed_refs: list[str]
    retained_snapshot_count: int
    leftover_snapshots: list[int]  # expired by an earlier run, still on disk
    skipped_metadata: list[str]  # earlier metadata files not read as leftovers, and why
    dry: DryRun[list[str], dict[str, list[str]]] = field(default_factory=DryRun, metadata=FLAT)  # dry run
    commit: Committed = field(default_factory=Committed, metadata=FLAT)
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
            return {**doc, "would_write": self.dry.would_write, "would_delete": self.dry.would_delete, **deleted,
                    **kept, **policy}
        done = {k: v for k, v in (("metadata_location", self.commit.metadata_location),
                                  ("commit_attempts", self.commit.commit_attempts),
                                  ("deletes_refused", self.deletes_refused),
                                  ("already_gone", self.already_gone), ("failures", self.failures))
                if v is not UNSET}
        refused = {"deletes_refused": done.pop("deletes_refused")} if "deletes_refused" in done else {}
        outcome: dict[str, Any] = {k: done.pop(k) for k in ("already_gone", "failures") if k in done}
        skipped = {} if self.cleanup_skipped is UNSET else {"cleanup_skipped": self.cleanup_skipped}
        return {**doc, **done, **kept, **refused, **outcome, **deleted, **skipped, **policy}
