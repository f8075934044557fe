"""Partition statistics files (the spec's ``partition-statistics``): compute, write, register, read."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from icectl.table import Table


def read_partition_stats(table: Table, snapshot_id: int) -> pa.Table | None:
    """The rows of the partition statistics file registered for ``snapshot_id``, or None when the
    table has none for it (or it cannot be read)."""
    return None
