"""How ``validate`` fetches one listed manifest: the stored outcome of checking it, or its bytes (and,
through the manifest cache, its entries). The same functions run in the driver's threads (the local
engine) and in Spark tasks (:mod:`.engine_read`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icectl.errors import IcectlError, NotFoundError
from icectl.spec.manifest import ManifestEntry, ManifestFile
from icectl.storage import FileIdentity
from icectl.table import manifest_read
from icectl.table.manifest_cache import manifest_cache
from icectl.validate import manifest_list_rules, manifest_rules, outcome_cache
from icectl.validate.context import Context, ManifestSummary
from icectl.validate.entry_columns import Screened, screen_manifests


@dataclass
class Fetched:
    data: bytes = b""
    entries: list[ManifestEntry] | None = None
    identity: FileIdentity | None = None  # of exactly the version ``data`` holds (None: unknown)
    stored: tuple[list[outcome_cache.Call], dict[str, Any]] | None = None  # the cached outcome
    screened: Screened | None = None  # ``data``'s entries found clean by the column screen


def identity_of(ctx: Context, path: str) -> FileIdentity | None:
    try:
        return ctx.io.identity(path)
    except (IcectlError, OSError):  # the read says what is wrong
        return None


def fetch(ctx: Context, m: ManifestFile, key: str | None) -> Fetched:
    """With an outcome key: the stored outcome, or the bytes (decoded by the rules, so the outcome
    is that of this version alone) and their identity, taken before and after the read."""
    if key is None:
        return Fetched(*fetch_manifest(ctx, m))
    path = m.manifest_path
    before = identity_of(ctx, path)
    stored = outcome_cache.load(path, before, key)
    if stored is not None:
        return Fetched(identity=before, stored=stored)
    data = ctx.io.read(path)
    after = identity_of(ctx, path) if before is not None else None
    return Fetched(data, identity=before if after == before else None)


def fetch_manifest(ctx: Context, m: ManifestFile) -> tuple[bytes, list[ManifestEntry] | None]:
    """A manifest's bytes (its header's keys are checked as written) and, unless ``--deep`` (which
    reads the files themselves), its entries through the manifest cache: decoded once, ever, while
    the store's identity of the file stays the same. A manifest the read layer cannot give is decoded
    from the bytes by the rules themselves, which report why it does not read."""
    data = ctx.io.read(m.manifest_path)
    if ctx.deep or manifest_cache() is None or ctx.metadata.spec_by_id(m.partition_spec_id) is None \
            or m.manifest_length < manifest_read.min_cached_bytes():
        # without a cache (or for a manifest the read layer would read uncached, a second time)
        # the rules decode the bytes themselves: faster than via Arrow
        return data, None
    try:
        entries = manifest_read.manifest_entries(ctx.io, manifest_rules.as_written(m),
                                                 partition_type=ctx.metadata.partition_type(m.partition_spec_id),
                                                 format_version=ctx.metadata.format_version)
    except (IcectlError, ValueError):
        return data, None
    return data, entries


def fetch_screened(ctx: Context, batch: list[tuple[ManifestFile, str | None]]) -> list[Fetched | NotFoundError]:
    """:func:`fetch` of a batch of manifests, their bytes screened together (:mod:`.entry_columns`).
    A screened manifest needs neither its identity nor a stored outcome (it is not stored, see
    :func:`check_fetched`); the others are fetched again as :func:`fetch` does, one by one."""
    got: list[Fetched | NotFoundError] = []
    for m, _key in batch:
        try:
            got.append(Fetched(ctx.io.read(m.manifest_path)))
        except NotFoundError as e:  # gone since its size was taken
            got.append(e)
    todo = [(i, f) for i, f in enumerate(got) if isinstance(f, Fetched) and f.data]
    screened = screen_manifests(ctx, [(batch[i][0], f.data) for i, f in todo])
    for (i, f), s in zip(todo, screened, strict=True):
        f.screened = s
        m, key = batch[i]
        if s is None and key is not None:
            try:
                got[i] = fetch(ctx, m, key)
            except NotFoundError as e:
                got[i] = e
    return got


def check_fetched(ctx: Context, list_path: str | None, m: ManifestFile, ordinal: int, key: str | None,
                  got: Fetched) -> ManifestSummary | None:
    """Check a fetched manifest (or replay its stored outcome) through ``ctx.reporter``; a new outcome
    is stored under ``key``. None: the manifest does not decode (reported).

    A screened manifest's outcome is not stored: the screen checks a manifest in ~0.2 ms, and
    storing an outcome costs ~1 ms (a new file in the cache folder); at 20,000 manifests the
    stores took 23 s of a 28 s run."""
    if got.stored is not None:
        return outcome_cache.replay(ctx, m, *got.stored, list_path, ordinal)
    if key is None or got.screened is not None:
        return manifest_rules.check_manifest(ctx, list_path, m, ordinal, got.data, entries=got.entries,
                                             screened=got.screened)
    reporter = ctx.reporter
    ctx.reporter = recorder = outcome_cache.Recorder(reporter)
    try:
        summary = manifest_rules.check_manifest(ctx, list_path, m, ordinal, got.data)
    finally:
        ctx.reporter = reporter
    if summary is not None:
        outcome_cache.store(m.manifest_path, got.identity, key, recorder.calls, summary, list_path, ordinal)
    return summary


def report_missing(ctx: Context, list_path: str | None, ordinal: int, m: ManifestFile) -> None:
    """A manifest gone between its size being taken and its read."""
    ctx.reporter.report(manifest_list_rules.MANIFEST_EXISTS, list_path, f"manifest {m.manifest_path} is missing",
                        entry=f"{list_path}#{ordinal}", manifest_path=m.manifest_path)
