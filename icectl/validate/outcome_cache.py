"""The outcome of checking one manifest, kept in the manifest cache so a second run need not check it again.

A data manifest's checks (:func:`~icectl.validate.manifest_rules.check_manifest`) read nothing but
its bytes, its manifest-list row as decoded, the list's path and the row's ordinal (in the findings'
names), the table metadata's schemas, specs and format version, and the enabled rules. The outcome
(every ``report`` call, in order, and the :class:`ManifestSummary` the per-snapshot rules use) is
stored under the store's identity of the manifest, in a cache kind named by a hash of all of that,
so a replaced manifest, another list row, a schema or spec change or another rule set misses.
Replaying the calls through the run's reporter gives the same findings in the same order (its
de-duplication sees the same calls).

Only what is sure to hold is cached: data manifests (delete entries read Puffin files and the
snapshots), tables up to format v3 without v4 roots (a root reads the entries' totals later),
never with ``--deep``, and only outcomes whose finding values are plain JSON (str, int, bool,
finite float, None, lists and str-keyed dicts of them), which round-trip exactly.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from icectl.spec.manifest import ManifestContent, ManifestFile, PartitionFieldSummary
from icectl.storage import FileIdentity
from icectl.table.manifest_cache import manifest_cache
from icectl.table.manifest_read import min_cached_bytes
from icectl.validate.context import Context, ManifestSummary, checker_fingerprint
from icectl.validate.rules import CATALOGUE, Reporter, Rule

# Bump when the stored layout changes. A change of the rules themselves needs no bump: the key holds
# context.checker_fingerprint(), a hash of the checking code's source.
RULES_VERSION = 1
KIND = f"validate-outcome/{RULES_VERSION}"

# Metadata keys that change with every commit and that no manifest check reads; everything else
# of the metadata JSON is part of the key.
_PER_COMMIT = frozenset({"snapshots", "snapshot-log", "metadata-log", "refs", "current-snapshot-id",
                         "last-updated-ms", "statistics", "partition-statistics", "last-sequence-number",
                         "next-row-id"})

MIN_ENTRIES = 32  # manifests listing fewer entries (and shorter than the read layer caches) are not kept

LISTED = object()  # in loaded calls: the listing's own name (the list's path, or its row's)

Call = tuple[str, str | None, str | None, str, dict[str, Any]]  # rule id, file, entry, message, values


class Recorder(Reporter):
    """The run's reporter, recording every call (enabled rule or not) made through it."""

    def __init__(self, inner: Reporter) -> None:
        super().__init__(inner.enabled)
        self.inner = inner
        self.calls: list[Call] = []

    def report(self, r: Rule, file: str | None, message: str, *, entry: str | None = None, **values: Any) -> None:
        self.calls.append((r.id, file, entry, message, values))
        self.inner.report(r, file, message, entry=entry, **values)


def _canon(v: Any) -> Any:
    """A JSON-able form of a list row's value that tells apart every value the rules could see."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return [type(v).__name__, [[f.name, _canon(getattr(v, f.name))] for f in dataclasses.fields(v)]]
    if isinstance(v, enum.Enum):
        return [type(v).__name__, v.name, _canon(v.value)]
    if isinstance(v, (bytes, bytearray)):
        return ["bytes", bytes(v).hex()]
    if isinstance(v, (list, tuple)):
        return [type(v).__name__, [_canon(x) for x in v]]
    if v is None or type(v) in (str, int, bool):
        return v
    return [type(v).__name__, repr(v)]


# A list row's repr names every field's value exactly (ints, str, bytes, enums, tuples of summaries)
# while every field of the row and its summaries is in its repr; else the slower canonical form.
_REPR_COMPLETE = all(f.repr for cls in (ManifestFile, PartitionFieldSummary) for f in dataclasses.fields(cls))


def _base(ctx: Context) -> str | None:
    """The hash of what every manifest check of this run reads besides its own inputs; None when
    outcomes are not cached in this run."""
    md = ctx.metadata
    if (ctx.deep or manifest_cache() is None or md.format_version > 3 or not isinstance(ctx.raw, dict)
            or any(s.root_manifest is not None for s in md.snapshots)):
        return None
    kept = {k: v for k, v in ctx.raw.items() if k not in _PER_COMMIT}
    text = json.dumps([KIND, checker_fingerprint(), sorted(ctx.reporter.enabled), kept], sort_keys=True,
                      default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def outcome_base(ctx: Context) -> str | None:
    """The hash of what every manifest check of this run reads besides its own inputs; None when
    nothing is cached in this run."""
    if ctx.outcome_base is False:
        ctx.outcome_base = _base(ctx)
    return ctx.outcome_base if isinstance(ctx.outcome_base, str) else None


def outcome_key(ctx: Context, list_path: str | None, m: ManifestFile, ordinal: int) -> str | None:
    """The key of this manifest's outcome in this run, or None when it is not to be cached."""
    base = outcome_base(ctx)
    if base is None or m.content != ManifestContent.DATA:
        return None
    # A check costs ~20 us per entry, a cache hit ~0.3 ms: manifests of a few entries are checked again.
    listed = sum(c or 0 for c in (m.added_files_count, m.existing_files_count, m.deleted_files_count))
    if listed < MIN_ENTRIES and m.manifest_length < min_cached_bytes():
        return None
    if list_path is None:
        return None
    text = base + (repr(m) if _REPR_COMPLETE else json.dumps(_canon(m)))
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(v: Any) -> bool:
    t = type(v)
    if v is None or t in (str, int, bool):
        return True
    if t is float:
        return math.isfinite(v)
    if t is list:
        return all(_plain(x) for x in v)
    if t is dict:
        return all(type(k) is str and _plain(x) for k, x in v.items())
    return False


_SCHEMA = pa.schema([("key", pa.string()), ("calls", pa.string()), ("entries", pa.int64()),
                     ("max_file_sequence_number", pa.int64()), ("max_file_sequence_entry", pa.string()),
                     ("inherited_rows", pa.int64()), ("live_data_files", pa.list_(pa.string())),
                     ("row_id_starts", pa.list_(pa.int64())),
                     ("row_id_ends", pa.list_(pa.int64()))])


def _marker(stored: list[Any]) -> Any:
    if type(stored) is not list or len(stored) > 1:
        raise ValueError("not a stored name")
    return stored[0] if stored else LISTED


def load(path: str, identity: FileIdentity | None, key: str) -> tuple[list[Call], dict[str, Any]] | None:
    """The stored outcome for exactly this version of the manifest and this key, or None."""
    cache = manifest_cache()
    if cache is None or identity is None or not identity.cacheable:
        return None
    table = cache.get(f"{KIND}/{key[:32]}", path, identity)
    if table is None or table.schema != _SCHEMA or table.num_rows != 1:
        return None
    row = table.to_pylist()[0]
    if row["key"] != key:
        return None
    try:
        calls = [(c[0], _marker(c[1]), _marker(c[2]), c[3], c[4]) for c in json.loads(row["calls"])]
    except (ValueError, TypeError, IndexError, KeyError):
        return None
    if not all(type(c[0]) is str and c[0] in CATALOGUE and type(c[3]) is str and type(c[4]) is dict for c in calls):
        return None
    return calls, row


def _strings(v: Any) -> Iterator[str]:
    if type(v) is str:
        yield v
    elif type(v) is list:
        for x in v:
            yield from _strings(x)
    elif type(v) is dict:
        for k, x in v.items():
            yield k
            yield from _strings(x)


def _encode(calls: list[Call], list_path: str, row_entry: str, manifest_path: str) -> str | None:
    """The calls as JSON, with the list's path and the row's name (the only things a check takes
    from where the manifest is listed) as markers (``[]``; any other value ``[value]``), so any
    listing of the manifest replays them; None when the list's path shows anywhere else, or a
    value would not round-trip exactly."""
    if not list_path or list_path in manifest_path or manifest_path in list_path:
        return None
    out = []
    for rule_id, file, entry, message, values in calls:
        if not _plain(values) or type(message) is not str or type(file) not in (str, type(None)) \
                or type(entry) not in (str, type(None)):
            return None
        f: list[Any] = [] if file == list_path else [file]
        e: list[Any] = [] if entry == row_entry else [entry]
        if any(list_path in x for x in _strings([f, e, message, values])):
            return None
        out.append([rule_id, f, e, message, values])
    return json.dumps(out)


def store(path: str, identity: FileIdentity | None, key: str, calls: list[Call], summary: ManifestSummary,
          list_path: str | None, ordinal: int) -> None:
    """Keep the outcome when it is sure to replay exactly (see the module's note)."""
    cache = manifest_cache()
    if cache is None or identity is None or not identity.cacheable or list_path is None:
        return
    if summary.delete_entries or summary.dv_targets or summary.position_delete_targets or summary.live_files:
        return
    encoded = _encode(calls, list_path, f"{list_path}#{ordinal}", path)
    if encoded is None:
        return
    row = {"key": key, "calls": encoded, "entries": summary.entries,
           "max_file_sequence_number": summary.max_file_sequence_number,
           "max_file_sequence_entry": summary.max_file_sequence_entry, "inherited_rows": summary.inherited_rows,
           "live_data_files": (summary.live_data_files if isinstance(summary.live_data_files, list)
                               else summary.live_data_files.to_pylist()),
           "row_id_starts": [s for s, _ in summary.explicit_row_ids],
           "row_id_ends": [e for _, e in summary.explicit_row_ids]}
    try:
        table = pa.Table.from_pylist([row], schema=_SCHEMA)
    except (pa.ArrowException, OverflowError):  # a sum beyond int64 (hostile counts): not kept
        return
    cache.put(f"{KIND}/{key[:32]}", path, identity, table)


def replay(ctx: Context, m: ManifestFile, calls: list[Call], row: dict[str, Any], list_path: str | None,
           ordinal: int) -> ManifestSummary:
    """Report the stored calls through the run's reporter, in order, named after this listing;
    the manifest's summary."""
    row_entry = f"{list_path}#{ordinal}"
    for rule_id, file, entry, message, values in calls:
        ctx.reporter.report(CATALOGUE[rule_id], list_path if file is LISTED else file, message,
                            entry=row_entry if entry is LISTED else entry, **values)
    return ManifestSummary(m, entries=row["entries"], max_file_sequence_number=row["max_file_sequence_number"],
                           max_file_sequence_entry=row["max_file_sequence_entry"],
                           live_data_files=row["live_data_files"],
                           inherited_rows=row["inherited_rows"],
                           explicit_row_ids=list(zip(row["row_id_starts"], row["row_id_ends"], strict=True)))
