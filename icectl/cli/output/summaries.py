"""Terminal summaries that fit their job (issue 16): validate's findings grouped by rule, what an
expiry did and under which policy, and the one line per table of an ``--all`` run.

Registered in :mod:`icectl.cli.output.terminal_views` by name; only imported when such a result is
printed on a terminal (``--json`` never comes here).
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from icectl.cli.output.human import relative_path
from icectl.cli.output.render import rows_table
from icectl.humanize import fmt_bytes
from icectl.ops.compact.result import CompactResult
from icectl.ops.expire.result import EXPIRE_CATEGORIES, ExpireCutoff, ExpireResult, RefPolicy
from icectl.ops.orphans.result import RemoveOrphanFilesResult
from icectl.ops.rewrite_data_files.result import RewriteDataFilesResult
from icectl.ops.rewrite_position_delete_files.result import (
    ConvertEqualityDeletesResult,
    RewritePositionDeleteFilesResult,
)
from icectl.results import UNSET, RowsResult, TableFailure, Unset
from icectl.spec.durations import human_duration
from icectl.validate import rule_summaries

if TYPE_CHECKING:
    from rich.console import RenderableType

# --------------------------------------------------------------------------- shared words


def when(ms: int) -> str:
    """``2026-11-20 10:00 UTC``: minutes are what a retention cutoff is read in."""
    ms = max(-62135596800000, min(ms, 253402300799999))
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``12 files``, ``1,234 entries`` (``many``: the plural when not word + s)."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {many or word + 's'}"


def _grid() -> Any:
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="bold")
    grid.add_column(overflow="fold")
    return grid


def _group(*parts: RenderableType) -> RenderableType:
    from rich.console import Group

    return Group(*parts)


def _failure_line(r: TableFailure) -> str:
    return f"{r.table}: failed: {r.error}"


# --------------------------------------------------------------------------- validate


def validate_report(result: RowsResult) -> RenderableType:
    """validate on a terminal: one row per rule (severity, count, first example), errors first, and
    the total; ``--verbose`` every finding as a row (the full view)."""
    from rich.table import Table
    from rich.text import Text

    meta = result.meta
    rows = list(result.rows)
    result.rows = rows  # read once: kept for anything that reads the rows after this
    summary = getattr(meta, "summary", "") or plural(len(rows), "finding")
    notes = [Text(f"note: {n}") for n in (getattr(meta, "notes", None) or [])]
    if getattr(meta, "verbose", False):
        return _group(rows_table(result), *notes, Text(summary))
    groups = rule_summaries(rows)
    if not groups:
        return _group(Text(result.title), *notes, Text(f"no findings: {summary}"))
    table = Table(title=result.title, title_justify="left", box=None, pad_edge=False)
    table.add_column("severity", no_wrap=True)
    table.add_column("rule", no_wrap=True)
    table.add_column("count", justify="right", no_wrap=True)
    table.add_column("first example", overflow="fold")
    location = getattr(meta, "location", None)
    for g in groups:
        shown = g.first.entry or g.first.file
        where = relative_path(shown, location) if shown else shown
        table.add_row(g.severity, g.rule, f"{g.count:,}", f"{where}: {g.first.message}" if where else g.first.message)
    more = "; --verbose lists every finding" if len(rows) > len(groups) else ""
    return _group(table, *notes, Text(f"{summary}; {plural(len(groups), 'rule')} reported{more}"))


# --------------------------------------------------------------------------- expire-snapshots

MAX_REFS_SHOWN = 8


def _source(source: str) -> str:
    return {"default": "the default", "ref": "the ref's own"}.get(source, source)


def cutoff_words(c: ExpireCutoff) -> str:
    return (f"{when(c.expire_older_than_ms)} ({human_duration(max(c.max_snapshot_age_ms, 0))} before now, "
            f"from {_source(c.source)})")


def _ref_words(p: RefPolicy) -> str:
    if p.removed:
        age = human_duration(p.snapshot_age_ms) if p.snapshot_age_ms is not None else "its snapshot is missing"
        return (f"{p.type}, removed: snapshot {p.snapshot_id} is {age} old, max-ref-age "
                f"{human_duration(p.max_ref_age_ms)} ({_source(p.max_ref_age_source)})")
    bits = [p.type]
    if not isinstance(p.max_snapshot_age_ms, Unset):
        bits.append(f"max-snapshot-age {human_duration(max(int(p.max_snapshot_age_ms), 0))} "
                    f"({_source(str(p.max_snapshot_age_source))})")
    if p.min_snapshots_to_keep is not UNSET:
        bits.append(f"min-snapshots-to-keep {p.min_snapshots_to_keep} ({_source(str(p.min_snapshots_to_keep_source))})")
    if p.max_ref_age_ms is None:
        bits.append("never removed (main)")
    else:
        bits.append(f"max-ref-age {human_duration(p.max_ref_age_ms)} ({_source(p.max_ref_age_source)})")
    return ", ".join(bits)


def _deleted_words(r: ExpireResult) -> str:
    counts = {c: r.deleted.get(c, 0) for c in EXPIRE_CATEGORIES}
    total = sum(counts.values())
    parts = [plural(n, c.replace("_", " ")[:-1]) for c, n in counts.items() if n]
    return plural(total, "file") + (f": {', '.join(parts)}" if parts else "")


def _expire_state(r: ExpireResult) -> str:
    """What happened, in the words of one run (dry run: what would)."""
    would = "would " if r.dry_run else ""
    if r.dry_run:
        return f"{would}expire {plural(len(r.expired_snapshots), 'snapshot')}"
    if r.commit.metadata_location is UNSET:
        return "nothing to expire"
    return f"expired {plural(len(r.expired_snapshots), 'snapshot')}"


def expire_report(r: ExpireResult) -> RenderableType:
    """expire-snapshots on a terminal: the outcome, the cutoff and the refs' policies, what was (or
    would be) deleted by category; the paths are in ``--json``."""
    from rich.text import Text

    grid = _grid()
    grid.add_row("snapshots", f"{_expire_state(r)}, {r.retained_snapshot_count:,} retained"
                 + (f" ({', '.join(map(str, r.expired_snapshots[:3]))}{', …' if len(r.expired_snapshots) > 3 else ''}"
                    " expired)" if r.expired_snapshots and not r.dry_run else ""))
    if isinstance(r.cutoff, ExpireCutoff):
        grid.add_row("cutoff", cutoff_words(r.cutoff))
        grid.add_row("retain", f"at least the last {plural(r.cutoff.min_snapshots_to_keep, 'snapshot')} of each "
                               f"branch (from {_source(r.cutoff.min_snapshots_to_keep_source)})")
    policies = list(r.ref_policies or [])
    # removed refs first (they are news), then the rest in the metadata's order, a screenful at most
    shown = sorted(policies, key=lambda p: not p.removed)[:MAX_REFS_SHOWN]
    for p in shown:
        grid.add_row(f"ref {p.name}", _ref_words(p))
    if len(policies) > len(shown):
        grid.add_row("refs", f"{len(policies) - len(shown):,} more (--json lists every ref's policy)")
    if r.removed_refs:
        grid.add_row("refs removed" if not r.dry_run else "refs to remove", ", ".join(r.removed_refs))
    if r.leftover_snapshots:
        grid.add_row("leftovers", f"{plural(len(r.leftover_snapshots), 'snapshot')} expired earlier, files still on "
                                  "disk")
    if r.dry_run or r.commit.metadata_location is not UNSET:
        grid.add_row("would delete" if r.dry_run else "deleted", _deleted_words(r))
    if r.kept_external_files:
        grid.add_row("kept", f"{plural(len(r.kept_external_files), 'file')} outside the table location "
                             "(--allow-external-deletes deletes them)")
    for key, value in (("already gone", r.already_gone), ("refused", r.deletes_refused),
                       ("cleanup skipped", r.cleanup_skipped)):
        if value not in (UNSET, 0, None, ""):
            grid.add_row(key, str(value))
    if r.failures:
        grid.add_row("failures", f"{len(r.failures)} (first: {r.failures[0]})")
    if r.commit.metadata_location is not UNSET:
        grid.add_row("metadata", str(r.commit.metadata_location))
    for note in r.skipped_metadata:
        grid.add_row("note", note)
    return _group(Text(r.title or f"expire-snapshots {r.table}"), grid)


def expire_line(r: ExpireResult | TableFailure) -> str:
    """``db.t1  expired 3 snapshots, deleted 12 files (cutoff 2026-11-20 10:00 UTC, retain last 1)``."""
    if isinstance(r, TableFailure):
        return _failure_line(r)
    c = r.cutoff if isinstance(r.cutoff, ExpireCutoff) else None
    policy = f"cutoff {when(c.expire_older_than_ms)}, retain last {c.min_snapshots_to_keep}" if c else ""
    files = sum(r.deleted.values())
    if not r.expired_snapshots and not files:
        kept = plural(r.retained_snapshot_count, "snapshot") + " kept"
        return f"{r.table}  nothing to expire ({kept}{'; ' + policy if policy else ''})"
    verb = "would delete" if r.dry_run else "deleted"
    line = f"{r.table}  {_expire_state(r)}, {verb} {plural(files, 'file')}" + (f" ({policy})" if policy else "")
    extra = []
    if r.removed_refs:
        extra.append(f"{'would remove' if r.dry_run else 'removed'} refs {', '.join(r.removed_refs)}")
    if r.kept_external_files:
        extra.append(f"kept {plural(len(r.kept_external_files), 'external file')}")
    if r.failures:
        extra.append(f"{plural(len(r.failures), 'deletion')} failed")
    for value in (r.deletes_refused, r.cleanup_skipped):
        if value:
            extra.append(str(value))
    return line + "".join(f"; {e}" for e in extra)


# --------------------------------------------------------------------------- compact


def compact_line(r: CompactResult | TableFailure) -> str:
    """``db.t  compacted 12 manifests into 2 (3 kept, 1,234 entries)``."""
    if isinstance(r, TableFailure):
        return _failure_line(r)
    v4 = [f"{plural(int(n), w)} {done}" for n, w, done in ((r.root_files_flushed, "root file", "flushed"),
                                                           (r.manifest_dvs_applied, "manifest DV", "applied"))
          if n is not UNSET and n]
    if not r.manifests_replaced and not v4:
        return (f"{r.table}  nothing to compact on {r.branch} ({plural(r.manifests_kept, 'manifest')} kept)")
    verb = "would compact" if r.dry_run else "compacted"
    return (f"{r.table}  {verb} {plural(r.manifests_replaced, 'manifest')} into {r.manifests_created:,} "
            f"({r.manifests_kept:,} kept, {plural(r.entries_processed, 'entry', 'entries')}"
            + "".join(f", {w}" for w in v4) + ")")


# --------------------------------------------------------------------------- rewrite-data-files


def rewrite_data_files_line(r: RewriteDataFilesResult | TableFailure) -> str:
    """``db.t  rewrote 120 data files (14.2 MiB) into 7 in 7 groups``."""
    if isinstance(r, TableFailure):
        return _failure_line(r)
    if not r.groups:
        return f"{r.table}  nothing to rewrite on {r.branch}"
    verb = "would rewrite" if r.dry_run else "rewrote"
    out = (f"{r.table}  {verb} {plural(r.rewritten_data_files_count, 'data file')} "
           f"({fmt_bytes(r.rewritten_bytes_count)}) into {r.added_data_files_count:,} "
           f"in {plural(len(r.groups), 'group')}")
    if r.removed_delete_files_count:
        out += f", {plural(r.removed_delete_files_count, 'deletion vector')} removed"
    return out


# --------------------------------------------------------------------------- rewrite-position-delete-files


def rewrite_position_delete_files_line(r: RewritePositionDeleteFilesResult | TableFailure) -> str:
    """``db.t  rewrote 40 position delete files (1.2 MiB) into 12 in 3 groups, 7 dangling deletes dropped``."""
    if isinstance(r, TableFailure):
        return _failure_line(r)
    if not r.groups:
        return f"{r.table}  nothing to rewrite on {r.branch}" + (f" ({r.reason})" if r.reason else "")
    verb = "would rewrite" if r.dry_run else "rewrote"
    out = (f"{r.table}  {verb} {plural(r.rewritten_delete_files_count, 'position delete file')} "
           f"({fmt_bytes(r.rewritten_bytes_count)}) into {r.added_delete_files_count:,} "
           f"in {plural(len(r.groups), 'group')}")
    if r.dangling_deletes_count:
        out += f", {plural(r.dangling_deletes_count, 'dangling delete')} dropped"
    return out


def convert_equality_deletes_line(r: ConvertEqualityDeletesResult | TableFailure) -> str:
    """``db.t  converted 3 equality delete files (4.1 KiB) into 12 position delete files: 57 rows in 12
    of 40 data files``."""
    if isinstance(r, TableFailure):
        return _failure_line(r)
    if not r.converted_equality_delete_files_count:
        return f"{r.table}  no equality deletes on {r.branch}" + (f" ({r.reason})" if r.reason else "")
    verb = "would convert" if r.dry_run else "converted"
    kind = "deletion vector" if r.format_version >= 3 else "position delete file"
    return (f"{r.table}  {verb} {plural(r.converted_equality_delete_files_count, 'equality delete file')} "
            f"({fmt_bytes(r.converted_equality_delete_bytes)}) into {plural(r.added_delete_files_count, kind)}: "
            f"{plural(r.deleted_rows_count, 'row')} in {len(r.files):,} of {plural(r.data_files_count, 'data file')}")


# --------------------------------------------------------------------------- remove-orphan-files


def orphan_line(r: RemoveOrphanFilesResult | TableFailure) -> str:
    """``db.t  deleted 3 orphan files (120 listed, 5 younger than 2026-11-22 10:00 UTC)``."""
    if isinstance(r, TableFailure):
        return _failure_line(r)
    context = (f"{plural(r.listed_file_count, 'file')} listed, {r.too_young_count:,} not older than "
               f"{when(r.older_than_ms)}")
    if not r.orphan_file_count:
        return f"{r.table}  no orphan files ({context})"
    if r.dry_run:
        head = f"would delete {plural(r.orphan_file_count, 'orphan file')}"
    else:
        head = f"deleted {plural(int(r.deleted_count or 0), 'orphan file')} of {r.orphan_file_count:,}"
    extra = []
    if r.kept_external_files:
        extra.append(f"kept {plural(len(r.kept_external_files), 'external file')}")
    if r.failures:
        extra.append(f"{plural(len(r.failures), 'deletion')} failed")
    return f"{r.table}  {head} ({context})" + "".join(f"; {e}" for e in extra)
