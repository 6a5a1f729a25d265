"""Bầu Cua Tôm Cá: three dice whose faces are six animals. A bet names an
animal and wins `pays` times its stake per die showing it; with none it loses.

Its moves are its own: ``dealer no_more_bets`` closes betting, ``dealer lac``
shakes three dice (each bet settles), and ``dealer misthrow`` (a physical
table's device, ``{"reason": ...}``) reports a shake it could not use: the
dealer shakes again, and the round is void after `void_after` misthrows."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ledger.plugins import (
    SETTLEMENT_API,
    SIMULATED_PLAY,
    BetView,
    Draw,
    DrawRange,
    GameRegistry,
    InvalidCommandError,
    RecordedAction,
    SimulatedRound,
    Step,
    hookimpl,
)

ANIMALS: Final = ("bau", "cua", "tom", "ca", "ga", "nai")  # faces 1..6, in order
DEALER: Final = "dealer"
CLOSE: Final = "no_more_bets"
SHAKE: Final = "lac"
MISTHROW: Final = "misthrow"
THREE_DICE: Final[Draw] = {"kind": "dice", "count": 3}


class BauCua:
    """The game under its rules data: `{"game": "bau-cua", "pays": P, "void_after": N}`."""

    bets: Sequence[str] = ANIMALS
    settlement_api = SETTLEMENT_API
    capabilities: frozenset[str] = frozenset({SIMULATED_PLAY})
    close_action = CLOSE
    fault_action: str | None = MISTHROW
    draws: Mapping[str, DrawRange] = {"dice": {"low": 1, "high": 6}}

    def __init__(self, game_id: str, pays: int = 1, void_after: int = 2) -> None:
        self.id = game_id
        self.rules: Mapping[str, Any] = {"game": "bau-cua", "pays": pays, "void_after": void_after}
        self.pays, self.void_after = pays, void_after

    def validate_bet(self, bet: Mapping[str, Any], placed: Mapping[str, BetView]) -> dict[str, Any]:
        if set(bet) != {"bet"} or bet["bet"] not in ANIMALS:
            raise InvalidCommandError(f"unknown bet {dict(bet)!r}: bet on one of {ANIMALS}")
        return {"bet": bet["bet"]}

    def validate_args(self, actor: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if action == MISTHROW:
            reason = args.get("reason")
            if set(args) != {"reason"} or not isinstance(reason, str) or not reason.strip():
                raise InvalidCommandError("a misthrow needs a reason")
            return {"reason": reason}
        if args:
            raise InvalidCommandError(f"{action} takes no arguments, not {dict(args)!r}")
        return {}

    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        closed = any(a["action"] == CLOSE for a in actions)
        misthrows = [a for a in actions if a["action"] == MISTHROW]
        shaken = next((a["drawn"] for a in actions if a["action"] == SHAKE), None)
        void = None
        if len(misthrows) >= self.void_after:
            void = f"{len(misthrows)} misthrows: {misthrows[-1]['args']['reason']}"
        settle: dict[str, int] = {}
        if shaken is not None:
            for bet_id, view in bets.items():
                hits = shaken.count(ANIMALS.index(view["bet"]["bet"]) + 1)
                settle[bet_id] = view["stake"] * (1 + self.pays * hits) if hits else 0
        over = shaken is not None or void is not None
        moves: dict[str, dict[str, Draw | None]] = (
            {}
            if over
            else {DEALER: {SHAKE: THREE_DICE, MISTHROW: None}}
            if closed
            else {DEALER: {CLOSE: None}}
        )
        return {
            "state": {"dice": shaken, "misthrows": len(misthrows)},
            "betting": not closed,
            "moves": moves,
            "settle": settle,
            "void": void,
            "over": over,
            "flags": [],
        }

    # Capability "simulated-play": one draw.
    def seats(self) -> int:
        return 0

    def pick_bet(self, rng: random.Random) -> str:
        return rng.choice(ANIMALS)

    def stake_multipliers(self, bet: str) -> Sequence[int]:
        return (1, 1, 2)

    def fault_reasons(self) -> Sequence[str]:
        return ("a die left the plate", "the bowl lifted early")

    def simulated_round(self, bets: Mapping[str, BetView]) -> SimulatedRound | None:
        return None


@hookimpl
def ledger_register_games(registry: GameRegistry) -> None:
    registry.add(BauCua("bau-cua"))


@hookimpl
def ledger_game_from_rules(game_id: str, rules: Mapping[str, Any]) -> BauCua | None:
    return from_rules(game_id, rules)


def from_rules(game_id: str, rules: Mapping[str, Any]) -> BauCua | None:
    """The game of Bầu Cua rules data, or None: another game's, or an option
    (or a value) this release does not know."""
    if set(rules) != {"game", "pays", "void_after"} or rules["game"] != "bau-cua":
        return None
    pays, void_after = rules["pays"], rules["void_after"]
    if type(pays) is not int or pays < 1 or type(void_after) is not int or void_after < 1:
        return None
    return BauCua(game_id, pays, void_after)
