"""A faster deep copy for the aggregates the repository's cache hands out.

eventsourcing deep-copies every aggregate it takes from its cache, so a
command that fails half-way never corrupts the cached one. `copy.deepcopy`
pays a generic dispatch, a memo entry and a `__reduce_ex__` round trip for
every UUID and datetime; a round's bets, log and results are plain JSON-like
data plus such immutable leaves. `PlainCopy.__deepcopy__` copies those
containers structurally (the same result, aliasing kept through the memo),
shares immutable leaves as `deepcopy` shares strings, and hands anything
else to `copy.deepcopy`.
"""

from __future__ import annotations

import copy
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Self
from uuid import UUID

# Leaves that cannot change: shared, never copied (exact types: a subclass may not be).
_IMMUTABLE: frozenset[type] = frozenset(
    {str, int, float, bool, bytes, type(None), UUID, datetime, date, time, timedelta, Decimal}
)


def copy_plain(value: Any, memo: dict[int, Any]) -> Any:
    """A deep copy of `value`, as `copy.deepcopy(value, memo)` would make it."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    known = memo.get(id(value))
    if known is not None:
        return known
    if kind is dict:
        made: Any = {}
        memo[id(value)] = made
        for key, item in value.items():
            made[key if type(key) in _IMMUTABLE else copy_plain(key, memo)] = copy_plain(item, memo)
    elif kind is list:
        made = []
        memo[id(value)] = made
        made.extend(copy_plain(item, memo) for item in value)
    elif kind is set:
        made = {copy_plain(item, memo) for item in value}
    elif kind is tuple:
        made = tuple(copy_plain(item, memo) for item in value)
    else:
        return copy.deepcopy(value, memo)
    # As deepcopy does: keep the original alive while the memo refers to it by id.
    memo.setdefault(id(memo), []).append(value)
    memo[id(value)] = made
    return made


class PlainCopy:
    """Mixin: `copy.deepcopy(aggregate)` through `copy_plain`, attribute by attribute."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        made = object.__new__(type(self))
        memo[id(self)] = made
        made.__dict__.update(
            {name: copy_plain(value, memo) for name, value in self.__dict__.items()}
        )
        return made
