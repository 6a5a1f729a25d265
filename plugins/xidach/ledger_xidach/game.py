"""The `Game` the core calls for a Xì dách profile (games contract, settlement API 2).

Bets are ``{"seat": N}`` (canonical; ``{"bet": "seat:N"}``, the catalogue's
spelling, is accepted too): one bet per seat, N in 1..seats. Actors are
``dealer`` and ``seat:N``; every action takes no arguments (``{}``) but a
misdeal, ``dealer fault`` with ``{"reason": TEXT}``. The
state machine and the order of play are in `ledger_xidach.table`.
"""

from __future__ import annotations

import random
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ledger.plugins import (
    CARDS,
    SETTLEMENT_API,
    SIMULATED_PLAY,
    BetView,
    DrawRange,
    InvalidCommandError,
    RecordedAction,
    Step,
)
from ledger_xidach.replays import Replays
from ledger_xidach.rules import XiDachRules
from ledger_xidach.simulated import STAKE_MULTIPLIERS, PlayedRound
from ledger_xidach.table import DEALER, FAULT, Round

PLAYER_ACTIONS: Final = frozenset({"hit", "stand"})
MAX_REASON: Final = 200
DEALER_ACTIONS: Final = frozenset({"close_betting", "deal", "draw", "stop"})


class XiDach:
    """One profile of the game: its id and its rules, everything else derived."""

    settlement_api: int = SETTLEMENT_API
    # No exact paytable: the return depends on the players' and dealer's decisions.
    capabilities: frozenset[str] = frozenset({SIMULATED_PLAY})
    close_action: str = "close_betting"
    fault_action: str | None = FAULT  # a misdeal its dealer device reports
    draws: Mapping[str, DrawRange] = {"cards": CARDS}

    def __init__(self, game_id: str, rules: XiDachRules) -> None:
        self.id = game_id
        self.table_rules = rules
        self.rules: Mapping[str, Any] = rules.profile()
        # The catalogue: one line per seat of the table.
        self.bets: Sequence[str] = tuple(f"seat:{n}" for n in range(1, rules.seats + 1))
        self._replays = Replays()

    # -- bets ----------------------------------------------------------------

    def _seat(self, bet: object) -> int:
        seat: object = None
        if isinstance(bet, Mapping) and set(bet) == {"bet"} and isinstance(bet["bet"], str):
            kind, _, number = bet["bet"].partition(":")
            if kind != "seat" or not self._seat_number(number):
                raise InvalidCommandError(
                    f"unknown bet {reprlib.repr(bet['bet'])}: "
                    f"bet on seat:1..seat:{self.table_rules.seats}",
                    code="unknown_bet",
                    param="bet",
                )
            seat = int(number)
        elif isinstance(bet, Mapping) and set(bet) == {"seat"}:
            seat = bet["seat"]
        else:
            raise InvalidCommandError(
                f'a xì dách bet is {{"seat": N}} or {{"bet": "seat:N"}}, got {reprlib.repr(bet)}',
                code="invalid_bet",
                param="bet",
            )
        if type(seat) is not int or not 1 <= seat <= self.table_rules.seats:
            raise InvalidCommandError(
                f"seat must be an integer 1..{self.table_rules.seats}, got {reprlib.repr(seat)}",
                code="invalid_bet",
                param="bet",
            )
        return seat

    def validate_bet(self, bet: Mapping[str, Any], placed: Mapping[str, BetView]) -> dict[str, Any]:
        seat = self._seat(bet)
        for view in placed.values():
            if view["bet"].get("seat") == seat:
                raise InvalidCommandError(
                    f"seat {seat} already has a bet", code="invalid_bet", param="bet"
                )
        return {"seat": seat}

    # -- actions -------------------------------------------------------------

    def validate_args(self, actor: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if actor == DEALER and action == FAULT:
            reason = args.get("reason") if isinstance(args, Mapping) else None
            if set(args) != {"reason"} or not isinstance(reason, str) or not reason.strip():
                raise InvalidCommandError(
                    'xì dách: a misdeal needs {"reason": TEXT}',
                    code="invalid_action_args",
                    param="args",
                )
            if len(reason) > MAX_REASON:
                raise InvalidCommandError(
                    f"xì dách: a misdeal's reason is at most {MAX_REASON} characters",
                    code="invalid_action_args",
                    param="args",
                )
            return {"reason": reason}
        if not isinstance(args, Mapping) or args:
            raise InvalidCommandError(
                f"xì dách: {action} takes no arguments, got {args!r}",
                code="invalid_action_args",
                param="args",
            )
        if actor == DEALER:
            if action in DEALER_ACTIONS or self._check_target(action):
                return {}
        elif self._player(actor) and action in PLAYER_ACTIONS:
            return {}
        raise InvalidCommandError(
            f"xì dách: {actor!r} has no action {action!r}", code="unknown_action", param="action"
        )

    def _check_target(self, action: str) -> bool:
        kind, _, seat = action.partition(":")
        return kind == "check" and self._seat_number(seat)

    def _player(self, actor: str) -> bool:
        kind, _, seat = actor.partition(":")
        return kind == "seat" and self._seat_number(seat)

    def _seat_number(self, text: str) -> bool:
        # Digits only, no leading zero: one spelling per seat.
        return text.isdigit() and text[0] != "0" and int(text) <= self.table_rules.seats

    # -- the round -----------------------------------------------------------

    def new_round(self, bets: Mapping[str, BetView]) -> Round:
        """A round over the bets standing when betting closed."""
        seats: dict[int, tuple[str, int]] = {}
        for bet_id, view in bets.items():
            seat = self._seat(view["bet"])
            if seat in seats:
                raise InvalidCommandError(f"two bets on seat {seat}", code="invalid_bet")
            stake = view["stake"]
            if type(stake) is not int or stake < 1:
                raise InvalidCommandError(
                    f"stake of bet {bet_id} must be a positive integer",
                    code="invalid_amount",
                    param="stake",
                )
            seats[seat] = (bet_id, stake)
        return Round(self.table_rules, seats)

    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        # The same as replaying every action on a new round, which is what runs
        # when the inputs are not plain values or no kept table fits them.
        kept = self._replays.take(bets, actions)
        table, applied = (kept.table, len(kept.actions)) if kept else (self.new_round(bets), 0)
        for recorded in actions[applied:]:
            self.validate_args(recorded["actor"], recorded["action"], recorded["args"])
            table.apply(
                recorded["actor"],
                recorded["action"],
                recorded["drawn"],
                recorded["args"].get("reason", ""),
            )
        step = to_step(table)
        self._replays.keep(bets, actions, table, kept)
        return step

    # -- capability "simulated-play": turns, played by `ledger_xidach.strategy` --

    def seats(self) -> int:
        return self.table_rules.seats

    def pick_bet(self, rng: random.Random) -> str:
        return rng.choice(list(self.bets))  # a seat (rounds of turns seat players in order)

    def stake_multipliers(self, bet: str) -> Sequence[int]:
        return STAKE_MULTIPLIERS

    def fault_reasons(self) -> Sequence[str]:
        return ()  # the simulated dealer never misdeals

    def simulated_round(self, bets: Mapping[str, BetView]) -> PlayedRound:
        return PlayedRound(self.new_round(bets))


def to_step(table: Round) -> Step:
    moves = table.moves()
    return {
        "state": table.state(),
        "betting": table.phase == "betting",
        "moves": moves,
        "settle": dict(table.last_settle),
        "void": table.void_reason,  # a misdeal the dealer device reported
        "over": table.phase in ("over", "voided"),
        "flags": list(table.last_flags),
    }
