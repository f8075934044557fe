"""A short DDL for schemas, partition specs and sort orders (``icectl create``'s arguments). Pure.

Schema: ``id long not null, ts timestamptz, name string comment 'x', tags list<string>,
attrs map<string, struct<a: int, b: decimal(9,2)>>``. Types use Iceberg's names; Spark/SQL
spellings are accepted as aliases and mapped the way Spark's Iceberg catalog maps them
(``SparkTypeToType``): ``tinyint``/``smallint`` become ``int`` (Spark widens byte and short),
``char(n)``/``varchar(n)`` become ``string`` (Iceberg has no length-limited strings). Unlike in
Spark SQL, ``timestamp`` keeps the Iceberg meaning (without zone); ``timestamptz`` (or Spark's
``timestamp_ltz``) is the zoned type, ``timestamp_ntz`` an alias of ``timestamp``. Because Spark SQL
users mean the zoned type by ``timestamp``, :func:`schema_warnings` flags the plain spelling.

Ids are assigned as Java assigns them on create (``icectl.ops.create.metadata.assign_fresh_ids``), so a
table made from this DDL gets the ids Spark's ``CREATE TABLE`` gives the same columns.

Errors are :class:`UsageError` with one line naming the 1-based character position and the
token: ``bad schema at character 7 ('lnog'): unknown type (did you mean 'long'?); expected ...``.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any, TypeVar

from icectl.errors import CorruptInputError, UnsupportedError, UsageError
from icectl.ops.create.ddl_lexer import Lexer, Token
from icectl.ops.create.metadata import (
    MIN_V3_FORMAT_VERSION,
    PartitionRequest,
    SortRequest,
    assign_fresh_ids,
    build_partition_spec,
    build_sort_order,
    may_have_default,
    needs_v3,
)
from icectl.spec.partitioning import PartitionSpec
from icectl.spec.schema import (
    STRING,
    TIMESTAMP,
    TIMESTAMPTZ,
    UNKNOWN,
    DecimalType,
    FixedType,
    GeographyType,
    GeometryType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    Schema,
    StructType,
    parse_primitive,
)
from icectl.spec.sorting import UNSORTED, NullOrder, SortOrder
from icectl.spec.transforms import Transform, parse_transform
from icectl.spec.values import from_json_single_value, to_json_single_value

# Iceberg's names of types without parameters, and the aliases accepted for them.
_ALIASES = {"bool": "boolean", "integer": "int", "smallint": "int", "short": "int", "tinyint": "int",
            "byte": "int", "bigint": "long", "real": "float", "timestamp_ntz": "timestamp",
            "timestamp_ltz": "timestamptz", "text": "string", "bytes": "binary"}
_SIMPLE_TYPES: dict[str, IcebergType] = {name: parse_primitive(iceberg) for name, iceberg in {
    **{n: n for n in ("boolean", "int", "long", "float", "double", "date", "time", "timestamp", "timestamptz",
                      "timestamp_ns", "timestamptz_ns", "string", "uuid", "binary", "variant", "unknown")},
    **_ALIASES}.items()}
_STRING_WITH_LENGTH = ("varchar", "char", "character")
_DECIMAL_NAMES = ("decimal", "numeric", "dec")
_SPARK_DEFAULT_DECIMAL = (10, 0)  # Spark's DECIMAL without arguments
_MAX_DECIMAL_PRECISION = 38
_EDGE_ALGORITHMS = ("spherical", "vincenty", "thomas", "andoyer", "karney")
_DEFAULT_CRS = "OGC:CRS84"
_ALL_TYPE_NAMES = sorted({*_SIMPLE_TYPES, *_STRING_WITH_LENGTH, *_DECIMAL_NAMES, "fixed", "geometry",
                          "geography", "struct", "list", "array", "map"})
_TYPE_HELP = ("boolean, int, long, float, double, decimal(p, s), date, time, timestamp, timestamptz, "
              "timestamp_ns, timestamptz_ns, string, uuid, fixed[n], binary, variant, unknown, "
              "geometry, geography, struct<...>, list<...>, map<k, v>")

# Transform names of Spark's PARTITIONED BY (and Spark3Util) -> Iceberg's transform strings.
_ONE_ARG_TRANSFORMS: dict[str, Transform] = {alias: parse_transform(name) for alias, name in {
    "year": "year", "years": "year", "month": "month", "months": "month", "day": "day", "days": "day",
    "date": "day", "hour": "hour", "hours": "hour", "date_hour": "hour", "identity": "identity",
    "void": "void"}.items()}
_TRANSFORM_HELP = "identity, bucket(n, col), truncate(w, col), year, month, day, hour, void"

# --------------------------------------------------------------------------- schemas


def parse_schema(text: str, *, format_version: int | None = None) -> Schema:
    """Parse a column list into a :class:`Schema` with Java's fresh ids (schema id 0).

    ``format_version`` (when known) rejects v3-only types and default values early, with the
    position of the offending token; :func:`icectl.ops.create.metadata.new_table_metadata` checks it anyway.
    """
    lx = Lexer(text, "schema")
    if lx.peek().kind == "end":
        raise lx.error(lx.peek(), "expected at least one column, e.g. 'id long not null, data string'")
    fields = _field_list(lx, format_version, closer=None)
    schema, _ = assign_fresh_ids(Schema(tuple(fields)))
    return schema


def schema_warnings(text: str, *, format_version: int | None = None) -> list[str]:
    """What a valid schema DDL may mean other than the user meant (one line each).

    Plain ``timestamp`` is Iceberg's type without zone, but Spark SQL's ``TIMESTAMP`` (what its
    users write) is the zoned ``timestamptz``: a table made from the same DDL here and in Spark
    would differ.
    """
    lx = Lexer(text, "schema")
    _field_list(lx, format_version, closer=None)
    if not lx.plain_timestamp_columns:
        return []
    cols = ", ".join(lx.plain_timestamp_columns)
    return [f"column(s) {cols}: 'timestamp' is a timestamp WITHOUT time zone here (Iceberg's meaning), while in "
            "Spark SQL TIMESTAMP means timestamptz; write timestamptz for instants in time, or timestamp_ntz "
            "to keep the type without zone (no warning)"]


def _field_list(lx: Lexer, fv: int | None, closer: str | None) -> list[NestedField]:
    fields: list[NestedField] = []
    seen: dict[str, str] = {}
    while True:
        name_token = lx.peek()
        field = _field(lx, fv)
        clash = seen.get(field.name.lower())
        if clash is not None:  # Spark resolves names case-insensitively: such columns collide
            raise lx.error(name_token, f"duplicate column name (already have {clash!r})")
        seen[field.name.lower()] = field.name
        fields.append(field)
        if lx.accept_punct(","):
            continue
        token = lx.peek()
        if closer is None and token.kind == "end":
            return fields
        if closer is not None and token.is_punct(closer):
            return fields
        end = "the end of the schema" if closer is None else f"'{closer}' to close struct<"
        raise lx.error(token, f"expected ',', 'not null', 'comment', 'default' or {end}")


def _name(lx: Lexer, what: str) -> Token:
    token = lx.next()
    if token.kind not in ("ident", "quoted"):
        raise lx.error(token, f"expected {what}")
    if not token.value:
        raise lx.error(token, f"{what} must not be empty")
    return token


def _field(lx: Lexer, fv: int | None) -> NestedField:
    name = _name(lx, "a column name")
    lx.accept_punct(":")  # struct<a: int> and struct<a int> are both Spark syntax
    type_token = lx.peek()
    if type_token.kind == "end" or type_token.kind == "punct":
        raise lx.error(type_token, f"expected a type for column {name.value!r}")
    seen, named = lx.plain_timestamps, len(lx.plain_timestamp_columns)
    field_type = _type(lx, fv)
    if lx.plain_timestamps > seen and len(lx.plain_timestamp_columns) == named:  # not already a nested field's
        lx.plain_timestamp_columns.append(name.value)
    required, default = False, None
    doc: str | None = None
    given: set[str] = set()
    while (token := lx.peek()).is_word("not", "null", "comment", "default"):
        kind = "null" if token.is_word("not", "null") else token.value.lower()
        if kind in given:
            raise lx.error(token, "given twice for the same column")
        given.add(kind)
        if kind == "null":
            required = _not_null(lx)
            continue
        lx.next()
        if kind == "comment":
            value = lx.next()
            if value.kind != "string":
                raise lx.error(value, "expected a quoted comment after 'comment'")
            doc = value.value
        else:
            if fv is not None and fv < MIN_V3_FORMAT_VERSION:
                raise lx.error(token, f"default values need format v3 or later (the table is v{fv})")
            default = _default(lx, field_type)
    if field_type == UNKNOWN and required:
        raise lx.error(name, "a column of type unknown must be optional (drop 'not null')")
    has = default is not None  # `default null` is the same as no default
    return NestedField(0, name.value, field_type, required, doc,
                       initial_default=default if has else None, write_default=default if has else None,
                       has_initial_default=has, has_write_default=has)


def _not_null(lx: Lexer) -> bool:
    if lx.accept_word("not"):
        if not lx.accept_word("null"):
            raise lx.error(lx.peek(), "expected 'null' after 'not'")
        return True
    lx.accept_word("null")
    return False


def _int_arg(lx: Lexer, what: str) -> int:
    token = lx.next()
    if token.kind != "number" or not token.value.isdigit():
        raise lx.error(token, f"expected {what} (a whole number)")
    return int(token.value)


def _type(lx: Lexer, fv: int | None) -> IcebergType:
    token = lx.next()
    if token.kind != "ident":
        raise lx.error(token, f"expected a type; one of {_TYPE_HELP}")
    name = token.value.lower()
    t = _nested_type(lx, name, fv) or _primitive_type(lx, token, name)
    if fv is not None and fv < MIN_V3_FORMAT_VERSION and needs_v3(t):
        raise lx.error(token, f"type {t} needs format v3 or later (the table is v{fv})")
    return t


def _nested_type(lx: Lexer, name: str, fv: int | None) -> IcebergType | None:
    if name == "struct":
        lx.expect_punct("<", "expected '<' after struct")
        fields = [] if lx.peek().is_punct(">") else _field_list(lx, fv, closer=">")
        lx.expect_punct(">", "expected '>' to close struct<")
        return StructType(tuple(fields))
    if name in ("list", "array"):
        lx.expect_punct("<", f"expected '<' after {name}")
        element = _type(lx, fv)
        element_required = _not_null(lx)
        _check_unknown_required(lx, element, element_required)
        lx.expect_punct(">", f"expected '>' (or 'not null') to close {name}<")
        return ListType(0, element, element_required)
    if name == "map":
        lx.expect_punct("<", "expected '<' after map")
        key_token = lx.peek()
        key = _type(lx, fv)
        _check_unknown_required(lx, key, True, key_token)
        lx.expect_punct(",", "expected ',' between the key and value types of map<")
        value = _type(lx, fv)
        value_required = _not_null(lx)
        _check_unknown_required(lx, value, value_required)
        lx.expect_punct(">", "expected '>' (or 'not null') to close map<")
        return MapType(0, key, 0, value, value_required)
    return None


def _check_unknown_required(lx: Lexer, t: IcebergType, required: bool, token: Token | None = None) -> None:
    if t == UNKNOWN and required:
        raise lx.error(token or lx.peek(), "unknown can only be the type of optional values")


def _primitive_type(lx: Lexer, token: Token, name: str) -> IcebergType:
    if name in _SIMPLE_TYPES:
        if name == "timestamp" and (zone := lx.accept_word("with", "without")):
            for word in ("time", "zone"):  # SQL's TIMESTAMP WITH[OUT] TIME ZONE
                if not lx.accept_word(word):
                    raise lx.error(lx.peek(), f"expected '{word}' in 'timestamp {zone.value} time zone'")
            return TIMESTAMPTZ if zone.value.lower() == "with" else TIMESTAMP
        if name == "timestamp":  # unqualified: Spark SQL users mean timestamptz
            lx.plain_timestamps += 1
        if name == "double":
            lx.accept_word("precision")
        return _SIMPLE_TYPES[name]
    if name in _STRING_WITH_LENGTH:
        if lx.accept_punct("("):
            _int_arg(lx, "a length")
            lx.expect_punct(")", f"expected ')' to close {name}(")
        return STRING
    if name in _DECIMAL_NAMES:
        return _decimal(lx, name)
    if name == "fixed":
        close = "]" if lx.accept_punct("[") else ")" if lx.accept_punct("(") else None
        if close is None:
            raise lx.error(lx.peek(), "expected '[' after fixed, as in fixed[16]")
        length_token = lx.peek()
        length = _int_arg(lx, "the length of fixed")
        if length < 1:
            raise lx.error(length_token, "the length of fixed must be at least 1")
        lx.expect_punct(close, f"expected '{close}' to close fixed")
        return FixedType(length)
    if name == "geometry":
        crs, _ = _geo_args(lx, name, allow_algorithm=False)
        return GeometryType(crs)
    if name == "geography":
        crs, algorithm = _geo_args(lx, name, allow_algorithm=True)
        return GeographyType(crs, algorithm)
    guess = difflib.get_close_matches(name, _ALL_TYPE_NAMES, n=1, cutoff=0.6)
    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
    raise lx.error(token, f"unknown type{hint}; expected one of {_TYPE_HELP}")


def _decimal(lx: Lexer, name: str) -> DecimalType:
    precision, scale = _SPARK_DEFAULT_DECIMAL
    if lx.accept_punct("("):
        p_token = lx.peek()
        precision = _int_arg(lx, "the precision")
        scale = _int_arg(lx, "the scale") if lx.accept_punct(",") else 0
        lx.expect_punct(")", f"expected ')' to close {name}(")
        if not 1 <= precision <= _MAX_DECIMAL_PRECISION:
            raise lx.error(p_token, f"decimal precision must be 1 to {_MAX_DECIMAL_PRECISION}")
        if scale > precision:
            raise lx.error(p_token, f"decimal scale {scale} is larger than precision {precision}")
    return DecimalType(precision, scale)


def _geo_args(lx: Lexer, name: str, *, allow_algorithm: bool) -> tuple[str | None, str | None]:
    if not lx.accept_punct("("):
        return None, None
    crs = lx.raw_until(",)" if allow_algorithm else ")")
    if not crs.value:
        raise lx.error(crs, "expected a CRS such as OGC:CRS84 or srid:4326")
    if "," in crs.value:
        raise lx.error(crs, "a geometry CRS must not contain ','")
    algorithm = None
    if allow_algorithm and lx.accept_punct(","):
        algo = lx.next()
        if not algo.is_word(*_EDGE_ALGORITHMS):
            raise lx.error(algo, f"expected an edge algorithm: {', '.join(_EDGE_ALGORITHMS)}")
        algorithm = algo.value.lower()
    lx.expect_punct(")", f"expected ')' to close {name}(")
    # As Java's GeometryType/GeographyType: the default CRS is stored as "no CRS".
    return (None if crs.value.upper() == _DEFAULT_CRS else crs.value), algorithm


# --------------------------------------------------------------------------- default values

_TYPED_LITERAL_PREFIXES = ("date", "time", "timestamp", "timestamptz", "timestamp_ntz", "timestamp_ltz",
                           "timestamp_ns", "timestamptz_ns", "uuid")
_FLOAT_MAX = 3.4028234663852886e38  # Java Float.MAX_VALUE
_DATE_SPACE_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2}) (\d{2}:)")


def _default(lx: Lexer, t: IcebergType) -> Any:
    """The JSON single value (Appendix D) of a ``default`` literal for a column of type ``t``."""
    token = lx.next()
    if token.is_word(*_TYPED_LITERAL_PREFIXES) and lx.peek().kind == "string":
        token = lx.next()  # DATE '2024-01-01' and friends: the column type decides anyway
    if token.is_word("null"):
        return None
    if token.kind not in ("number", "string", "hex") and not token.is_word("true", "false"):
        raise lx.error(token, "expected a default value: a number, 'text', true, false, null or X'hex'")
    if not may_have_default(t):
        raise lx.error(token, f"a {t} column can only default to null")
    try:
        raw = _literal_json(t, token)
        return to_json_single_value(t, from_json_single_value(t, raw))
    except (CorruptInputError, UnsupportedError, ValueError, InvalidOperation) as e:
        problem = e.message if isinstance(e, (CorruptInputError, UnsupportedError)) else str(e)
        raise lx.error(token, f"not a valid {t} default: {problem}") from None


def _literal_json(t: IcebergType, token: Token) -> Any:
    """The token as the JSON value Appendix D uses for ``t`` (parsed and checked by values.py)."""
    name = getattr(t, "name", "")
    if name == "boolean":
        if not token.is_word("true", "false"):
            raise ValueError("expected true or false")
        return token.value.lower() == "true"
    if name in ("int", "long"):
        if token.kind != "number" or not re.fullmatch(r"[+-]?\d+", token.value):
            raise ValueError("expected a whole number")
        return int(token.value)
    if name in ("float", "double"):
        value = float(token.value) if token.kind == "number" else math.nan
        if not math.isfinite(value) or (name == "float" and abs(value) > _FLOAT_MAX):
            raise ValueError(f"expected a finite number that fits a {name}")
        return value
    if isinstance(t, DecimalType):
        if token.kind not in ("number", "string"):
            raise ValueError("expected a number")
        return _decimal_text(t, token.value)
    if isinstance(t, FixedType) or name == "binary":
        if token.kind not in ("hex", "string"):
            raise ValueError("expected X'hex digits'")
        return token.value.replace(" ", "").lower()
    if token.kind != "string":
        raise ValueError("expected a quoted value")
    text = token.value
    if name.startswith("timestamp"):
        text = _DATE_SPACE_TIME.sub(r"\1T\2", text)  # '2024-01-01 10:00' as SQL writes it
        if name.startswith("timestamptz") and text.endswith("Z"):
            text = text[:-1] + "+00:00"
    return text


def _decimal_text(t: DecimalType, text: str) -> str:
    with localcontext() as ctx:
        ctx.prec = 200  # the default 28 digits would round (or refuse) decimal(38, s) values
        value = Decimal(text)
        if not value.is_finite():
            raise ValueError("not a finite number")
        scaled = value.quantize(Decimal(1).scaleb(-t.scale))  # 1.5 -> 1.50 for scale 2
        if scaled != value:
            raise ValueError(f"more than {t.scale} digits after the decimal point")
    if scaled != 0 and len(scaled.as_tuple().digits) > t.precision:
        raise ValueError(f"more than {t.precision} digits")
    return format(scaled, "f")


# --------------------------------------------------------------------------- partitions and sorting


def _column_ref(lx: Lexer, schema: Schema, first: Token | None = None) -> tuple[int, Token]:
    """A (dotted, optionally `quoted`) column name, resolved exactly, else case-insensitively."""
    start = first or _name(lx, "a column name")
    if start.kind not in ("ident", "quoted"):
        raise lx.error(start, "expected a column name")
    parts = [start.value]
    while lx.accept_punct("."):
        parts.append(_name(lx, "a nested column name after '.'").value)
    name = ".".join(parts)
    by_name = {schema.column_name(i): i for i in schema.field_ids()}
    if name in by_name:
        return by_name[name], start
    folded = [i for n, i in by_name.items() if n is not None and n.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0], start
    columns = [f.name for f in schema.fields]
    guess = difflib.get_close_matches(name, [n for n in by_name if n], n=1)
    hint = f" (did you mean {guess[0]!r}?)" if guess else ""
    raise lx.error(start, f"no column named {name!r}{hint}; columns: {', '.join(columns)}")


def _term(lx: Lexer, schema: Schema) -> tuple[Transform, int]:
    """``col``, ``transform(col)``, ``bucket(n, col)`` / ``truncate(w, col)`` (either order, as Spark)."""
    first = _name(lx, "a column name or a transform such as days(ts)")
    if first.kind != "ident" or not lx.peek().is_punct("("):
        return _ONE_ARG_TRANSFORMS["identity"], _column_ref(lx, schema, first)[0]
    lx.next()
    name = first.value.lower()
    if name in ("bucket", "truncate"):
        if lx.peek().kind == "number":
            width_token, width = lx.peek(), _int_arg(lx, "a width")
            lx.expect_punct(",", f"expected ',' after the width of {name}(")
            source_id, _ = _column_ref(lx, schema)
        else:
            source_id, _ = _column_ref(lx, schema)
            lx.expect_punct(",", f"expected ',' and a width after the column of {name}(")
            width_token, width = lx.peek(), _int_arg(lx, "a width")
        if not 0 < width <= 0x7FFFFFFF:
            raise lx.error(width_token, f"the width of {name} must be a positive 32-bit integer")
        transform = parse_transform(f"{name}[{width}]")
    elif name in _ONE_ARG_TRANSFORMS:
        source_id, _ = _column_ref(lx, schema)
        transform = _ONE_ARG_TRANSFORMS[name]
    else:
        raise lx.error(first, f"unknown transform; expected one of {_TRANSFORM_HELP}")
    lx.expect_punct(")", f"expected ')' to close {name}(")
    return transform, source_id


R = TypeVar("R")


def _items(lx: Lexer, parse_one: Callable[[], R], check: Callable[[list[R]], object]) -> list[R]:
    """Comma-separated items; ``check`` runs after each one so an error points at its item."""
    items: list[R] = []
    while True:
        start = lx.peek()
        items.append(parse_one())
        try:
            check(items)
        except UsageError as e:
            raise lx.error(start, e.message) from None
        if lx.accept_punct(","):
            continue
        token = lx.peek()
        if token.kind != "end":
            raise lx.error(token, "expected ',' or the end of the list")
        return items


def parse_partition_spec(text: str, schema: Schema, spec_id: int = 0) -> PartitionSpec:
    """``days(ts), bucket(16, id), truncate(4, name), category`` -> spec with Java's names and ids.

    Fields are named as Java's ``PartitionSpec.Builder`` names them (``ts_day``, ``id_bucket``,
    ``name_trunc``, the column name for identity) unless ``... as name`` is given. Empty text
    gives the unpartitioned spec.
    """
    lx = Lexer(text, "partition spec")
    if lx.peek().kind == "end":
        return PartitionSpec(spec_id, ())

    def one() -> PartitionRequest:
        transform, source_id = _term(lx, schema)
        name = _name(lx, "a partition field name after 'as'").value if lx.accept_word("as") else None
        return PartitionRequest(source_id, transform, name)

    requests = _items(lx, one, lambda reqs: build_partition_spec(schema, reqs, spec_id))
    return build_partition_spec(schema, requests, spec_id)


def parse_sort_order(text: str, schema: Schema, order_id: int = 1) -> SortOrder:
    """``id desc nulls last, days(ts)``: ascending by default; nulls first for asc, last for desc.

    Empty text gives the unsorted order (id 0).
    """
    lx = Lexer(text, "sort order")
    if lx.peek().kind == "end":
        return UNSORTED

    def one() -> SortRequest:
        transform, source_id = _term(lx, schema)
        direction = lx.accept_word("asc", "desc")
        desc = direction is not None and direction.value.lower() == "desc"
        nulls: NullOrder | None = None
        if lx.accept_word("nulls"):
            which = lx.accept_word("first", "last")
            if which is None:
                raise lx.error(lx.peek(), "expected 'first' or 'last' after 'nulls'")
            nulls = "nulls-first" if which.value.lower() == "first" else "nulls-last"
        return SortRequest(source_id, transform, "desc" if desc else "asc", nulls)

    requests = _items(lx, one, lambda reqs: build_sort_order(schema, reqs, order_id))
    return build_sort_order(schema, requests, order_id)
