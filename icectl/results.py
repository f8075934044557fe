"""Results that core functions return and the CLI renders: the JSON contract of icectl.

Core code never prints. A command returns a result; ``icectl.cli.render`` prints it as a rich
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
from typing import Any, ClassVar, Final, Protocol, runtime_checkable


class _Unset:
    """The value of a result field that is left out of the JSON document (not ``null``)."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


Unset = _Unset  # the type of UNSET, for annotations: ``list[str] | Unset = UNSET``
UNSET: Final = _Unset()

# Field metadata: a field that is not part of the JSON document, and a JSON key that is no
# Python name (``from``).
NOT_JSON: Final = {"json": False}


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
        out[f.metadata.get("key", f.name)] = plain(value)
    return out


def document_keys(cls: type) -> list[str]:
    """Every key a result class's document can carry, in order (``view`` first for commands).

    For classes whose ``to_json`` is the generic one (ExpireResult orders its keys by itself).
    """
    keys = [f.metadata.get("key", f.name) for f in dataclasses.fields(cls) if f.metadata.get("json", True)]
    return ["view", *keys] if issubclass(cls, CommandResult) and not issubclass(cls, MessageResult) else keys


@dataclass
class Part:
    """A nested object of a result's JSON (a branch, a group, a file): its fields, in order."""

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


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
    # A faster way to the same JSON text: given the renderer's encoder of one row, chunks of the
    # "rows" array's text (rows joined by ",\n"), byte for byte what encoding ``rows`` gives.
    json_text: Callable[[Callable[[Any], str]], Iterable[str]] | None = None

    def json_head(self) -> dict[str, Any]:
        """The document's keys before ``rows``."""
        return {"view": self.view, **plain(self.meta)}

    def to_json(self) -> dict[str, Any]:
        return {**self.json_head(), "rows": [plain(r) for r in self.rows]}


@dataclass(kw_only=True)
class TableFailure(CommandResult):
    """One table of an ``--all`` run that could not be processed (the run goes on)."""

    view: str = field(metadata=NOT_JSON)  # the view of the run's command (expire_snapshots, compact)
    table: str
    error: str


@dataclass
class MultiResult:
    """One result per table (``--all``): a JSON line each with --json; the exit code is the worst."""

    view: str
    results: Iterable[Result]
    exit_code: int = 0  # set while the results are rendered

    def __iter__(self) -> Iterator[Result]:
        for r in self.results:
            if r.exit_code and (self.exit_code == 0 or r.exit_code > self.exit_code):
                self.exit_code = r.exit_code
            yield r
