"""Which data files to rewrite, in which groups: Iceberg 1.10's ``BinPackRewriteFilePlanner``
(with ``SizeBasedFileRewritePlanner``), option for option.

- A file is a candidate when it is smaller than ``min-file-size-bytes`` (75% of the target) or
  larger than ``max-file-size-bytes`` (180%), when at least ``delete-file-threshold`` delete files
  apply to it, or when file-scoped deletes remove at least ``delete-ratio-threshold`` (30%) of its
  rows; ``rewrite-all`` takes every file.
- Candidates are grouped by partition (a file of another partition spec than the table's default
  goes to the group of the empty partition, as Java's ``groupByPartition`` does, and is
  re-partitioned by the default spec when written), then packed in scan order into groups of at
  most ``max-file-group-size-bytes`` (Java's ``ListPacker`` with a look-back of 1).
- A group is rewritten when it has at least ``min-input-files`` files (and more than one), more
  than the target size in more than one file, more than ``max-file-size-bytes``, or a file with
  too many deletes; ``rewrite-all`` keeps every group.
- Its output file count is Java's ``expectedOutputFiles``: the remainder becomes a file of its own
  only when it is larger than the minimum size or when spreading it would make files more than
  10% over the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icectl.errors import UsageError
from icectl.spec.expressions import might_match, parse_filter
from icectl.spec.metadata import TableMetadata
from icectl.spec.sorting import SortOrder
from icectl.table.scan_tasks import FileScanTask

TARGET_FILE_SIZE = "write.target-file-size-bytes"
TARGET_FILE_SIZE_DEFAULT = 512 * 1024 * 1024
MIN_FILE_SIZE_RATIO = 0.75
MAX_FILE_SIZE_RATIO = 1.80
MIN_INPUT_FILES_DEFAULT = 5
MAX_FILE_GROUP_SIZE_DEFAULT = 100 * 1024 * 1024 * 1024
DELETE_FILE_THRESHOLD_DEFAULT = 2**31 - 1  # Integer.MAX_VALUE: off
DELETE_RATIO_THRESHOLD_DEFAULT = 0.3
MAX_COMMITS_DEFAULT = 10  # partial-progress.max-commits
STRATEGIES = ("binpack", "sort")


@dataclass(frozen=True)
class RewriteOptions:
    """The procedure's options, by Spark's names with ``-`` as ``_``; None: Spark's default."""

    target_file_size_bytes: int | None = None
    min_file_size_bytes: int | None = None
    max_file_size_bytes: int | None = None
    min_input_files: int = MIN_INPUT_FILES_DEFAULT
    rewrite_all: bool = False
    max_file_group_size_bytes: int = MAX_FILE_GROUP_SIZE_DEFAULT
    delete_file_threshold: int = DELETE_FILE_THRESHOLD_DEFAULT
    delete_ratio_threshold: float = DELETE_RATIO_THRESHOLD_DEFAULT
    use_starting_sequence_number: bool = True
    partial_progress: bool = False
    max_commits: int = MAX_COMMITS_DEFAULT
    max_failed_commits: int | None = None  # None: max_commits, as Java
    where: str | None = None  # Spark's where: only files that might hold a matching row
    strategy: str = "binpack"
    sort_order: SortOrder | None = None  # strategy sort: None is the table's sort order
    zorder: tuple[str, ...] = ()  # strategy sort with sort_order zorder(...): its columns
    branch: str = "main"

    def check(self) -> None:
        """Java's argument checks that need no table (one line each, exit 2)."""
        if self.strategy not in STRATEGIES:
            raise UsageError(f"--strategy {self.strategy}: the strategies are {', '.join(STRATEGIES)}",
                             hint="z-order is --strategy sort --sort-order 'zorder(a, b)', as in Spark")
        if self.strategy == "binpack" and (self.sort_order is not None or self.zorder):
            raise UsageError("a sort order goes with --strategy sort", hint="add --strategy sort")
        if self.target_file_size_bytes is not None and self.target_file_size_bytes <= 0:
            raise UsageError(f"'target-file-size-bytes' is set to {self.target_file_size_bytes} but must be > 0")
        if self.min_file_size_bytes is not None and self.min_file_size_bytes < 0:
            raise UsageError(f"'min-file-size-bytes' is set to {self.min_file_size_bytes} but must be >= 0")
        if self.min_input_files <= 0:
            raise UsageError(f"'min-input-files' is set to {self.min_input_files} but must be > 0")
        if self.max_file_group_size_bytes <= 0:
            raise UsageError(f"'max-file-group-size-bytes' is set to {self.max_file_group_size_bytes} but must be > 0")
        if self.delete_file_threshold < 0:
            raise UsageError(f"'delete-file-threshold' is set to {self.delete_file_threshold} but must be >= 0")
        if self.max_commits <= 0:
            raise UsageError(f"'partial-progress.max-commits' is set to {self.max_commits} but must be > 0")
        if self.max_failed_commits is not None and self.max_failed_commits < 0:
            raise UsageError(f"'partial-progress.max-failed-commits' is set to {self.max_failed_commits} "
                             "but must be >= 0")
        if not 0 < self.delete_ratio_threshold <= 1:
            raise UsageError(f"'delete-ratio-threshold' is set to {self.delete_ratio_threshold} "
                             "but must be > 0 and <= 1")


    @property
    def failed_commits_allowed(self) -> int:
        return self.max_failed_commits if self.max_failed_commits is not None else self.max_commits


@dataclass(frozen=True)
class Sizes:
    target: int
    min: int
    max: int

    @classmethod
    def of(cls, options: RewriteOptions, md: TableMetadata) -> Sizes:
        target = options.target_file_size_bytes
        if target is None:
            text = md.properties.get(TARGET_FILE_SIZE, str(TARGET_FILE_SIZE_DEFAULT))
            try:
                target = int(text)
            except ValueError:
                raise UsageError(f"table property {TARGET_FILE_SIZE}={text} is not a number",
                                 hint="pass --target-file-size-bytes, or fix the property") from None
        low, high = options.min_file_size_bytes, options.max_file_size_bytes
        low = low if low is not None else int(target * MIN_FILE_SIZE_RATIO)
        high = high if high is not None else int(target * MAX_FILE_SIZE_RATIO)
        if target <= 0:
            raise UsageError(f"'target-file-size-bytes' is set to {target} but must be > 0")
        if not target > low:
            raise UsageError(f"'target-file-size-bytes' ({target}) must be > 'min-file-size-bytes' ({low}), "
                             "all new files will be smaller than the min threshold")
        if not target < high:
            raise UsageError(f"'target-file-size-bytes' ({target}) must be < 'max-file-size-bytes' ({high}), "
                             "all new files will be larger than the max threshold")
        return cls(target, low, high)

    @property
    def write_max(self) -> int:
        """Java's ``writeMaxFileSize``: the target plus half the way to the maximum."""
        return int(self.target + (self.max - self.target) * 0.5)

    def expected_output_files(self, input_size: int) -> int:
        """Java's ``expectedOutputFiles``."""
        if input_size < self.target:
            return 1
        with_remainder = -(-input_size // self.target)
        without = input_size // self.target
        if input_size % self.target > self.min:
            return with_remainder
        if input_size // without < min(1.1 * self.target, float(self.write_max)):
            return without
        return with_remainder


@dataclass
class FileGroup:
    """One group of files rewritten together into ``expected_output_files`` files of one spec."""

    index: int  # Java's global index, from 1
    partition_index: int  # from 1 within the partition
    partition: tuple[Any, ...]  # in the default spec; all None for the group of other specs' files
    tasks: list[FileScanTask] = field(default_factory=list)
    expected_output_files: int = 1

    @property
    def input_size(self) -> int:
        return sum(t.length for t in self.tasks)

    @property
    def records(self) -> int:
        return sum(t.data.file.record_count for t in self.tasks)


def _too_many_deletes(t: FileScanTask, options: RewriteOptions) -> bool:
    return len(t.deletes) >= options.delete_file_threshold


def _too_high_delete_ratio(t: FileScanTask, options: RewriteOptions) -> bool:
    if not t.deletes or t.data.file.record_count == 0:
        return False
    deleted = min(t.known_deleted_records(), t.data.file.record_count)
    return deleted / t.data.file.record_count >= options.delete_ratio_threshold


def _pack(tasks: list[FileScanTask], limit: int) -> list[list[FileScanTask]]:
    """Java's ``BinPacking.ListPacker(limit, lookback=1, largestBinFirst=false)``: in order, a file
    joins the open bin if it fits, else the bin is closed and the file opens the next."""
    bins: list[list[FileScanTask]] = []
    weight = 0
    for t in tasks:
        if bins and weight + t.length <= limit:
            bins[-1].append(t)
            weight += t.length
        else:
            bins.append([t])
            weight = t.length
    return bins


def _identity_values(md: TableMetadata, t: FileScanTask) -> dict[int, Any]:
    """Source field id -> value, for the identity fields of the file's partition spec."""
    spec = md.spec_by_id(t.data.spec_id)
    if spec is None or not t.data.file.partition:
        return {}
    return {pf.source_id: v for pf, v in zip(spec.fields, t.data.file.partition, strict=False)
            if str(pf.transform) == "identity"}


def filter_tasks(md: TableMetadata, tasks: list[FileScanTask], where: str | None) -> list[FileScanTask]:
    """The tasks whose data file might hold a row matching ``where`` (Java's ``scan.filter(...)
    .ignoreResiduals()``: a file is taken, or left, whole)."""
    if where is None:
        return tasks
    schema = md.schema()
    expr = parse_filter(where, schema)
    return [t for t in tasks if might_match(expr, t.data.file, schema, _identity_values(md, t))]


def plan_groups(md: TableMetadata, tasks: list[FileScanTask], options: RewriteOptions) -> list[FileGroup]:
    """The groups to rewrite, in plan order (Java's default ``rewrite-job-order`` none)."""
    sizes = Sizes.of(options, md)
    tasks = filter_tasks(md, tasks, options.where)
    default = md.spec()
    empty = tuple(None for _ in default.fields)
    by_partition: dict[tuple[Any, ...], list[FileScanTask]] = {}
    for t in tasks:
        key = tuple(t.data.file.partition or ()) if t.data.spec_id == default.spec_id else empty
        by_partition.setdefault(key, []).append(t)

    def candidate(t: FileScanTask) -> bool:
        return (t.length < sizes.min or t.length > sizes.max or _too_many_deletes(t, options)
                or _too_high_delete_ratio(t, options))

    def worth_it(group: list[FileScanTask]) -> bool:
        size = sum(t.length for t in group)
        return ((len(group) > 1 and len(group) >= options.min_input_files)
                or (len(group) > 1 and size > sizes.target)
                or size > sizes.max
                or any(_too_many_deletes(t, options) for t in group)
                or any(_too_high_delete_ratio(t, options) for t in group))

    groups: list[FileGroup] = []
    for partition, files in by_partition.items():
        chosen = files if options.rewrite_all else [t for t in files if candidate(t)]
        packed = _pack(chosen, options.max_file_group_size_bytes)
        kept = packed if options.rewrite_all else [g for g in packed if worth_it(g)]
        for i, g in enumerate(kept, start=1):
            group = FileGroup(len(groups) + 1, i, partition, g)
            group.expected_output_files = sizes.expected_output_files(group.input_size)
            groups.append(group)
    return groups
