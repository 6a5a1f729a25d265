"""Remembered replays: the game's step after a round's log, per round.

Every command on a round asks the game what may happen next, which means
replaying the round's recorded actions through `game.step` from the first:
O(n) game steps per command and O(n²) per round. A game is a pure function
of (bets, actions), so the node remembers, per round, the log it last
replayed with the actions and step it got, and continues from there.

The memory is never trusted over the events: it is used only when the round
as loaded now (from its verified events) has equal bets and its log begins
with exactly the entries remembered (compared entry by entry, each a copy
taken when it was remembered); anything else is replayed from the start.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from ledger.domain.copying import copy_plain
from ledger.domain.round_records import LogEntry
from ledger.games.api import BetView, RecordedAction, Step, Stepping
from ledger.games.replay import replay_from

ROUNDS_REMEMBERED = 1024


@dataclass(frozen=True)
class _Replayed:
    game: Stepping
    bets: dict[str, BetView]
    log: tuple[LogEntry, ...]
    actions: tuple[RecordedAction, ...]
    step: Step


class StepCache:
    """The game's step after a round's log, continued from the last one seen."""

    def __init__(self, maxsize: int = ROUNDS_REMEMBERED) -> None:
        self._maxsize = maxsize
        self._rounds: OrderedDict[UUID, _Replayed] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0  # replays continued from a remembered step (for tests and profiling)

    def replay(
        self,
        game: Stepping,
        round_id: UUID,
        bets: Mapping[str, BetView],
        log: Sequence[LogEntry],
    ) -> tuple[list[RecordedAction], Step]:
        """`ledger.games.replay.replay(game, bets, log)`, continued from what is
        remembered of this round when that still matches the round."""
        known = self._usable(game, round_id, bets, log)
        if known is None:
            actions: list[RecordedAction] = []
            step = game.step(bets, actions)
            start = _Replayed(game, {}, (), (), step)
        else:
            self.hits += 1
            actions, step = copy_plain(list(known.actions)), copy_plain(known.step)
            start = known
        actions, step = replay_from(game, bets, log, actions, step)
        if known is None or len(known.log) < len(log):  # else: remembered as it is
            self._keep(game, round_id, bets, start, log, actions, step)
        return actions, step

    def remember(
        self,
        game: Stepping,
        round_id: UUID,
        bets: Mapping[str, BetView],
        log: Sequence[LogEntry],
        actions: Sequence[RecordedAction],
        step: Step,
    ) -> None:
        """`step` is the game's step after `actions`, which `log` records (a
        command about to save one more action tells the cache what follows)."""
        known = self._usable(game, round_id, bets, log) or _Replayed(game, {}, (), (), step)
        self._keep(game, round_id, bets, known, log, actions, step)

    def forget(self, round_id: UUID) -> None:
        with self._lock:
            self._rounds.pop(round_id, None)

    def _usable(
        self,
        game: Stepping,
        round_id: UUID,
        bets: Mapping[str, BetView],
        log: Sequence[LogEntry],
    ) -> _Replayed | None:
        with self._lock:
            known = self._rounds.get(round_id)
        if (
            known is None
            or known.game is not game
            or len(known.log) > len(log)
            or known.bets != bets
            or any(kept != entry for kept, entry in zip(known.log, log, strict=False))
        ):
            return None
        return known

    def _keep(
        self,
        game: Stepping,
        round_id: UUID,
        bets: Mapping[str, BetView],
        known: _Replayed,
        log: Sequence[LogEntry],
        actions: Sequence[RecordedAction],
        step: Step,
    ) -> None:
        # Own copies (of what is new), in and out: nothing a caller does to its
        # round or to what it was handed can change what is remembered.
        replayed = _Replayed(
            game=game,
            bets=known.bets if known.bets == bets else copy_plain(dict(bets)),
            log=known.log + tuple(copy_plain(list(log[len(known.log) :]))),
            actions=known.actions + tuple(copy_plain(list(actions[len(known.actions) :]))),
            step=copy_plain(step),
        )
        with self._lock:
            self._rounds[round_id] = replayed
            self._rounds.move_to_end(round_id)
            while len(self._rounds) > self._maxsize:
                self._rounds.popitem(last=False)
