"""``icectl validate``: check a table against every invariant of the spec, with named rules.

:func:`validate_table` checks a loaded table; :func:`validate_address` also checks metadata
JSON that is too broken to load (missing required fields, unsupported format version) and is
what the CLI calls. Rules live in one module per area; :data:`CATALOGUE` lists them all.
"""

from __future__ import annotations

import gzip
import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from icectl import progress
from icectl.catalog import find_table
from icectl.config import Config
from icectl.engine import Engine, active
from icectl.errors import CorruptInputError, ExitCode, IcectlError, NotFoundError
from icectl.results import NOT_JSON, UNSET, Part, RowsResult, Unset
from icectl.spec.manifest import ManifestContent, ManifestFile
from icectl.spec.metadata import TableMetadata
from icectl.spec.snapshots import Snapshot
from icectl.storage import FileIdentity, FileIO
from icectl.table import Table
from icectl.threads import ordered_map
from icectl.validate import (
    delete_rules,
    engine_read,
    entry_columns,
    file_rules,
    manifest_list_rules,
    manifest_rules,
    metadata_rules,
    outcome_cache,
    v4_rules,
)
from icectl.validate.context import Context
from icectl.validate.engine_read import Remote
from icectl.validate.fetch import Fetched, check_fetched, fetch, fetch_screened, identity_of, report_missing
from icectl.validate.list_reuse import CheckedList, ListReuse, StoredList, load_list, store_list
from icectl.validate.rules import (
    AREAS,
    CATALOGUE,
    Finding,
    Reporter,
    Rule,
    Severity,
    catalogue_markdown,
    catalogue_rows,
    select_rules,
)

__all__ = ["CATALOGUE", "Finding", "FirstFinding", "Rule", "RuleCount", "RuleSummary", "Severity", "ValidateSummary",
           "ValidationResult", "catalogue_markdown", "list_rules", "rule_summaries", "validate_address",
           "validate_table"]

COLUMNS = ["severity", "rule", "file", "entry", "message", "values"]


@dataclass
class ValidationResult:
    """Findings and what was read; :meth:`to_result` makes the CLI's rows."""

    table: str
    findings: list[Finding]
    snapshots: int = 0
    manifests: int = 0
    entries: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = ()  # what was not checked, and why
    location: str | None = None  # the table's location (None: metadata too broken to load)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def errors(self) -> int:
        return self.count(Severity.ERROR)

    @property
    def warnings(self) -> int:
        return self.count(Severity.WARNING)

    @property
    def summary(self) -> str:
        return (f"{self.errors} error(s), {self.warnings} warning(s) in {self.snapshots} snapshot(s), "
                f"{self.manifests} manifest(s), {self.entries} entries")

    @property
    def exit_code(self) -> int:
        return ExitCode.FINDINGS if self.errors else ExitCode.OK

    def to_result(self, *, verbose: bool = False) -> RowsResult:
        """The CLI's view: the findings as rows (errors first), the counts and the findings per rule
        before them; ``verbose``: a terminal shows every row, not one per rule."""
        order = {Severity.ERROR: 0, Severity.WARNING: 1}
        rows = [f.to_row() for f in sorted(self.findings, key=lambda f: (order[f.severity], f.rule))]
        meta = ValidateSummary(table=self.table, errors=self.errors, warnings=self.warnings,
                               snapshots=self.snapshots, manifests=self.manifests, entries=self.entries,
                               summary=self.summary, notes=list(self.notes) if self.notes else UNSET,
                               by_rule=rule_summaries(rows), verbose=verbose, location=self.location)
        return RowsResult("validate", f"validate {self.table}", COLUMNS, rows, meta, exit_code=self.exit_code,
                          terminal_report="icectl.cli.output.summaries:validate_report")


@dataclass
class FirstFinding(Part):
    """Where a rule was first broken (of the findings in their printed order)."""

    file: str | None
    entry: str | None
    message: str


@dataclass
class RuleSummary(Part):
    """One rule's findings summed up: ``validate --json``'s ``by_rule``, the terminal's grouped view."""

    rule: str
    severity: str
    count: int
    first: FirstFinding


def rule_summaries(rows: Iterable[dict[str, Any]]) -> list[RuleSummary]:
    """One entry per rule that found something, in the rows' order (errors first, then by rule id)."""
    out: dict[str, RuleSummary] = {}
    for row in rows:
        known = out.get(row["rule"])
        if known is None:
            out[row["rule"]] = RuleSummary(row["rule"], row["severity"], 1,
                                           FirstFinding(row["file"], row["entry"], row["message"]))
        else:
            known.count += 1
    return list(out.values())


@dataclass(kw_only=True)
class ValidateSummary(Part):
    """The keys of ``icectl validate --json`` before its ``rows`` (one per finding)."""

    table: str
    errors: int
    warnings: int
    snapshots: int
    manifests: int
    entries: int
    summary: str  # the counts in words
    notes: list[str] | Unset = UNSET  # what was not checked, and why (only when something was not)
    by_rule: list[RuleSummary] | Unset = UNSET  # issue 16: count and first finding per rule
    verbose: bool = field(default=False, metadata=NOT_JSON)  # a terminal lists every finding
    location: str | None = field(default=None, metadata=NOT_JSON)  # a terminal shows paths relative to it


@dataclass
class RuleCount(Part):
    """The key of ``icectl validate --list-rules --json`` before its ``rows`` (one per rule)."""

    rules: int


def list_rules() -> RowsResult:
    rows = sorted(catalogue_rows(), key=lambda r: AREAS.index(CATALOGUE[r["rule"]].area))
    return RowsResult("validate_rules", "validate rules", ["rule", "severity", "summary", "spec_section"], rows,
                      RuleCount(len(rows)))


def _raw_json(io: FileIO, location: str) -> Any:
    data = io.read(location)
    try:
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        return json.loads(data)
    except (OSError, EOFError, ValueError, RecursionError) as e:  # RecursionError: nested too deeply
        raise CorruptInputError(f"table metadata is not valid (gzip) JSON: {e}", path=location) from None


def validate_address(address: str, config: Config, io: FileIO, *, all_snapshots: bool = False, deep: bool = False,
                     rules: Iterable[str] | None = None, skip: Iterable[str] | None = None,
                     engine: Engine | None = None) -> ValidationResult:
    """Validate the table at any accepted address; metadata too broken to load is reported, not raised.
    ``engine``: where the manifests are checked (None: :func:`icectl.engine.active`)."""
    enabled = select_rules(rules, skip)
    found = find_table(address, config, io)
    where, io = found.address, found.io
    location = where.metadata_location
    raw = _raw_json(io, location)
    reporter = Reporter(enabled)
    metadata_rules.check_raw(reporter, raw, location)
    v4_rules.check_raw_snapshots(reporter, raw, location)
    try:
        metadata = TableMetadata.from_json(raw)
    except IcectlError as e:
        if any(f.severity == Severity.ERROR for f in reporter.findings):  # the findings say what is wrong
            return ValidationResult(where.identifier, reporter.findings)
        e.path = e.path or location
        raise
    table = Table(address=where, metadata=metadata, io=io, catalog=found.catalog)
    return _run(table, reporter, raw, all_snapshots=all_snapshots, deep=deep, raw_checked=True, engine=engine)


def validate_table(table: Table, *, all_snapshots: bool = False, deep: bool = False,
                   rules: Iterable[str] | None = None, skip: Iterable[str] | None = None,
                   engine: Engine | None = None) -> ValidationResult:
    """Check ``table`` against every enabled rule: its metadata, then the current snapshot's (or, with
    ``all_snapshots``, every snapshot's) manifest lists and manifests; ``deep`` also opens the files.
    ``engine``: where the manifests are checked (None: :func:`icectl.engine.active`)."""
    reporter = Reporter(select_rules(rules, skip))
    raw = _raw_json(table.io, table.metadata_location)
    return _run(table, reporter, raw, all_snapshots=all_snapshots, deep=deep, raw_checked=False, engine=engine)


def _run(table: Table, reporter: Reporter, raw: Any, *, all_snapshots: bool, deep: bool,
         raw_checked: bool, engine: Engine | None) -> ValidationResult:
    t0 = time.perf_counter()
    md = table.metadata
    ctx = Context(md, table.io, table.metadata_location, reporter, deep=deep, raw=raw)
    if not raw_checked:
        metadata_rules.check_raw(reporter, raw, table.metadata_location)
        v4_rules.check_raw_snapshots(reporter, raw, table.metadata_location)
    metadata_rules.check_metadata(ctx)
    if all_snapshots:
        snapshots = list(md.snapshots)
    else:
        current = md.current_snapshot()
        snapshots = [current] if current is not None else []
    listed, v4 = _check_snapshots(ctx, snapshots, engine or active())
    entries = sum(s.entries for s in ctx.summaries.values()) + v4.entries
    if deep:
        # A leaf's rows under a manifest DV are not live in that root: v4 snapshots bring their own list.
        file_rules.check_files(ctx, itertools.chain(
            (f for p, s in ctx.summaries.items() if p in listed for f in s.live_files), v4.files.values()))
        file_rules.check_statistics(ctx)
    return ValidationResult(table.identifier, reporter.findings, location=md.location, snapshots=len(snapshots),
                            manifests=len(ctx.summaries) + v4.roots, entries=entries,
                            seconds=time.perf_counter() - t0)


def _file_sequence_bounds(ctx: Context, lowest: dict[str, manifest_list_rules.Listing]) -> None:
    """Entries' file sequence numbers against the lowest sequence number of the snapshots listing them
    (v4 leaves: of the roots listing them)."""
    if ctx.metadata.format_version < 2:
        return
    for path, listing in lowest.items():
        s = ctx.summaries.get(path)
        if s is not None and s.max_file_sequence_number is not None \
                and s.max_file_sequence_number > listing.sequence_number:
            snap = listing.snapshot
            ctx.reporter.report(manifest_rules.SEQUENCE_ORDER, path,
                                f"file sequence number {s.max_file_sequence_number} is above snapshot "
                                f"{snap.snapshot_id}'s sequence number {snap.sequence_number}",
                                entry=s.max_file_sequence_entry, file_sequence_number=s.max_file_sequence_number,
                                snapshot_sequence_number=snap.sequence_number)


_Planned = tuple[str | None, int, ManifestFile, str | None, "engine_read.Checked | None"]


@dataclass
class _ListRead:
    """A snapshot's manifest list (v4: root) as fetched: its bytes (or the error met), or what the
    manifest cache holds for this version of it; ``identity``: of exactly the bytes read."""

    data: bytes | NotFoundError | None = None
    identity: FileIdentity | None = None
    stored: StoredList | None = None


def _fetch_lists(ctx: Context, snapshots: list[Snapshot]) -> Iterator[tuple[Snapshot, _ListRead]]:
    """Each snapshot with its manifest list's (v4: root's) bytes, fetched a few snapshots ahead in threads
    (:func:`icectl.threads.ordered_map`: a bounded read-ahead, memory stays flat however big the table)."""

    lists = ctx.lists  # made here, not in the threads
    cached = outcome_cache.outcome_base(ctx) is not None  # the same runs keep lists

    def fetch(path: str, is_list: bool) -> _ListRead:
        before = None
        if is_list and cached:
            before = identity_of(ctx, path)
            stored = load_list(path, before, ctx.metadata.format_version)
            if stored is not None:
                return _ListRead(stored=stored)
        try:
            data = ctx.io.read(path)
        except NotFoundError as e:  # a finding, reported by read_list
            return _ListRead(e)
        if is_list:
            lists.prepare(data)  # decompressed here, in this thread
            if cached and before is not None:
                return _ListRead(data, before if identity_of(ctx, path) == before else None)
        return _ListRead(data)

    def one(snap: Snapshot) -> tuple[Snapshot, _ListRead]:
        path = snap.root_manifest if _is_v4(snap) else snap.manifest_list
        if path and not _is_v4(snap) and manifest_list_rules.is_relative(ctx, path):
            path = None  # never resolved against the working directory: read_list reports it
        return snap, (fetch(path, not _is_v4(snap)) if path else _ListRead())

    yield from ordered_map(one, snapshots)


def _read_now(ctx: Context, path: str) -> _ListRead:
    """A list whose stored rows name an earlier list not checked in this run: read it here."""
    before = identity_of(ctx, path)
    try:
        data = ctx.io.read(path)
    except NotFoundError as e:
        return _ListRead(e)
    return _ListRead(data, before if before is not None and identity_of(ctx, path) == before else None)


def _is_v4(snap: Snapshot) -> bool:
    return snap.root_manifest is not None  # with a manifest list too: v4.snapshot-manifest-key says so


def _check_snapshots(ctx: Context, snapshots: list[Snapshot], engine: Engine) -> tuple[set[str], v4_rules.V4State]:
    """Snapshot by snapshot: its list, the manifests no earlier snapshot listed, then the per-snapshot rules.

    Only per-manifest summaries are kept, never whole manifest lists, so memory stays small with
    thousands of snapshots; each manifest is read once however many snapshots list it (a v4 root's
    leaves too, whether a manifest list or a root named them first). Returns the manifests that
    manifest lists name, and what the v4 snapshots left for the ``--deep`` checks.
    """
    checked: set[str] = set()
    lowest: dict[str, manifest_list_rules.Listing] = {}
    v4 = v4_rules.V4State()
    reuse = ListReuse()
    remote = engine_read.start(ctx, snapshots, engine)  # None on an engine that runs in this process
    with progress.task("checking snapshots", len(snapshots)) as advance:
        try:
            _walk(ctx, snapshots, advance, checked, lowest, v4, reuse, remote)
        finally:
            if remote is not None:
                remote.close()
    manifest_list_rules.check_sequence_bounds(ctx, lowest)
    _file_sequence_bounds(ctx, lowest)
    _file_sequence_bounds(ctx, v4.lowest)
    return checked, v4


def _walk(ctx: Context, snapshots: list[Snapshot], advance: Callable[[int], None],
          checked: set[str], lowest: dict[str, manifest_list_rules.Listing], v4: v4_rules.V4State, reuse: ListReuse,
          remote: Remote | None) -> None:
    """The loop of :func:`_check_snapshots`; ``remote``: the engine's checks of the manifests, taken
    where this loop would check each itself (None: the local engine, which checks them here)."""
    for snap, got in _fetch_lists(ctx, snapshots):
        advance(1)
        if _is_v4(snap):
            v4_rules.check_root_snapshot(ctx, v4, snap, got.data)
            continue
        manifests = reuse.rebuild(got.stored) if got.stored is not None else None
        if got.stored is not None:
            if manifests is not None:
                got = _ListRead(identity=got.stored.identity)
            elif snap.manifest_list is not None:
                got = _read_now(ctx, snap.manifest_list)
        if manifests is None:
            manifests = manifest_list_rules.read_list(ctx, snap, got.data)
            if manifests is None:
                continue
        k, earlier = reuse.split(manifests)
        fresh = manifests[:k] if earlier is not None else manifests  # the rest: checked (list_reuse)
        new: list[tuple[str | None, int, ManifestFile]] = []
        for i, m in enumerate(fresh):
            if m.manifest_path not in checked:
                checked.add(m.manifest_path)
                if m.manifest_path in ctx.summaries:  # a v4 root's leaf, read already: this row against it
                    _recheck_row(ctx, snap.manifest_list, m, i)
                    continue
                readable = remote.row(ctx, snap.manifest_list, i, m) if remote is not None else None
                if readable is None:
                    readable = manifest_list_rules.check_manifest_file(ctx, snap.manifest_list, m, i)
                if readable:
                    new.append((snap.manifest_list, i, m))
        _read_manifests(ctx, new, remote)
        _per_list_rules(ctx, snap, manifests, fresh, earlier, lowest)
        reuse.remember(snap, manifests, k, earlier, snap.manifest_list, got.identity)
        if got.data is not None and snap.manifest_list is not None:  # read and decoded in this run
            store_list(snap.manifest_list, got.identity, ctx.metadata.format_version, fresh, earlier)


def _per_list_rules(ctx: Context, snap: Snapshot, manifests: list[ManifestFile], fresh: list[ManifestFile],
                    earlier: CheckedList | None, lowest: dict[str, manifest_list_rules.Listing]) -> None:
    """The rules over one snapshot's whole list; over its ``fresh`` rows alone where the rest, an
    ``earlier`` list's very rows, are known to find nothing (see :mod:`.list_reuse`)."""
    if earlier is None:
        fresh = manifests
    md = ctx.metadata
    v3_ranges = md.format_version >= 3 and snap.first_row_id is not None
    whole = earlier is None or v3_ranges or snap.snapshot_id in earlier.added_ids
    manifest_list_rules.check_snapshot_list(ctx, snap, manifests if whole else fresh)
    below = earlier is not None and snap.sequence_number < earlier.sequence_number
    manifest_list_rules.note_listings(snap, manifests if earlier is None or below else fresh, lowest)
    if earlier is None or earlier.has_deletes or any(m.content == ManifestContent.DELETES for m in fresh):
        delete_rules.check_snapshot_deletes(ctx, snap, manifests)


def _recheck_row(ctx: Context, list_path: str | None, m: ManifestFile, ordinal: int) -> None:
    s = ctx.summaries[m.manifest_path]
    if manifest_list_rules.check_manifest_file(ctx, list_path, m, ordinal) and s.totals is not None:
        ptype = ctx.metadata.partition_type(m.partition_spec_id)
        manifest_list_rules.check_against_entries(ctx, list_path, m, ordinal, s.totals, ptype, None)


def _read_manifests(ctx: Context, todo: list[tuple[str | None, int, ManifestFile]],
                    remote: Remote | None = None) -> None:
    """Check each manifest of ``todo``; reads run ahead in threads, checks in this one.
    A manifest whose outcome the cache holds for this very version and context is not checked
    again: its stored findings are reported in their order (see :mod:`.outcome_cache`). A manifest
    the engine checked (``remote``) has its findings replayed here, in the same place. Without an
    engine, manifests are read in batches and their entries screened in columns where the native
    decoder runs (:mod:`.entry_columns`)."""
    if remote is None and todo and entry_columns.usable(ctx):
        fetched = _screened_reads(ctx, todo)
    else:
        fetched = ordered_map(lambda p: _read_one(ctx, p), _planned(ctx, todo, remote))
    for (list_path, i, m, key, _done), got in fetched:
        if isinstance(got, engine_read.Checked):
            summary = engine_read.outcome(ctx, got, list_path, i, m)
        elif isinstance(got, NotFoundError):
            report_missing(ctx, list_path, i, m)
            continue
        else:
            summary = check_fetched(ctx, list_path, m, i, key, got)
        if summary is not None:  # None: unreadable, reported; the rest goes on
            ctx.summaries[m.manifest_path] = summary


def _planned(ctx: Context, todo: list[tuple[str | None, int, ManifestFile]], remote: Remote | None
             ) -> Iterator[_Planned]:
    """On this thread, as the map takes them: the engine's results in order, or the outcome keys."""
    for list_path, i, m in todo:
        done = remote.manifest(m.manifest_path) if remote is not None else None
        key = outcome_cache.outcome_key(ctx, list_path, m, i) if done is None else None
        yield list_path, i, m, key, done


def _read_one(ctx: Context, p: _Planned) -> tuple[_Planned, Fetched | engine_read.Checked | NotFoundError]:
    if p[4] is not None:
        return p, p[4]
    try:
        return p, fetch(ctx, p[2], p[3])
    except NotFoundError as e:  # gone since its size was taken
        return p, e


def _screened_reads(ctx: Context, todo: list[tuple[str | None, int, ManifestFile]]
                    ) -> Iterator[tuple[_Planned, Fetched | engine_read.Checked | NotFoundError]]:
    """The reads of ``todo`` in batches of up to 512 manifests or 16 MB, each screened in one
    native read, in order."""

    def batches() -> Iterator[list[_Planned]]:
        batch: list[_Planned] = []
        size = 0
        for p in _planned(ctx, todo, None):
            batch.append(p)
            size += max(0, p[2].manifest_length or 0)
            if len(batch) >= 512 or size >= 16 << 20:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    def read(batch: list[_Planned]) -> tuple[list[_Planned], list[Fetched | NotFoundError]]:
        return batch, fetch_screened(ctx, [(p[2], p[3]) for p in batch])

    for batch, got in ordered_map(read, batches()):
        yield from zip(batch, got, strict=True)
