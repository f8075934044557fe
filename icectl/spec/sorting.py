"""Sort orders (spec "Sorting", Appendix C "Sort Orders").

JSON key order follows Java's ``SortOrderParser``: ``transform``, ``source-id``, ``direction``,
``null-order``. Unknown keys are kept for round-trips.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from icectl.errors import CorruptInputError
from icectl.spec.partitioning import read_source_ids, write_source_ids
from icectl.spec.transforms import IDENTITY, Transform, parse_transform

SortDirection = Literal["asc", "desc"]
NullOrder = Literal["nulls-first", "nulls-last"]

UNSORTED_ORDER_ID = 0  # reserved by the spec for the unsorted order

_FIELD_KEYS = {"transform", "source-id", "source-ids", "direction", "null-order"}
_ORDER_KEYS = {"order-id", "fields"}
_Word = TypeVar("_Word", bound=str)


def _choice(obj: dict[str, Any], key: str, allowed: tuple[_Word, ...]) -> _Word:
    if key not in obj:
        raise CorruptInputError(f"sort field is missing required field {key!r}: {obj!r}")
    value = obj[key]
    # Java accepts any letter case here, and writes lower case back.
    if isinstance(value, str):
        for word in allowed:
            if value.lower() == word:
                return word  # the allowed word itself: its Literal type
    raise CorruptInputError(f"sort field {key!r} must be one of {', '.join(allowed)}; got {value!r}")


@dataclass(frozen=True)
class SortField:
    source_ids: tuple[int, ...]
    transform: Transform = IDENTITY
    direction: SortDirection = "asc"
    null_order: NullOrder = "nulls-first"
    extra: tuple[tuple[str, Any], ...] = ()

    @property
    def source_id(self) -> int:
        return self.source_ids[0]

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SortField:
        if not isinstance(obj, dict):
            raise CorruptInputError(f"a sort field must be a JSON object, got {obj!r}")
        if not isinstance(obj.get("transform"), str):
            raise CorruptInputError(f"sort field is missing required field 'transform': {obj!r}")
        return cls(
            source_ids=read_source_ids(obj, "sort field"),
            transform=parse_transform(obj["transform"]),
            direction=_choice(obj, "direction", ("asc", "desc")),
            null_order=_choice(obj, "null-order", ("nulls-first", "nulls-last")),
            extra=tuple((k, v) for k, v in obj.items() if k not in _FIELD_KEYS),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"transform": str(self.transform)}
        write_source_ids(out, self.source_ids)
        out["direction"] = self.direction
        out["null-order"] = self.null_order
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class SortOrder:
    order_id: int = UNSORTED_ORDER_ID
    fields: tuple[SortField, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()

    @property
    def is_unsorted(self) -> bool:
        return not self.fields

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SortOrder:
        if not isinstance(obj, dict):
            raise CorruptInputError(f"a sort order must be a JSON object, got {obj!r}")
        order_id = obj.get("order-id")
        if not isinstance(order_id, int) or isinstance(order_id, bool):
            raise CorruptInputError(f"sort order is missing required field 'order-id' (an int): {obj!r}")
        fields = obj.get("fields")
        if not isinstance(fields, list):
            raise CorruptInputError(f"sort order {order_id} is missing required field 'fields' (a list)")
        return cls(order_id, tuple(SortField.from_json(f) for f in fields),
                   tuple((k, v) for k, v in obj.items() if k not in _ORDER_KEYS))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"order-id": self.order_id, "fields": [f.to_json() for f in self.fields]}
        out.update(self.extra)
        return out


UNSORTED = SortOrder(UNSORTED_ORDER_ID, ())
