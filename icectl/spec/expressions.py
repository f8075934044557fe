"""Row filters over a table's columns, and whether a data file might hold a matching row.

The ``where`` of Spark's ``rewrite_data_files`` is a SQL predicate; Java turns it into an Iceberg
expression and plans ``scan.filter(expr).ignoreResiduals()``: a file is taken when its metrics
and partition might hold a matching row (``InclusiveMetricsEvaluator``), and then rewritten whole.
This module reads the predicates people write there:

    id > 100 AND region = 'eu'
    ts >= TIMESTAMP '2024-05-01 00:00:00' OR category IN ('a', 'b')
    note IS NULL AND NOT (qty <= 3)

(comparisons ``= != <> < <= > >=``, ``[NOT] IN (...)``, ``IS [NOT] NULL``, ``AND``, ``OR``,
``NOT``, parentheses; literals: numbers, ``'strings'``, ``true``/``false``, ``DATE '...'``,
``TIMESTAMP '...'``; top-level columns by name) and evaluates them inclusively on a data file's
bounds, null and value counts, and identity partition values. "Might match" may keep a file Java
would prune through a partition transform's projection; it never drops one Java keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from icectl.errors import IcectlError, UsageError
from icectl.spec.manifest import DataFile
from icectl.spec.schema import IcebergType, NestedField, PrimitiveType, Schema
from icectl.spec.values import from_bytes_or_none, from_json_single_value

_TOKEN = re.compile(r"""\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)
                       |(?P<op><>|!=|<=|>=|=|<|>|\(|\)|,)|(?P<word>[A-Za-z_][A-Za-z0-9_]*|`[^`]+`))""", re.VERBOSE)
_NEGATE = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<", "in": "not in", "not in": "in",
           "is null": "not null", "not null": "is null"}


@dataclass(frozen=True)
class Predicate:
    op: str  # = != < <= > >= in "not in" "is null" "not null"
    field: NestedField
    values: tuple[Any, ...] = ()  # internal values of the column's type


@dataclass(frozen=True)
class And:
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Or:
    left: Expr
    right: Expr


Expr = Predicate | And | Or


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise UsageError(f"--where {text!r}: cannot read it from {text[pos:pos + 20].strip()!r}",
                             hint="write comparisons like id > 5 AND region = 'eu'")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str, schema: Schema) -> None:
        self.text, self.schema = text, schema
        self.tokens = _tokens(text)
        self.i = 0

    def error(self, what: str) -> UsageError:
        return UsageError(f"--where {self.text!r}: {what}", hint="write comparisons like id > 5 AND region = 'eu'")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def word(self, *words: str) -> bool:
        t = self.peek()
        if t is not None and t[0] == "word" and t[1].lower() in words:
            self.i += 1
            return True
        return False

    def symbol(self, s: str) -> bool:
        t = self.peek()
        if t is not None and t[0] == "op" and t[1] == s:
            self.i += 1
            return True
        return False

    def parse(self) -> Expr:
        e = self.disjunction()
        if self.peek() is not None:
            raise self.error(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return e

    def disjunction(self) -> Expr:
        e = self.conjunction()
        while self.word("or"):
            e = Or(e, self.conjunction())
        return e

    def conjunction(self) -> Expr:
        e = self.negation()
        while self.word("and"):
            e = And(e, self.negation())
        return e

    def negation(self) -> Expr:
        if self.word("not"):
            return _negate(self.negation())
        if self.symbol("("):
            e = self.disjunction()
            if not self.symbol(")"):
                raise self.error("a parenthesis is not closed")
            return e
        return self.predicate()

    def column(self) -> NestedField:
        t = self.peek()
        if t is None or t[0] != "word":
            raise self.error("expected a column name")
        self.i += 1
        name = t[1].strip("`")
        f = next((f for f in self.schema.fields if f.name == name), None)
        if f is None:
            f = next((f for f in self.schema.fields if f.name.lower() == name.lower()), None)
        if f is None:
            raise self.error(f"the table has no column {name}; columns: "
                             + ", ".join(f.name for f in self.schema.fields))
        if not isinstance(f.field_type, PrimitiveType):
            raise self.error(f"column {f.name} is a {f.field_type}; filters take primitive columns")
        return f

    def literal(self, f: NestedField) -> Any:
        t = self.peek()
        if t is None:
            raise self.error("expected a value")
        kind, raw = t
        self.i += 1
        if kind == "word" and raw.lower() in ("date", "timestamp", "timestamp_ntz", "timestamp_ltz"):
            nxt = self.peek()
            if nxt is None or nxt[0] != "str":
                raise self.error(f"{raw.upper()} takes a quoted value")
            self.i += 1
            raw, kind = nxt[1], "str"
        if kind == "str":
            value: Any = raw[1:-1].replace("''", "'")
        elif kind == "num":
            value = raw
        elif kind == "word" and raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            raise self.error(f"expected a value, got {raw!r}")
        return _internal(f.field_type, value, self)

    def predicate(self) -> Predicate:
        f = self.column()
        if self.word("is"):
            negated = self.word("not")
            if not self.word("null"):
                raise self.error("IS takes NULL or NOT NULL")
            return Predicate("not null" if negated else "is null", f)
        negated = self.word("not")
        if self.word("in"):
            if not self.symbol("("):
                raise self.error("IN takes a list in parentheses")
            values = [self.literal(f)]
            while self.symbol(","):
                values.append(self.literal(f))
            if not self.symbol(")"):
                raise self.error("the IN list is not closed")
            return Predicate("not in" if negated else "in", f, tuple(values))
        if negated:
            raise self.error("NOT goes before a condition, or in NOT IN")
        t = self.peek()
        if t is None or t[0] != "op" or t[1] in "(),":
            raise self.error(f"expected a comparison after {f.name}")
        self.i += 1
        op = "!=" if t[1] == "<>" else t[1]
        return Predicate(op, f, (self.literal(f),))


def _internal(t: IcebergType, value: Any, parser: _Parser) -> Any:
    name = str(t)
    try:
        if name in ("int", "long"):
            if isinstance(value, bool) or not re.fullmatch(r"-?\d+", str(value)):
                raise ValueError
            return int(value)
        if name in ("float", "double"):
            return float(value)
        if name.startswith("decimal"):
            return from_json_single_value(t, str(Decimal(str(value))))
        if name.startswith("timestamp") and isinstance(value, str):
            value = value.strip().replace(" ", "T", 1)
            if name.endswith("tz") and not re.search(r"(Z|[+-]\d\d:\d\d)$", value):
                value += "+00:00"
            if "." not in value.rsplit("T", 1)[-1]:
                value = re.sub(r"^(.*T\d\d:\d\d)(:\d\d)?", lambda m: m.group(1) + (m.group(2) or ":00"), value)
        return from_json_single_value(t, value)
    except (ValueError, InvalidOperation, IcectlError, TypeError):
        raise parser.error(f"{value!r} is not a {t} value") from None


def parse_filter(text: str, schema: Schema) -> Expr:
    """The predicate ``text`` over ``schema``'s columns (exit 2 with one line when it does not read)."""
    return _Parser(text, schema).parse()


def _negate(e: Expr) -> Expr:
    if isinstance(e, And):
        return Or(_negate(e.left), _negate(e.right))
    if isinstance(e, Or):
        return And(_negate(e.left), _negate(e.right))
    return Predicate(_NEGATE[e.op], e.field, e.values)


def might_match(e: Expr, f: DataFile, schema: Schema, exact: dict[int, Any] | None = None) -> bool:
    """Whether ``f`` might hold a row matching ``e`` (Java's ``InclusiveMetricsEvaluator``), from its
    bounds and counts, and ``exact``: source field id -> the value every row has (identity partitions)."""
    if isinstance(e, And):
        return might_match(e.left, f, schema, exact) and might_match(e.right, f, schema, exact)
    if isinstance(e, Or):
        return might_match(e.left, f, schema, exact) or might_match(e.right, f, schema, exact)
    fid = e.field.field_id
    if exact is not None and fid in exact:
        v = exact[fid]
        lower = upper = v
        all_null, no_null = v is None, v is not None
    else:
        nulls = (f.null_value_counts or {}).get(fid)
        count = (f.value_counts or {}).get(fid)
        all_null = nulls is not None and count is not None and nulls == count
        no_null = nulls == 0
        lower, upper = _bound(f.lower_bounds, fid, e.field.field_type), _bound(f.upper_bounds, fid, e.field.field_type)
    if e.op == "is null":
        return not no_null
    if e.op == "not null":
        return not all_null
    if all_null:
        return False  # a comparison is never true of null
    if e.op in ("!=", "not in"):
        return True  # as Java: bounds cannot rule these out
    try:
        return _in_range(e.op, e.values, lower, upper)
    except TypeError:  # bounds of another type (an evolved column): keep the file
        return True


def _bound(bounds: dict[int, bytes] | None, field_id: int, t: IcebergType) -> Any:
    """A bound as the column's current type; None when absent or written as another type (an int
    column promoted to long keeps 4-byte bounds in old files: not a bound to compare, so no pruning)."""
    return from_bytes_or_none(t, (bounds or {}).get(field_id))


def _in_range(op: str, values: tuple[Any, ...], lower: Any, upper: Any) -> bool:
    if op == "in":
        return any(_in_range("=", (v,), lower, upper) for v in values)
    v = values[0]
    if op == "=":
        return not (lower is not None and lower > v) and not (upper is not None and upper < v)
    if op == "<":
        return not (lower is not None and lower >= v)
    if op == "<=":
        return not (lower is not None and lower > v)
    if op == ">":
        return not (upper is not None and upper <= v)
    if op == ">=":
        return not (upper is not None and upper < v)
    return True
