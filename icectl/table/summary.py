"""Snapshot summaries with Iceberg's keys (Java's SnapshotSummary; spec Appendix F).

Metric keys are written only when non-zero; ``total-*`` keys carry the branch head's totals
forward (added minus removed) and start from zero on a branch's first snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from icectl import __version__
from icectl.spec.manifest import DataFile, DataFileContent
from icectl.spec.metadata import TableMetadata

# (total key, added key, removed key)
TOTALS = (
    ("total-records", "added-records", "deleted-records"),
    ("total-files-size", "added-files-size", "removed-files-size"),
    ("total-data-files", "added-data-files", "deleted-data-files"),
    ("total-delete-files", "added-delete-files", "removed-delete-files"),
    ("total-position-deletes", "added-position-deletes", "removed-position-deletes"),
    ("total-equality-deletes", "added-equality-deletes", "removed-equality-deletes"),
)
_COUNT = re.compile(r"[+-]?[0-9]+")  # what Java's Long.parseLong reads (ASCII digits)
ENGINE_KEYS = {"engine-name": "icectl", "engine-version": __version__}


@dataclass
class SummaryBuilder:
    """Counts added and removed files like Java's SnapshotSummary.Builder."""

    metrics: dict[str, int] = field(default_factory=dict)
    partitions: set[str] = field(default_factory=set)

    def _add(self, key: str, n: int) -> None:
        self.metrics[key] = self.metrics.get(key, 0) + n

    def copy(self) -> SummaryBuilder:
        return SummaryBuilder(dict(self.metrics), set(self.partitions))

    def added_file(self, f: DataFile, partition_key: str = "") -> None:
        self._file(f, "added", partition_key)

    def removed_file(self, f: DataFile, partition_key: str = "") -> None:
        self._file(f, "removed", partition_key)

    def _file(self, f: DataFile, kind: str, partition_key: str) -> None:
        self.partitions.add(partition_key)
        added = kind == "added"
        # Java counts a DV's blob size, not the whole Puffin file.
        size = f.content_size_in_bytes if f.is_dv and f.content_size_in_bytes is not None else f.file_size_in_bytes
        self._add("added-files-size" if added else "removed-files-size", size)
        if f.content == DataFileContent.DATA:
            self._add("added-data-files" if added else "deleted-data-files", 1)
            self._add("added-records" if added else "deleted-records", f.record_count)
            return
        self._add("added-delete-files" if added else "removed-delete-files", 1)
        if f.content == DataFileContent.EQUALITY_DELETES:
            self._add("added-equality-delete-files" if added else "removed-equality-delete-files", 1)
            self._add("added-equality-deletes" if added else "removed-equality-deletes", f.record_count)
        else:
            if f.is_dv:
                self._add("added-dvs" if added else "removed-dvs", 1)
            else:
                self._add("added-position-delete-files" if added else "removed-position-delete-files", 1)
            self._add("added-position-deletes" if added else "removed-position-deletes", f.record_count)

    def build(self, operation: str, parent_summary: dict[str, str] | None,
              extra: dict[str, str] | None = None) -> dict[str, str]:
        out: dict[str, str] = {"operation": operation}
        out.update({k: str(v) for k, v in self.metrics.items() if v > 0})
        if self.partitions:
            out["changed-partition-count"] = str(len(self.partitions))
        out.update(carried_totals(parent_summary, self.metrics))
        out.update(extra or {})
        out.update(ENGINE_KEYS)
        return out


def carried_totals(parent_summary: dict[str, str] | None, metrics: dict[str, int]) -> dict[str, str]:
    """``total-*`` from the parent's totals; a branch's first snapshot starts from zero."""
    out: dict[str, str] = {}
    for total, added, removed in TOTALS:
        if parent_summary is None:
            base: int | None = 0
        else:
            raw = parent_summary.get(total)
            base = int(raw) if raw is not None and _COUNT.fullmatch(raw) else None
        if base is None or base < 0:
            continue  # Java drops a total it cannot carry (not a number, or negative)
        value = base + metrics.get(added, 0) - metrics.get(removed, 0)
        if value >= 0:
            out[total] = str(value)
    return out


def partition_key(md: TableMetadata, spec_id: int, partition: tuple[object, ...] | None) -> str:
    """A file's partition as the summary's changed partitions count it (its spec's partition path)."""
    s = md.spec_by_id(spec_id)
    return s.partition_path(partition or (), md.schema()) if s is not None and partition else ""


def partition_keys(paths: Iterable[str]) -> set[str]:
    return set(paths)
