"""A faster deep copy for the aggregates the repository's cache hands out.

eventsourcing deep-copies every aggregate it takes from its cache (and the
ledger's application copies each one it puts back after a save), so a command
that fails half-way never corrupts the cached one. `copy.deepcopy` pays a
generic dispatch, a memo entry and a `__reduce_ex__` round trip for every
UUID and datetime. An aggregate's state is plain JSON-like data built by its
own event handlers (each attribute its own tree: nothing in it is shared or
cyclic) plus immutable leaves, so `PlainCopy.__deepcopy__` copies dicts and
lists as trees, shares immutable leaves (as `deepcopy` shares strings) and
hands anything else to `copy.deepcopy`. Should an attribute ever hold a cycle,
the copy falls back to `copy.deepcopy` for it.
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


def copy_plain(value: Any) -> Any:
    """A deep copy of a tree of dicts, lists, sets and tuples over immutable
    leaves (dict keys are hashable, so shared); anything else goes to
    `copy.deepcopy`. A cycle raises RecursionError."""
    kind = type(value)
    if kind is dict:
        return {key: copy_plain(item) for key, item in value.items()}
    if kind is list:
        return [copy_plain(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    if kind is set:
        return {copy_plain(item) for item in value}
    if kind is tuple:
        return tuple(copy_plain(item) for item in value)
    return copy.deepcopy(value)


class PlainCopy:
    """Mixin: `copy.deepcopy(aggregate)` through `copy_plain`, attribute by attribute."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        made = object.__new__(type(self))
        memo[id(self)] = made
        state = {}
        for name, value in self.__dict__.items():
            try:
                state[name] = copy_plain(value)
            except RecursionError:
                state[name] = copy.deepcopy(value, memo)
        made.__dict__.update(state)
        return made
