"""The last few rounds' tables, so a step replays only the actions it has not seen.

`XiDach.step(bets, actions)` is a pure function of the whole history: called
once per action, a round of n actions would replay 1 + 2 + ... + n of them.
Each round's table is kept after its step, under a snapshot of what it was
built from: its bets and every action applied (as immutable values, so an
input edited in place after the call can never match a snapshot it no longer
equals). A later call whose bets equal a kept round's and whose actions
extend its snapshot applies only the new actions; anything else replays from
the start. A table is taken out while it is advanced, so two threads never
advance one table, and a failed step keeps nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from ledger.games.api import BetView, RecordedAction
from ledger_xidach.table import Round

KEPT = 64  # rounds in play at once, across every table this process settles or verifies

Frozen = tuple[Any, ...]


def frozen_bets(bets: Mapping[str, BetView]) -> Frozen | None:
    """What `new_round` reads of the bets, as immutable values (None: not plain)."""
    frozen = []
    for bet_id, view in bets.items():
        bet, stake = view["bet"], view["stake"]
        if not isinstance(bet, Mapping) or type(stake) is not int:
            return None
        items = tuple(sorted(bet.items()))
        if not all(type(value) in (int, str) for _, value in items):
            return None
        frozen.append((bet_id, items, stake))
    return tuple(frozen)


def frozen_action(recorded: RecordedAction) -> Frozen | None:
    """What validating and applying an action read of it, as immutable values."""
    actor, action, args, drawn = (
        recorded["actor"],
        recorded["action"],
        recorded["args"],
        recorded["drawn"],
    )
    if type(actor) is not str or type(action) is not str or not isinstance(args, Mapping):
        return None
    items = tuple(sorted(args.items()))
    if not all(type(value) is str for _, value in items):
        return None
    cards = tuple(drawn) if isinstance(drawn, list | tuple) else None
    if cards is None or not all(type(card) is int for card in cards):
        return None
    return (actor, action, items, cards)


def snapshot(
    bets: Mapping[str, BetView], actions: Sequence[RecordedAction]
) -> tuple[Frozen, list[Frozen]] | None:
    """The bets and actions as immutable values, or None if any is not plain."""
    key = frozen_bets(bets)
    if key is None:
        return None
    seen = []
    for recorded in actions:
        frozen = frozen_action(recorded)
        if frozen is None:
            return None
        seen.append(frozen)
    return key, seen


class Replays:
    """Tables of rounds in play, each with the actions applied to it."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Frozen, tuple[list[Frozen], Round]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, bets: Frozen, actions: Sequence[Frozen]) -> tuple[Round, int] | None:
        """A kept table whose actions begin `actions`, and how many it applied."""
        with self._lock:
            kept = self._kept.pop(bets, None)
        if kept is None:
            return None
        applied, table = kept
        if len(applied) > len(actions) or any(
            mine != theirs for mine, theirs in zip(applied, actions, strict=False)
        ):
            return None
        return table, len(applied)

    def keep(self, bets: Frozen, actions: list[Frozen], table: Round) -> None:
        with self._lock:
            self._kept[bets] = (actions, table)
            self._kept.move_to_end(bets)
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
