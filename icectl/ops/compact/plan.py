"""Planning of `icectl compact`: which manifests to rewrite, and how their entries are rolled.

Pure: no storage. Manifests of one snapshot are grouped by (partition spec, content); a group is
rewritten only when that reduces its manifest count or splits an oversized manifest. Its live
entries are clustered by partition value (``--sort-by`` fields first) and cut into bins of about
the target size, estimated from the bytes per entry of a sample encoded as the writer will.

Later layouts (v4 root and leaf manifests) plan per group the same way; only the writing differs.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from icectl.codec.manifest_writer import ManifestWriteResult, write_manifest
from icectl.config import parse_size as config_parse_size
from icectl.errors import CorruptInputError, UsageError
from icectl.spec.manifest import (
    DataFile,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
    impossible_values,
)
from icectl.spec.metadata import TableMetadata
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.properties import MANIFEST_TARGET_SIZE_BYTES
from icectl.spec.schema import StructType
from icectl.spec.snapshots import MAIN_BRANCH

if TYPE_CHECKING:
    import pyarrow as pa

# A group counts as compact when it has no more manifests than its bytes need at this fraction of
# the target: manifests rolled at the target come out a little under it, and must not be redone.
COMPACT_FILL = 0.9
SPLIT_FACTOR = 2  # a single manifest is split only when more than twice the target
SAMPLE_ENTRIES = 500  # entries encoded to measure bytes per entry
CONTENTS = {"data": (ManifestContent.DATA,), "deletes": (ManifestContent.DELETES,),
            "all": (ManifestContent.DATA, ManifestContent.DELETES)}

def parse_size(text: str) -> int:
    """Bytes from ``8388608``, ``8MiB``, ``512KiB``, ``1.5MB`` (:func:`icectl.config.parse_size`'s units)."""
    try:
        size = config_parse_size(text)
    except ValueError:
        raise UsageError(f"--target-size {text!r} is not a size (8388608, 8MiB, 512KiB, 1.5MB)") from None
    if size < 1024:
        raise UsageError(f"--target-size {text!r} is below 1 KiB; a manifest's header alone is larger")
    return size


def table_target_size(md: TableMetadata) -> int:
    return MANIFEST_TARGET_SIZE_BYTES.parse(md.properties)


@dataclass(frozen=True)
class CompactOptions:
    """What the command line asked for; None means: the table decides."""

    spec_id: int | None = None
    content: str = "all"  # data | deletes | all
    min_manifests: int | None = None
    target_size: int | None = None
    sort_by: tuple[str, ...] = ()
    branch: str = MAIN_BRANCH

    def check(self) -> None:
        if self.content not in CONTENTS:
            raise UsageError(f"--content must be data, deletes or all, not {self.content!r}")
        if self.min_manifests is not None and self.min_manifests < 1:
            raise UsageError("--min-manifests must be at least 1")


@dataclass
class Bin:
    """One manifest to write: clustered live entries, and its estimated size. A plan made over the
    Arrow form (:mod:`icectl.ops.compact.columns`) holds the bin's rows instead of its entries."""

    entries: list[ManifestEntry]
    estimated_bytes: int
    rows: pa.Table | None = None  # a slice of the group's clustered rows (``entries`` is then empty)

    @property
    def size(self) -> int:
        """How many entries the bin holds."""
        return self.rows.num_rows if self.rows is not None else len(self.entries)


@dataclass
class GroupPlan:
    """The manifests of one (spec, content) pair and what becomes of them."""

    spec_id: int
    content: ManifestContent
    manifests: list[ManifestFile]
    rewrite: bool
    reason: str
    sort_by: tuple[str, ...] = ()
    bins: list[Bin] = field(default_factory=list)
    live_entries: int = 0
    deleted_entries: int = 0  # DELETED entries of the replaced manifests: dropped
    live: list[ManifestEntry] = field(default_factory=list)  # as read: what the new manifests must hold
    # planned over the Arrow form: the live rows instead of ``live`` (clustered once planned)
    rows: pa.Table | None = None
    live_per_manifest: dict[str, int] = field(default_factory=dict)

    @property
    def content_name(self) -> str:
        return "data" if self.content == ManifestContent.DATA else "deletes"

    @property
    def bytes_in(self) -> int:
        return sum(m.manifest_length for m in self.manifests)


def group_manifests(manifests: Iterable[ManifestFile],
                    options: CompactOptions) -> dict[tuple[int, int], list[ManifestFile]]:
    """Manifests by (spec id, content), in manifest-list order, as the options select them."""
    contents = CONTENTS[options.content]
    groups: dict[tuple[int, int], list[ManifestFile]] = {}
    for m in manifests:
        if m.content not in contents or (options.spec_id is not None and m.partition_spec_id != options.spec_id):
            continue
        groups.setdefault((m.partition_spec_id, int(m.content)), []).append(m)
    return groups


def decide(manifests: Sequence[ManifestFile], target: int, min_manifests: int | None,
           header: int) -> tuple[bool, str]:
    """Whether rewriting a group improves it, judged from the manifest list alone (no manifest read).

    ``header`` is the size of an empty manifest of the group: merging saves one per manifest
    merged away, which dominates when manifests hold a few entries each.
    """
    count = len(manifests)
    total = sum(m.manifest_length for m in manifests)
    if min_manifests is not None and count < min_manifests:
        return False, f"{count} manifest(s), fewer than --min-manifests {min_manifests}"
    splittable = [m for m in manifests if m.manifest_length > SPLIT_FACTOR * target
                  and (m.added_files_count or 0) + (m.existing_files_count or 0) != 1]
    if splittable:
        largest = max(m.manifest_length for m in splittable)
        return True, f"a manifest of {largest} bytes is over {SPLIT_FACTOR}x the target size"
    if count == 1:
        return False, "one manifest, under the target size"
    content = max(0, total - count * header)
    room = COMPACT_FILL * (target - header)
    needed = max(1, math.ceil(content / room)) if room > 0 else count
    if count <= needed:
        return False, f"already compact: {count} manifests for {total} bytes"
    return True, f"{count} manifests of {total} bytes; about {needed} at the target size"


def value_key(v: Any) -> tuple[int, Any]:
    """How clustering orders one partition value: nulls first, NaN last."""
    if v is None:
        return (0, 0)  # nulls first
    if isinstance(v, float) and math.isnan(v):
        return (2, 0)
    return (1, v)


def sort_fields(spec: PartitionSpec, sort_by: Sequence[str]) -> tuple[list[int], tuple[str, ...]]:
    """Positions of the partition tuple to sort by: the ``sort_by`` fields the spec has, then the rest."""
    names = [f.name for f in spec.fields]
    chosen = [names.index(n) for n in sort_by if n in names]
    return chosen + [i for i in range(len(names)) if i not in chosen], tuple(names[i] for i in chosen)


def cluster(entries: list[ManifestEntry], positions: Sequence[int]) -> list[ManifestEntry]:
    """Entries ordered by partition value (the given tuple positions first), then sequence number
    and path, so that each output manifest covers a narrow range of partitions."""
    def key(e: ManifestEntry) -> tuple[Any, ...]:
        part = e.data_file.partition or ()
        return (tuple(value_key(part[i]) for i in positions), e.sequence_number or 0, e.data_file.file_path,
                e.data_file.content_offset or 0)
    return sorted(entries, key=key)


def refuse_impossible(f: DataFile, single_valued: Container[int], where: str) -> None:
    """Refuse to copy an entry whose values no writer can have recorded (negative sizes, counts
    beyond the record count: :func:`icectl.spec.manifest.impossible_values`); ``where`` names the
    manifest and the entry's ordinal."""
    problems = impossible_values(f, single_valued)
    if problems:
        raise CorruptInputError(f"entry {where} for {f.file_path}: {'; '.join(problems)}; compact would copy it "
                                "into the new snapshot", hint="nothing was written; 'icectl validate' lists every "
                                "problem")


def refuse_uncopyable(md: TableMetadata, e: ManifestEntry, single_valued: Container[int], manifest_path: str,
                      ordinal: int) -> None:
    """The checks on an entry a rewrite copies (the ``ordinal``-th of its manifest): values no writer
    records (:func:`refuse_impossible`), and (v2+) a live entry without a data sequence number."""
    refuse_impossible(e.data_file, single_valued, f"{manifest_path}#{ordinal}")
    if md.format_version >= 2 and e.sequence_number is None:
        raise CorruptInputError(f"{e.status.name} entry for {e.data_file.file_path} has no data sequence "
                                "number; it cannot be rewritten", path=manifest_path)


@dataclass(frozen=True)
class ManifestShape:
    """What a manifest of a group is written with (also used to measure entry sizes)."""

    md: TableMetadata
    spec: PartitionSpec
    partition_type: StructType
    content: ManifestContent
    snapshot_id: int

    def write(self, entries: Iterable[ManifestEntry]) -> ManifestWriteResult:
        return write_manifest(entries, schema=self.md.schema(), spec=self.spec, partition_type=self.partition_type,
                              format_version=self.md.format_version, content=self.content,
                              snapshot_id=self.snapshot_id)

    def encode(self, entries: Iterable[ManifestEntry]) -> bytes:
        return self.write(entries).data


def roll(entries: list[ManifestEntry], shape: ManifestShape, target: int) -> tuple[list[Bin], int]:
    """Cut clustered entries into manifests of about ``target`` bytes (the last one smaller).

    Bytes per entry are measured on a sample encoded with the real writer (deflate over a large
    block compresses far better than the tiny manifests being merged, so their sizes mislead).
    Returns the bins and the entries per full bin.
    """
    if not entries:
        return [], 1
    header = len(shape.encode([]))
    sample = entries[:SAMPLE_ENTRIES]
    per_entry = max(1.0, (len(shape.encode(sample)) - header) / len(sample))
    capacity = max(1, int((target - header) / per_entry))
    bins = []
    for start in range(0, len(entries), capacity):
        chunk = entries[start:start + capacity]
        bins.append(Bin(chunk, header + int(per_entry * len(chunk))))
    return bins, capacity


def improves(group: GroupPlan, capacity: int) -> bool:
    """After rolling: fewer manifests than before, or a manifest split that holds too many entries
    (a one-entry manifest over the target cannot be split: rewriting it again changes nothing)."""
    return len(group.bins) < len(group.manifests) or any(
        n > SPLIT_FACTOR * capacity for n in group.live_per_manifest.values())


def check_sort_by(md: TableMetadata, spec_ids: Iterable[int], sort_by: Sequence[str]) -> None:
    """Each ``--sort-by`` name must be a partition field of at least one spec being compacted."""
    known: set[str] = set()
    for sid in spec_ids:
        spec = md.spec_by_id(sid)
        if spec is not None:
            known.update(f.name for f in spec.fields)
    unknown = [n for n in sort_by if n not in known]
    if unknown:
        raise UsageError(f"--sort-by {unknown[0]!r} is not a partition field of the specs being compacted "
                         f"({', '.join(sorted(known)) or 'unpartitioned'})")


