"""Which position delete files to rewrite, in which groups: Iceberg 1.10's
``BinPackRewritePositionDeletePlanner`` (with ``SizeBasedFileRewritePlanner``), option for option.

- The candidates are the live position delete files of the branch head (in v3 with their
  deletion vectors, which count by their blob size), grouped by partition (spec and partition values: Java groups by
  the table's unified partition type, and its writer then refuses a group holding two specs).
- A file is rewritten when it is smaller than ``min-file-size-bytes`` (75% of the target) or
  larger than ``max-file-size-bytes`` (180%); the target is ``target-file-size-bytes``, default
  the table's ``write.delete.target-file-size-bytes`` (64 MB). ``rewrite-all`` takes every file.
- Candidates are packed in scan order into groups of at most ``max-file-group-size-bytes``
  (``ListPacker`` with a look-back of 1); a group is kept when it has at least
  ``min-input-files`` files (and more than one), more than the target in more than one file, or
  more than the maximum size; ``rewrite-all`` keeps every group.
- The new files of a group get the largest data sequence number of the files it rewrites
  (``RewritePositionDeletesGroup.maxRewrittenDataSequenceNumber``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icectl.errors import UsageError
from icectl.ops.rewrite_data_files.plan import RewriteOptions, Sizes
from icectl.spec.metadata import TableMetadata
from icectl.table.scan_tasks import ScanFile

TARGET_FILE_SIZE = "write.delete.target-file-size-bytes"
TARGET_FILE_SIZE_DEFAULT = 64 * 1024 * 1024
MIN_INPUT_FILES_DEFAULT = 5
MAX_FILE_GROUP_SIZE_DEFAULT = 100 * 1024 * 1024 * 1024


@dataclass(frozen=True)
class PositionDeleteOptions:
    """The procedure's options, by Spark's names with ``-`` as ``_``; None: Spark's default."""

    target_file_size_bytes: int | None = None
    min_file_size_bytes: int | None = None
    max_file_size_bytes: int | None = None
    min_input_files: int = MIN_INPUT_FILES_DEFAULT
    rewrite_all: bool = False
    max_file_group_size_bytes: int = MAX_FILE_GROUP_SIZE_DEFAULT
    branch: str = "main"

    def check(self) -> None:
        """Java's argument checks that need no table (one line each, exit 2)."""
        if self.target_file_size_bytes is not None and self.target_file_size_bytes <= 0:
            raise UsageError(f"'target-file-size-bytes' is set to {self.target_file_size_bytes} but must be > 0")
        if self.min_file_size_bytes is not None and self.min_file_size_bytes < 0:
            raise UsageError(f"'min-file-size-bytes' is set to {self.min_file_size_bytes} but must be >= 0")
        if self.min_input_files <= 0:
            raise UsageError(f"'min-input-files' is set to {self.min_input_files} but must be > 0")
        if self.max_file_group_size_bytes <= 0:
            raise UsageError(f"'max-file-group-size-bytes' is set to {self.max_file_group_size_bytes} but must be > 0")


def sizes_of(options: PositionDeleteOptions, md: TableMetadata) -> Sizes:
    """Java's ``sizeThresholds`` (and the output-file arithmetic of ``SizeBasedFileRewritePlanner``,
    shared with rewrite-data-files) with the delete target size as the default."""
    target = options.target_file_size_bytes
    if target is None:
        text = md.properties.get(TARGET_FILE_SIZE, str(TARGET_FILE_SIZE_DEFAULT))
        try:
            target = int(text)
        except ValueError:
            raise UsageError(f"table property {TARGET_FILE_SIZE}={text} is not a number",
                             hint="pass --target-file-size-bytes, or fix the property") from None
    return Sizes.of(RewriteOptions(target_file_size_bytes=target, min_file_size_bytes=options.min_file_size_bytes,
                                   max_file_size_bytes=options.max_file_size_bytes), md)


@dataclass
class DeleteGroup:
    """Position delete files of one partition rewritten together."""

    index: int  # Java's global index, from 1
    partition_index: int  # from 1 within the partition
    spec_id: int
    partition: tuple[Any, ...]
    files: list[ScanFile] = field(default_factory=list)
    expected_output_files: int = 1

    @property
    def input_size(self) -> int:
        return sum(length(f) for f in self.files)

    @property
    def records(self) -> int:
        return sum(f.file.record_count for f in self.files)

    @property
    def data_sequence_number(self) -> int:
        """Java's ``maxRewrittenDataSequenceNumber``: the new files' data sequence number."""
        return max(f.data_sequence_number for f in self.files)


def length(d: ScanFile) -> int:
    """Java's scan task length of a delete file (``ScanTaskUtil.contentSizeInBytes``): a deletion
    vector's blob size, else the file size."""
    if d.file.is_dv and d.file.content_size_in_bytes is not None:
        return d.file.content_size_in_bytes
    return d.file.file_size_in_bytes


def _pack(files: list[ScanFile], limit: int) -> list[list[ScanFile]]:
    """``BinPacking.ListPacker(limit, lookback=1, largestBinFirst=false)``."""
    bins: list[list[ScanFile]] = []
    weight = 0
    for f in files:
        size = length(f)
        if bins and weight + size <= limit:
            bins[-1].append(f)
            weight += size
        else:
            bins.append([f])
            weight = size
    return bins


def plan_groups(md: TableMetadata, deletes: list[ScanFile], options: PositionDeleteOptions) -> list[DeleteGroup]:
    """The groups to rewrite, in plan order (Java's default ``rewrite-job-order`` none)."""
    sizes = sizes_of(options, md)
    by_partition: dict[tuple[int, tuple[Any, ...]], list[ScanFile]] = {}
    for d in deletes:
        by_partition.setdefault(d.partition_key, []).append(d)

    def candidate(d: ScanFile) -> bool:
        return length(d) < sizes.min or length(d) > sizes.max

    def worth_it(group: list[ScanFile]) -> bool:
        size = sum(length(d) for d in group)
        return ((len(group) > 1 and len(group) >= options.min_input_files)
                or (len(group) > 1 and size > sizes.target)
                or size > sizes.max)

    groups: list[DeleteGroup] = []
    for (spec_id, partition), files in by_partition.items():
        chosen = files if options.rewrite_all else [d for d in files if candidate(d)]
        packed = _pack(chosen, options.max_file_group_size_bytes)
        kept = packed if options.rewrite_all else [g for g in packed if worth_it(g)]
        for i, g in enumerate(kept, start=1):
            group = DeleteGroup(len(groups) + 1, i, spec_id, partition, g)
            group.expected_output_files = sizes.expected_output_files(group.input_size)
            groups.append(group)
    return groups
