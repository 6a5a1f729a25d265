"""The last few rounds' tables, so a step replays only the actions it has not seen.

`XiDach.step(bets, actions)` is a pure function of the whole history: called
once per action, a round of n actions would replay 1 + 2 + ... + n of them.
Each round's table is kept after its step with a copy of what it was built
from: its bets and every action applied, copied deep enough that an input
edited in place after the call no longer equals the copy. A later call whose
bets equal a kept round's and whose actions begin with its copied ones
applies only the new actions (the comparisons run in C, the copies are made
once per action); anything else replays from the start. A table is taken out
while it is advanced, so two threads never advance one table, and a failed
step keeps nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.plugins import BetView, RecordedAction
from ledger_xidach.table import Round

KEPT = 64  # rounds in play at once, across every table this process settles or verifies


@dataclass
class Kept:
    bets: dict[str, dict[str, Any]]  # copies of the bets' views, their `bet` copied too
    actions: list[dict[str, Any]]  # copies of the actions applied, their args and cards too
    table: Round


def copied_bets(bets: Mapping[str, BetView]) -> dict[str, dict[str, Any]] | None:
    """A copy equal to `bets` while they are not edited, or None if a bet is not
    plain values (`new_round` reads a bet's `bet` and `stake`)."""
    copies = {}
    for bet_id, view in bets.items():
        bet = view["bet"]
        if not isinstance(bet, Mapping) or not all(type(v) in (int, str) for v in bet.values()):
            return None
        copies[bet_id] = {**view, "bet": dict(bet)}
    return copies


def copied_action(recorded: RecordedAction) -> dict[str, Any] | None:
    """A copy equal to the action while it is not edited, or None if it is not plain values."""
    args, drawn = recorded["args"], recorded["drawn"]
    if not isinstance(args, Mapping) or not all(type(v) is str for v in args.values()):
        return None
    if not isinstance(drawn, list | tuple) or not all(type(card) is int for card in drawn):
        return None
    return {**recorded, "args": dict(args), "drawn": list(drawn)}


class Replays:
    """Tables of rounds in play, each with copies of its bets and applied actions."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, ...], Kept] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Kept | None:
        """The kept round these bets are, if its actions begin `actions`."""
        with self._lock:
            kept = self._kept.pop(tuple(bets), None)
        if kept is None:
            return None
        applied = len(kept.actions)
        if applied > len(actions) or kept.bets != bets or kept.actions != list(actions[:applied]):
            return None
        return kept

    def keep(
        self,
        bets: Mapping[str, BetView],
        actions: Sequence[RecordedAction],
        table: Round,
        kept: Kept | None,
    ) -> None:
        """Keep `table`, now past `actions` (copying only those `kept` had not)."""
        if kept is None:
            copies = copied_bets(bets)
            if copies is None:
                return
            kept = Kept(copies, [], table)
        for recorded in actions[len(kept.actions) :]:
            copy = copied_action(recorded)
            if copy is None:
                return
            kept.actions.append(copy)
        kept.table = table
        key = tuple(bets)
        with self._lock:
            self._kept[key] = kept
            self._kept.move_to_end(key)
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
