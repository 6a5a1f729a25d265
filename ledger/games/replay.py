"""A round's recorded life, as the game sees it: each recorded step translated
to a `RecordedAction`, the game asked after each one.

Rounds of settlement API 1 (release 0.2 and before) recorded their own event
shape (BettingClosed, OutcomeRecorded with an outcome, FaultRecorded with a
reason), which stores keep and nothing writes any more; this translation is
what lets a game of API 2 replay them (the write path, to migrate one left
open; `verify`, to re-settle every one). It is generic: the outcome fills the
one move the game offers at that point (besides ``fault``); if that move
draws randomness of kind K the outcome is ``{K: [...]}`` and its list is what
was drawn, else the outcome is the move's arguments. The core never names dice or cards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledger.domain.round_records import LogEntry
from ledger.domain.stored_names import STORED_FAULT
from ledger.errors import InvalidCommandError
from ledger.games.api import BetView, Draw, RecordedAction, Step, Stepping


def declared(game: Stepping) -> frozenset[str]:
    """The actions the game declares apart from its play: its close and its fault."""
    return frozenset(a for a in (game.close_action, game.fault_action) if a is not None)


def actor_for(step: Step, action: str) -> str | None:
    """The first actor the step lets take `action`, if any."""
    for actor, offered in step["moves"].items():
        if action in offered:
            return actor
    return None


def outcome_move(game: Stepping, step: Step) -> tuple[str, str, Draw | None] | None:
    """The one move an outcome can fill now: (actor, action, its draw)."""
    apart = declared(game)
    found = [
        (actor, action, draw)
        for actor, offered in step["moves"].items()
        for action, draw in offered.items()
        if action not in apart
    ]
    return found[0] if len(found) == 1 else None


def outcome_action(game: Stepping, step: Step, outcome: Mapping[str, Any]) -> RecordedAction | None:
    """The action `outcome` stands for after `step`, or None if it fits no move."""
    move = outcome_move(game, step)
    if move is None:
        return None
    actor, action, draw = move
    if draw is None:
        return {"actor": actor, "action": action, "args": dict(outcome), "drawn": []}
    drawn = outcome.get(draw["kind"])
    if set(outcome) != {draw["kind"]} or not isinstance(drawn, list):
        return None
    if len(drawn) != draw["count"] or not all(type(v) is int for v in drawn):
        return None
    return {"actor": actor, "action": action, "args": {}, "drawn": list(drawn)}


def entry_action(game: Stepping, step: Step, entry: LogEntry) -> RecordedAction | None:
    """The action a recorded entry stands for after `step`, or None if illegal."""
    if "action" in entry:  # recorded as the action itself (settlement API 2)
        done = entry["action"]
        offered = step["moves"].get(done["actor"], {})
        if done["action"] not in offered:
            return None
        draw = offered[done["action"]]
        if len(done["drawn"]) != (0 if draw is None else draw["count"]):
            return None
        return {
            "actor": done["actor"],
            "action": done["action"],
            "args": dict(done["args"]),
            "drawn": list(done["drawn"]),
        }
    if "outcome" in entry:
        return outcome_action(game, step, entry["outcome"])
    if STORED_FAULT in entry:  # the round's own entry for a faulty draw (settlement API 1)
        if game.fault_action is None:
            return None
        action, args = game.fault_action, {"reason": entry["fault"]}
    else:  # its own entry for betting closed
        action, args = game.close_action, {}
    actor = actor_for(step, action)
    if actor is None:
        return None
    return {"actor": actor, "action": action, "args": args, "drawn": []}


def replay(
    game: Stepping, bets: Mapping[str, BetView], log: Sequence[LogEntry]
) -> tuple[list[RecordedAction], Step]:
    """Every recorded entry as an action, and the game's step after the last;
    InvalidCommandError if an entry is not a move the game offered then."""
    return replay_from(game, bets, log, [], game.step(bets, []))


def replay_from(
    game: Stepping,
    bets: Mapping[str, BetView],
    log: Sequence[LogEntry],
    actions: list[RecordedAction],
    step: Step,
) -> tuple[list[RecordedAction], Step]:
    """`replay`, continued: `actions` are the first entries of `log` as actions
    (extended in place) and `step` the game's step after them."""
    for entry in log[len(actions) :]:
        action = entry_action(game, step, entry)
        if action is None:
            raise InvalidCommandError(
                f"{describe_entry(entry)} is not a move the game offered", code="move_not_offered"
            )
        actions.append(action)
        step = game.step(bets, actions)
    return actions, step


def describe_entry(entry: LogEntry) -> str:
    if "action" in entry:
        done = entry["action"]
        return f"{done['actor']} {done['action']} {done['args']!r} drawing {done['drawn']!r}"
    if "outcome" in entry:
        return f"outcome {entry['outcome']!r}"
    return "a faulty draw" if STORED_FAULT in entry else "closing betting"


def settlements_from(
    game: Stepping, bets: Mapping[str, BetView], log: Sequence[LogEntry], at: int
) -> tuple[dict[str, tuple[int, int]], Step]:
    """Replay `log`; for every bet a step from log entry `at` on settles, the
    action number settling it and its return; and the last step. Raises
    InvalidCommandError if an entry is not a move the game offered then, or a
    step from `at` on voids the round (a step correction re-derives with this)."""
    actions: list[RecordedAction] = []
    step = game.step(bets, actions)
    returns: dict[str, tuple[int, int]] = {}
    number = -1
    for index, entry in enumerate(log):
        number += 1 if "action" in entry else 0
        action = entry_action(game, step, entry)
        if action is None:
            raise InvalidCommandError(
                f"{describe_entry(entry)} is not a move the game offered", code="move_not_offered"
            )
        actions.append(action)
        step = game.step(bets, actions)
        if index >= at:
            if step["void"] is not None:
                raise InvalidCommandError(
                    f"the game voids the round ({step['void']})", code="correction_refused"
                )
            returns.update({bet: (number, paid) for bet, paid in step["settle"].items()})
    return returns, step
