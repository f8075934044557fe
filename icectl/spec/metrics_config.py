"""Column metrics modes (table properties ``write.metadata.metrics.*``, Java's ``MetricsConfig``).

A writer keeps, per column: nothing (``none``), counts only (``counts``: value, null and NaN
counts and the column size), counts and bounds truncated to N characters or bytes
(``truncate(N)``; Iceberg's default is ``truncate(16)``), or whole bounds (``full``).
``write.metadata.metrics.default`` sets every column's mode, ``write.metadata.metrics.column.<name>``
one column's (by its full dotted name). With no default set, a table with more columns than
``write.metadata.metrics.max-inferred-column-defaults`` (100) keeps metrics for the first 100
only, as Java does to keep manifests small.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from icectl.spec.schema import Schema

DEFAULT_MODE = "write.metadata.metrics.default"
COLUMN_MODE_PREFIX = "write.metadata.metrics.column."
MAX_INFERRED = "write.metadata.metrics.max-inferred-column-defaults"
MAX_INFERRED_DEFAULT = 100
_TRUNCATE = re.compile(r"^truncate\((\d+)\)$", re.IGNORECASE)


@dataclass(frozen=True)
class MetricsMode:
    kind: str  # none, counts, truncate, full
    length: int | None = None  # truncate's N

    @property
    def counts(self) -> bool:
        return self.kind != "none"

    @property
    def bounds(self) -> bool:
        return self.kind in ("truncate", "full")

    @property
    def truncate(self) -> int | None:
        """Bounds are cut to this many characters or bytes (None: whole)."""
        return self.length if self.kind == "truncate" else None


NONE = MetricsMode("none")
TRUNCATE_16 = MetricsMode("truncate", 16)


def parse_mode(text: str) -> MetricsMode | None:
    """A mode from its property value (None: not a mode; Java then keeps the default)."""
    t = text.strip().lower()
    if t in ("none", "counts", "full"):
        return MetricsMode(t)
    m = _TRUNCATE.match(t)
    if m and int(m.group(1)) > 0:
        return MetricsMode("truncate", int(m.group(1)))
    return None


def metrics_modes(properties: Mapping[str, str], schema: Schema) -> Callable[[int], MetricsMode]:
    """Each field id's metrics mode under the table's properties."""
    explicit = parse_mode(properties[DEFAULT_MODE]) if DEFAULT_MODE in properties else None
    default = explicit or TRUNCATE_16
    limited: set[int] | None = None
    if explicit is None:
        try:
            limit = int(properties.get(MAX_INFERRED, MAX_INFERRED_DEFAULT))
        except ValueError:
            limit = MAX_INFERRED_DEFAULT
        leaves = [fid for fid in schema.field_ids() if (t := schema.find_type(fid)) is not None and t.is_primitive]
        if len(leaves) > limit:
            limited = set(leaves[:limit])
    by_name = {k[len(COLUMN_MODE_PREFIX):]: parse_mode(v) for k, v in properties.items()
               if k.startswith(COLUMN_MODE_PREFIX)}

    def mode(field_id: int) -> MetricsMode:
        name = schema.column_name(field_id)
        own = by_name.get(name) if name is not None else None
        if own is not None:
            return own
        if limited is not None and field_id not in limited and schema.find_field(field_id) is not None:
            return NONE
        return default

    return mode
