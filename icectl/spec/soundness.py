"""What Iceberg Java refuses to load, as a list of problems (no I/O, no exceptions).

Java's ``TableMetadata`` constructor and ``TableMetadataParser`` refuse metadata whose refs or
current-snapshot-id name a snapshot the table lacks ("Snapshot for reference ... does not exist"),
whose current snapshot differs from ``main``, with two snapshots (or schemas, partition specs,
sort orders) of one id (``ImmutableMap`` duplicate key), with a snapshot sequence number above
last-sequence-number or a v1 last-sequence-number other than 0, and numbers a Java ``long`` cannot
hold (``JsonUtil.getLong``: "Cannot parse to a long value"). icectl adds what no Java writer can
produce and icectl's own walks must not trust: parent cycles and negative sequence numbers,
timestamps and row ids. The write gate (:mod:`icectl.table.write_guard`) refuses on any problem;
``validate`` reports each as a finding of the rule named by its kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # metadata.py imports this module to check parsed JSON
    from icectl.spec.metadata import TableMetadata

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Problem:
    kind: str  # the validate rule's name within the metadata area, e.g. "refs-exist"
    entry: str  # where: "refs.audit", "snapshot 123", "current-snapshot-id", a JSON path
    message: str
    values: dict[str, Any] = field(default_factory=dict)


def in_int64(value: int) -> bool:
    return INT64_MIN <= value <= INT64_MAX


def json_integer_problems(doc: Any) -> list[Problem]:
    """Integers anywhere in parsed JSON that a signed 64-bit long cannot hold.

    Iterative, so arbitrarily deep input cannot exhaust the stack here. Every metadata file read
    passes here, so the common case (none) is found without building a path per value.
    """
    if not _has_big_integer(doc):
        return []
    problems: list[Problem] = []
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, int) and not isinstance(value, bool) and not in_int64(value):
            problems.append(Problem("number-range", where or "(top level)",
                                    f"{where or 'value'} {value} is beyond the signed 64-bit range",
                                    {"value": str(value)}))
    return problems


def _has_big_integer(doc: Any) -> bool:
    stack = [doc]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif type(value) is int and not INT64_MIN <= value <= INT64_MAX:
            return True
    return False


def _numbers(md: TableMetadata) -> Iterator[tuple[str, str, int, bool]]:
    """(entry, name, value, must be >= 0) for the numbers Java reads as longs."""
    yield "last-sequence-number", "last-sequence-number", md.last_sequence_number, True
    yield "last-updated-ms", "last-updated-ms", md.last_updated_ms, True
    yield "next-row-id", "next-row-id", md.next_row_id, True
    if md.current_snapshot_id is not None:
        yield "current-snapshot-id", "current-snapshot-id", md.current_snapshot_id, False
    for s in md.snapshots:
        where = f"snapshot {s.snapshot_id}"
        yield where, "snapshot-id", s.snapshot_id, False
        if s.parent_snapshot_id is not None:
            yield where, "parent-snapshot-id", s.parent_snapshot_id, False
        yield where, "sequence-number", s.sequence_number, True
        yield where, "timestamp-ms", s.timestamp_ms, True
        if s.first_row_id is not None:
            yield where, "first-row-id", s.first_row_id, True
        if s.added_rows is not None:
            yield where, "added-rows", s.added_rows, True
    for name, ref in md.refs.items():
        yield f"refs.{name}", "snapshot-id", ref.snapshot_id, False
    for i, e in enumerate(md.snapshot_log):
        yield f"snapshot-log[{i}]", "timestamp-ms", e.timestamp_ms, True
    for i, m in enumerate(md.metadata_log):
        yield f"metadata-log[{i}]", "timestamp-ms", m.timestamp_ms, True


def metadata_problems(md: TableMetadata) -> list[Problem]:
    """Every reason Iceberg Java (or icectl's snapshot walks) cannot trust ``md``; [] when sound."""
    problems: list[Problem] = []
    for entry, name, value, non_negative in _numbers(md):
        if not in_int64(value):
            problems.append(Problem("number-range", entry, f"{entry} {name} {value} is beyond the signed "
                                    "64-bit range", {"field": name, "value": str(value)}))
        elif non_negative and value < 0:
            problems.append(Problem("number-range", entry, f"{entry} has negative {name} {value}",
                                    {"field": name, "value": value}))

    # Java indexes snapshots in an ImmutableMap: a repeated id refuses the whole file.
    seen: set[int] = set()
    for s in md.snapshots:
        if s.snapshot_id in seen:
            problems.append(Problem("snapshot-ids-unique", f"snapshot {s.snapshot_id}",
                                    f"snapshot id {s.snapshot_id} appears more than once",
                                    {"snapshot_id": s.snapshot_id}))
        seen.add(s.snapshot_id)

    # Java indexes schemas, partition specs and sort orders the same way.
    for label, ids in (("schema", [x.schema_id for x in md.schemas]),
                       ("partition spec", [x.spec_id for x in md.partition_specs]),
                       ("sort order", [x.order_id for x in md.sort_orders])):
        for dup in sorted({i for i in ids if ids.count(i) > 1}):
            problems.append(Problem("ids-unique", label, f"{label} id {dup} is used {ids.count(dup)} times",
                                    {"id": dup}))

    # TableMetadata.indexAndValidateSnapshots (every format version); v1 must stay at 0.
    if md.format_version == 1 and md.last_sequence_number != 0:
        problems.append(Problem("sequence-number-bound", "last-sequence-number",
                                f"format v1 table has last-sequence-number {md.last_sequence_number} (must be 0)",
                                {"last_sequence_number": md.last_sequence_number}))
    for s in md.snapshots:
        if s.sequence_number > md.last_sequence_number:
            problems.append(Problem("sequence-number-bound", f"snapshot {s.snapshot_id}",
                                    f"snapshot {s.snapshot_id} has sequence-number {s.sequence_number} > "
                                    f"last-sequence-number {md.last_sequence_number}",
                                    {"sequence_number": s.sequence_number,
                                     "last_sequence_number": md.last_sequence_number}))

    problems += _parent_cycles(md)

    # TableMetadata.validateRefs and validateCurrentSnapshot.
    by_id = md.snapshots_by_id
    if md.current_snapshot_id is not None and md.current_snapshot_id not in by_id:
        problems.append(Problem("refs-exist", "current-snapshot-id",
                                f"current-snapshot-id {md.current_snapshot_id} is not a snapshot of the table",
                                {"snapshot_id": md.current_snapshot_id}))
    for name, ref in md.refs.items():
        if ref.snapshot_id not in by_id:
            problems.append(Problem("refs-exist", f"refs.{name}", f"{ref.type} {name!r} names snapshot "
                                    f"{ref.snapshot_id}, which the table lacks",
                                    {"ref": name, "snapshot_id": ref.snapshot_id}))
    main = md.refs.get("main")
    # Java: without main any current snapshot goes; with main, current-snapshot-id must be its.
    if main is not None and main.snapshot_id != md.current_snapshot_id:
        problems.append(Problem("current-snapshot-is-main", "current-snapshot-id",
                                f"current-snapshot-id {md.current_snapshot_id} differs from the main branch's "
                                f"snapshot {main.snapshot_id}",
                                {"current_snapshot_id": md.current_snapshot_id, "main": main.snapshot_id}))
    return problems


def _parent_cycles(md: TableMetadata) -> list[Problem]:
    """One problem per cycle of parent-snapshot-id links (a snapshot that is its own ancestor)."""
    by_id = md.snapshots_by_id
    state: dict[int, int] = {}  # 1: on the current walk, 2: known to end outside any cycle
    problems: list[Problem] = []
    for start in by_id:
        path: list[int] = []
        sid: int | None = start
        while sid is not None and sid in by_id and sid not in state:
            state[sid] = 1
            path.append(sid)
            sid = by_id[sid].parent_snapshot_id
        if sid is not None and state.get(sid) == 1:  # came back to this walk: a cycle
            cycle = path[path.index(sid):]
            problems.append(Problem("snapshot-parent-cycle", f"snapshot {min(cycle)}",
                                    f"snapshots {' -> '.join(str(c) for c in cycle)} -> {sid} form a "
                                    "parent-snapshot-id cycle", {"cycle": cycle}))
        for p in path:
            state[p] = 2
    return problems
