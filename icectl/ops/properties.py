"""Table properties: list, set and unset them (Spark's ``ALTER TABLE ... SET / UNSET TBLPROPERTIES``,
Java's ``UpdateProperties``).

Every key and value is checked before anything is written (:func:`check_value`): reserved keys
(``format-version``, ``uuid``, ``current-snapshot-id``, ...: derived from metadata) are refused with
the command that changes what they name, and a value of a property icectl interprets must be one
it and Java read as meant (exit 2). The change is one commit of ``set-properties`` /
``remove-properties`` through :func:`icectl.table.commit.commit`; a retry re-applies the same
keys to the fresh metadata, so properties another writer set meanwhile stay (only the keys given
change, as Java's ``PropertiesUpdate`` re-applied on refresh).

``unset`` of a key the table does not have is ignored, as Java's ``UpdateProperties.remove`` does,
and reported (``not_set``, a warning on stderr). Setting a key to the value it has is no change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from icectl.catalog import open_catalog, walk_tables
from icectl.config import Config
from icectl.errors import CorruptInputError, IcectlError, UsageError
from icectl.humanize import fmt_bytes
from icectl.results import FLAT, NEXT_METADATA, UNSET, Column, CommandResult, Committed, Part, RowsResult, Unset
from icectl.spec import name_mapping
from icectl.spec.durations import human_duration
from icectl.spec.metadata import TableMetadata
from icectl.spec.properties import (
    DEFAULT_NAME_MAPPING,
    INTERPRETED_PROPERTIES,
    OWN_PATH_PROPERTIES,
    check_not_reserved,
    check_property_value,
    default_text,
)
from icectl.spec.updates import TableChange, property_updates
from icectl.storage import FileIO
from icectl.table import Table
from icectl.table.commit import commit
from icectl.table.delete_fence import entry_inside, file_identity, table_fence, table_property_problem
from icectl.table.write_guard import check_writable


@dataclass
class PropertyChange(Part):
    """One key's old and new value (None: absent)."""

    old: str | None
    new: str | None


@dataclass(kw_only=True)
class PropertiesChangeResult(CommandResult):
    """``icectl properties set|unset``: every key that changes, old -> new."""

    view: ClassVar[str] = "properties_change"

    table: str
    dry_run: bool
    changes: dict[str, PropertyChange]  # by key, in the order given
    unchanged: list[str]  # set to the value it has already
    not_set: list[str]  # unset, but absent already (ignored, as Java's UpdateProperties does)
    would_write: list[str] | Unset = UNSET  # dry run
    commit: Committed = field(default_factory=Committed, metadata=FLAT)




def check_value(key: str, value: str) -> None:
    """:func:`icectl.spec.properties.check_property_value`, and the default name mapping must parse
    as one (its parser, ``spec/name_mapping.py``, imports ``spec/properties.py``, so it is called here)."""
    check_property_value(key, value)
    if key == DEFAULT_NAME_MAPPING:
        try:
            name_mapping.from_json(value)
        except CorruptInputError as e:
            raise UsageError(e.message,
                             hint="give the JSON list of {\"field-id\", \"names\", \"fields\"} objects of the "
                                  "spec's Name Mapping Serialization") from None


def parse_assignments(pairs: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments in order; the value may be empty or contain ``=``; a key given twice
    with different values is refused (exit 2)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"{pair!r} is not KEY=VALUE", hint="use 'icectl properties unset' to remove a key")
        if key in out and out[key] != value:
            raise UsageError(f"{key} is given twice, as {out[key]!r} and {value!r}")
        out[key] = value
    return out


def _result(table: Table, md: TableMetadata, updates: Mapping[str, str], removals: Iterable[str], *,
            dry_run: bool) -> PropertiesChangeResult:
    props = md.properties
    changes: dict[str, PropertyChange] = {}
    unchanged: list[str] = []
    not_set: list[str] = []
    for key, value in updates.items():
        if props.get(key) == value:
            unchanged.append(key)
        else:
            changes[key] = PropertyChange(props.get(key), value)
    for key in removals:
        if key in props:
            changes[key] = PropertyChange(props[key], None)
        else:
            not_set.append(key)
    res = PropertiesChangeResult(table=table.identifier, dry_run=dry_run, changes=changes, unchanged=unchanged,
                                 not_set=not_set)
    res.warnings = [f"{key} is not set on table {table.identifier}: nothing to unset" for key in not_set]
    what = ", ".join(f"{k}: {_text(c.old)} -> {_text(c.new)}" for k, c in changes.items())
    if not changes:
        res.title = f"{table.identifier}: nothing to do: the properties are like that already"
    else:
        res.title = f"{'would change' if dry_run else 'changed'} {len(changes)} propert" \
                    f"{'y' if len(changes) == 1 else 'ies'} of {table.identifier}: {what}"
    return res


def _text(value: str | None) -> str:
    return "(unset)" if value is None else repr(value)


def _change(table: Table, updates: Mapping[str, str], removals: tuple[str, ...], *,
            dry_run: bool) -> PropertiesChangeResult:
    set_updates, remove = property_updates(updates, removals)  # refuses a key both set and removed
    check_writable(table)  # commit() refuses a copied table too; this makes a dry run say so
    res = _result(table, table.metadata, updates, removals, dry_run=dry_run)
    if dry_run:
        res.would_write = [NEXT_METADATA] if res.changes else []
        return res
    if not res.changes:
        return res

    def build(base: TableMetadata) -> TableChange:
        return TableChange((), (set_updates, remove))

    done = commit(table, build)
    res.commit.metadata_location, res.commit.commit_attempts = done.metadata_location, done.attempts
    return res


def catalog_entries(config: Config, io: FileIO) -> Iterator[tuple[str, str]]:
    """(name, table location) of every entry of the configured catalogs, read lazily; a catalog or
    entry that cannot be read is passed over (the folder search of :func:`table_property_problem`
    still sees a table whose metadata lies in its location)."""
    for name in config.catalogs:
        try:
            catalog = open_catalog(config, io, name)
            idents = walk_tables(catalog)
        except (IcectlError, OSError):
            continue
        for ident in idents:
            try:
                location = catalog.table_operations(ident[:-1], ident[-1]).refresh().metadata.location
            except (IcectlError, OSError):
                continue
            if location:
                yield f"{name}.{'.'.join(ident)}", location


def set_properties(table: Table, updates: Mapping[str, str], *, dry_run: bool = False,
                   entries: Callable[[], Iterable[tuple[str, str]]] | None = None) -> PropertiesChangeResult:
    """Set ``updates`` (each key and value checked first: :func:`check_value`) in one commit.
    ``entries``: the other catalog entries (name, location), asked only for a table folder
    (``write.data.path``, ...) outside the table: one holding another entry's location is refused."""
    if not updates:
        raise UsageError("give at least one KEY=VALUE")
    for key, value in updates.items():
        check_value(key, value)
        why = table_property_problem(table, value) if key in OWN_PATH_PROPERTIES else None
        if why is None and key in OWN_PATH_PROPERTIES and entries is not None and _outside(table, value):
            found = entry_inside(value, table, entries())
            why = f"holds the location of catalog entry {found}" if found else None
        if why is not None:
            raise UsageError(f"{key}={value!r} {why}: the delete fence would reach files that are not "
                             f"{table.identifier}'s", hint="give a folder of this table's own (its location, a "
                                                           "folder inside it, or one that holds no other table)")
    res = _change(table, dict(updates), (), dry_run=dry_run)
    home = table_fence(table).home  # the table's folder as the delete fence knows it
    for key in OWN_PATH_PROPERTIES:
        folder = updates.get(key)
        if folder is None or key not in res.changes or not home:
            continue
        if not (file_identity(folder).rstrip("/") + "/").startswith(home.rstrip("/") + "/"):
            res.warnings.append(f"{key}={folder} is outside the table location {table.location}: icectl counts "
                                "the files the table references under it as its own when deleting (expire-snapshots, "
                                "drop --purge); remove-orphan-files never cleans it")
    return res


def _outside(table: Table, value: str) -> bool:
    home = table_fence(table).home
    return not home or not (file_identity(value).rstrip("/") + "/").startswith(home.rstrip("/") + "/")


def unset_properties(table: Table, keys: Iterable[str], *, dry_run: bool = False) -> PropertiesChangeResult:
    """Remove ``keys`` in one commit; a key the table lacks is ignored and reported (``not_set``)."""
    keys = tuple(dict.fromkeys(keys))
    if not keys:
        raise UsageError("give at least one KEY")
    for key in keys:
        if "=" in key and key not in table.metadata.properties:
            raise UsageError(f"{key!r}: unset takes keys, not KEY=VALUE")
        if not key:
            raise UsageError("an empty key cannot be unset")
        check_not_reserved(key)
    return _change(table, {}, keys, dry_run=dry_run)


def property_rows(md: TableMetadata, *, with_defaults: bool = False) -> list[dict[str, Any]]:
    """The table's properties by key; ``with_defaults``: also every property icectl interprets that
    the table does not set, with its default (``source`` says which is which)."""
    rows = [{"key": k, "value": v, "source": "table"} for k, v in md.properties.items()]
    if with_defaults:
        rows += [{"key": k, "value": default_text(p), "source": "default"}
                 for k, p in INTERPRETED_PROPERTIES.items() if k not in md.properties]
    return sorted(rows, key=lambda r: r["key"])


def list_properties(table: Table, *, with_defaults: bool = False) -> RowsResult:
    """``properties list``: key, value and source (``table``, or ``default`` with ``with_defaults``)."""
    title = f"Properties of {table.identifier}" + (" (with icectl's defaults)" if with_defaults else "")
    return RowsResult("properties", title, ["key", "value", "source"],
                      property_rows(table.metadata, with_defaults=with_defaults),
                      {"table": table.identifier, "metadata_location": table.metadata_location},
                      column_info={"value": Column("text"), "reads as": Column("text", value=_reads_as)},
                      terminal_columns=["key", "value", "reads as", "source"])


def _reads_as(row: dict[str, Any]) -> str:
    """A ``*-ms`` or ``*-bytes`` property's value as people read it on a terminal (``432000000`` ->
    ``5d``, ``8388608`` -> ``8 MiB``)."""
    value, key = str(row.get("value", "")), str(row.get("key", ""))
    if not value.isdigit():
        return ""
    if key.endswith("-ms"):
        return human_duration(int(value))
    return fmt_bytes(int(value)) if key.endswith("-bytes") else ""


__all__ = ["catalog_entries", "check_value", "list_properties", "parse_assignments", "property_rows", "set_properties",
           "unset_properties"]
