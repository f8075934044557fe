"""Results that core functions return and the CLI renders: the JSON contract of icectl.

Core code never prints. A command returns a result; ``icectl.cli.output.render`` prints it as a rich
view on a terminal or, with ``--json``, as exactly one JSON document: ``result.to_json()``.

A command's JSON is written down once, as the fields of its result dataclass (a subclass of
:class:`CommandResult`): the document is ``{"view": ..., <field>: <value>, ...}`` in field order.
A field left :data:`UNSET` is not in the document (``None`` is: it prints as ``null``), so a
dry run and a real run share one class and differ in which keys they carry. Rows views
(:class:`RowsResult`) stream their rows instead of holding a document.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, Literal, Protocol, TypeVar, runtime_checkable


class _Unset:
    """The value of a result field that is left out of the JSON document (not ``null``)."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> Literal[False]:  # so `if field:` rules UNSET out for mypy too
        return False


Unset = _Unset  # the type of UNSET, for annotations: ``list[str] | Unset = UNSET``
UNSET: Final = _Unset()

# Field metadata: a field that is not part of the JSON document, a JSON key that is no Python
# name (``from``), and a shared part whose keys stand in the document where the part does
# (:class:`DryRun`, :class:`Committed`).
NOT_JSON: Final = {"json": False}
FLAT: Final = {"flatten": True}


def json_key(key: str) -> dict[str, str]:
    return {"key": key}


def plain(value: Any) -> Any:
    """``value`` as JSON-ready Python: nested results and parts become their ``to_json()``."""
    if hasattr(value, "to_json") and not isinstance(value, type):
        return value.to_json()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def fields_json(obj: Any) -> dict[str, Any]:
    """The JSON object of a dataclass: its fields in order, UNSET ones left out, parts converted."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not f.metadata.get("json", True):
            continue
        value = getattr(obj, f.name)
        if value is UNSET:
            continue
        if f.metadata.get("flatten"):
            out.update(fields_json(value))
            continue
        out[f.metadata.get("key", f.name)] = plain(value)
    return out


def document_keys(cls: type) -> list[str]:
    """Every key a result class's document can carry, in order (``view`` first for commands).

    For classes whose ``to_json`` is the generic one (ExpireResult orders its keys by itself).
    """
    keys: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.metadata.get("json", True):
            continue
        if f.metadata.get("flatten"):
            assert f.default_factory is not dataclasses.MISSING
            keys += document_keys(type(f.default_factory()))
        else:
            keys.append(f.metadata.get("key", f.name))
    return ["view", *keys] if issubclass(cls, CommandResult) and not issubclass(cls, MessageResult) else keys


@dataclass
class Part:
    """A nested object of a result's JSON (a branch, a group, a file): its fields, in order."""

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


W = TypeVar("W")
D = TypeVar("D")


@dataclass
class DryRun(Part, Generic[W, D]):
    """What a writing command's dry run would write and delete (each command says what its lists
    hold: paths, planned writes, paths per category). Left unset on a real run."""

    would_write: W | Unset = UNSET
    would_delete: D | Unset = UNSET

    def plan(self, writes: W, deletes: D | Unset = UNSET) -> None:
        self.would_write, self.would_delete = writes, deletes


@dataclass
class Committed(Part):
    """Where a commit left the table: its new metadata file and the attempts the commit took
    (Java's ``commit.retry.*``). Left unset on a dry run."""

    metadata_location: str | Unset = UNSET
    commit_attempts: int | Unset = UNSET

    def record(self, metadata_location: str, attempts: int | Unset = UNSET) -> None:
        self.metadata_location, self.commit_attempts = metadata_location, attempts


@runtime_checkable
class Result(Protocol):
    """What the renderer needs of any result."""

    title: str
    exit_code: int

    def to_json(self) -> dict[str, Any]: ...


@dataclass(kw_only=True)
class CommandResult:
    """A command's result document. Subclasses declare the JSON keys as fields, in order.

    ``title`` is the terminal caption, ``exit_code`` the process's exit code and ``warnings``
    lines for stderr (never stdout, so ``--json`` stays one document); none is in the JSON.
    """

    view: ClassVar[str] = ""  # the document's "view" (machine name of the command)
    # How a terminal draws it beyond the generic document tree, and its line in an --all run:
    # "module:function" of icectl.cli.output, imported only when such a result is printed.
    terminal_report: ClassVar[str] = ""
    one_line: ClassVar[str] = ""

    title: str = field(default="", metadata=NOT_JSON)
    exit_code: int = field(default=0, metadata=NOT_JSON)
    warnings: list[str] = field(default_factory=list, metadata=NOT_JSON)

    def to_json(self) -> dict[str, Any]:
        return {"view": self.view, **fields_json(self)}

    @property
    def data(self) -> dict[str, Any]:
        """The document without its ``view``: the JSON keys as a dict, for callers of the library."""
        doc = self.to_json()
        doc.pop("view", None)
        return doc


@dataclass(kw_only=True)
class MessageResult(CommandResult):
    """A short confirmation: the message on a terminal; ``{"message": ..., <fields>}`` in JSON."""

    message: str

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


# Kinds of a rows view's column: how a terminal shows its values (JSON and CSV keep them as they are).
KINDS: Final = ("id", "path", "bytes", "count", "number", "timestamp", "duration", "enum", "bool", "text", "map",
                "struct", "list")


@dataclass(frozen=True)
class Column:
    """How a terminal shows one column of a rows view (not in the JSON).

    ``header`` is the terminal's heading (spaces let it wrap onto two lines instead of widening the
    column); ``labels`` names an enum's codes (``content`` 0 -> ``data``): the terminal shows the
    name and ``--where content=data`` compares by it; ``short`` are shorter names for a terminal.
    ``value`` makes a column of a view that no row holds, computed from the row (terminal only
    unless chosen with ``--columns``).
    """

    kind: str = "text"
    header: str | None = None
    labels: dict[Any, str] | None = None
    short: dict[Any, str] | None = None
    value: Callable[[dict[str, Any]], Any] | None = None


_PATH_NAMES: Final = {"path", "file_path", "manifest_path", "manifest_list", "file", "location", "puffin_path",
                      "referenced_data_file", "referenced_file", "metadata_location"}


def guess_kind(name: str) -> str:
    """The kind a column's name implies (``snapshot_id`` -> id, ``*_in_bytes`` -> bytes, ...)."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf in _PATH_NAMES or leaf.endswith("_path"):
        return "path"
    if leaf == "id" or leaf.endswith("_id") or leaf.endswith("-id"):
        return "id"
    if leaf.endswith(("_in_bytes", "_bytes", "-size", "-bytes")) or leaf == "length":
        return "bytes"
    if leaf.endswith(("_in_ms", "_ms", "-ms")):
        return "duration"
    if leaf.endswith("_at") or leaf == "timestamp":
        return "timestamp"
    if leaf.endswith(("_count", "_files", "_rows", "-files", "-records", "-deletes", "-rows")) or leaf in (
            "cardinality", "sequence_number", "file_sequence_number"):
        return "count"
    if leaf in ("partition", "data_file", "readable_metrics"):
        return "struct"
    if leaf in ("summary",) or leaf.endswith(("_sizes", "_counts", "_bounds")):
        return "map"
    return "text"


@dataclass
class RowsResult:
    """A table of rows. ``rows`` may be a generator, so large views stream.

    ``to_json()`` is ``{"view": ..., **meta, "rows": [...]}``; the renderer writes the same
    document row by row (:meth:`json_head`), never holding it whole.
    """

    view: str  # machine name, e.g. "files"
    title: str  # human caption
    columns: list[str]
    rows: Iterable[dict[str, Any]]
    meta: dict[str, Any] | Part = field(default_factory=dict)  # table, snapshot id, ...: goes into the JSON too
    exit_code: int = 0
    warnings: list[str] = field(default_factory=list)
    terminal_report: str = ""  # "module:function" of icectl.cli.output that draws it on a terminal, if any
    # A faster way to the same JSON text: given the renderer's encoder of one row, chunks of the
    # "rows" array's text (rows joined by ",\n"), byte for byte what encoding ``rows`` gives; a
    # chunk may be bytes, UTF-8 written as they are (Arrow's buffers: no decoding and encoding again).
    json_text: Callable[[Callable[[Any], str]], Iterable[str | bytes]] | None = None
    # For people and queries (never in the JSON): how a terminal shows a column (by default the
    # kind its name implies), the columns a terminal shows when none are chosen (``None``: all; a
    # dotted name reaches into a map or struct, ``summary.added-records``), more names ``--where``
    # and ``--sort`` accept (a partition field -> its path in a row), and the table location that
    # terminal paths are shown relative to.
    column_info: dict[str, Column] = field(default_factory=dict)
    terminal_columns: list[str] | None = None
    fields: dict[str, tuple[str, ...]] = field(default_factory=dict)
    location: str | None = None
    # Keys after ``rows`` known only once the rows are read (which engine read them, its Spark tasks).
    json_tail: Callable[[], dict[str, Any]] | None = None

    def json_head(self) -> dict[str, Any]:
        """The document's keys before ``rows``."""
        return {"view": self.view, **plain(self.meta)}

    def to_json(self) -> dict[str, Any]:
        doc = {**self.json_head(), "rows": [plain(r) for r in self.rows]}
        return {**doc, **(self.json_tail() if self.json_tail is not None else {})}

    def column(self, name: str) -> Column:
        """How a terminal shows column ``name`` (declared, else the kind its name implies)."""
        info = self.column_info.get(name)
        return info if info is not None else Column(guess_kind(name))

    def default_columns(self) -> list[str]:
        """The columns a terminal shows when none are chosen."""
        return list(self.columns if self.terminal_columns is None else self.terminal_columns)

    def path_of(self, name: str) -> tuple[str, ...]:
        """Where ``name`` is found in a row: a column, an extra field (partition), or a dotted path."""
        if name in self.columns:
            return (name,)
        if name in self.fields:
            return self.fields[name]
        return tuple(name.split("."))


@dataclass(kw_only=True)
class TableFailure(CommandResult):
    """One table of an ``--all`` run that could not be processed (the run goes on)."""

    # the view of the run's command (expire_snapshots, compact): per instance, unlike other results
    view: str = field(metadata=NOT_JSON)  # type: ignore[misc]
    table: str
    error: str


@dataclass
class MultiResult:
    """One result per table (``--all``): a JSON line each with --json; the exit code is the worst."""

    view: str
    results: Iterable[Result]
    exit_code: int = 0  # set while the results are rendered
    item: type | None = None  # the result class of each table (a failed table's TableFailure aside): its one_line

    def __iter__(self) -> Iterator[Result]:
        for r in self.results:
            if r.exit_code and (self.exit_code == 0 or r.exit_code > self.exit_code):
                self.exit_code = r.exit_code
            yield r


# --------------------------------------------------------------------------- shared parts of command results

NEXT_METADATA = "a new table metadata file (the next version)"  # a would_write line of every writing command


@dataclass
class FileRef(Part):
    """A manifest (or leaf) a command would replace."""

    path: str
    bytes: int | None


@dataclass
class WrittenFile(Part):
    """A manifest (or leaf) a command wrote, with its entry count."""

    path: str
    bytes: int | None
    entries: int


@dataclass
class PlannedWrite(Part):
    """A file a dry run would write; ``group`` names the compaction group it belongs to."""

    path: str
    group: str | Unset = UNSET
