"""A coin toss on the games contract (settlement API 2), three dice deciding
it (the RNG draws dice three at a time): an odd total is heads, even tails.
Its rules data name everything that decides a payout: `pays` (a win returns
the stake times `pays`) and `revision`, the version of the payout code:
revision 2 keeps a 5% commission on winnings (rounded up to a whole minor
unit).

What a release installs and which revisions it rebuilds from rules data
(`ledger_game_from_rules`) are its `release.json`; `silent_change` makes a
release that pays revision 1 like revision 2 (the wrong way to change a
payout: the rules data stay the same, the code does not).
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ledger.plugins import (
    SETTLEMENT_API,
    SIMULATED_PLAY,
    BetView,
    Draw,
    GameRegistry,
    InvalidCommandError,
    RecordedAction,
    Step,
    hookimpl,
)

RELEASE: Final = json.loads((Path(__file__).parent / "release.json").read_text())
THREE_DICE: Final[Draw] = {"kind": "dice", "count": 3}
DEALER: Final = "dealer"


def commission(rules: Mapping[str, Any]) -> bool:
    """Whether this code keeps a commission on a win under `rules`."""
    return rules["revision"] >= 2 or bool(RELEASE["silent_change"])


class Coin:
    bets: Sequence[str] = ("heads", "tails")
    settlement_api = SETTLEMENT_API
    capabilities: frozenset[str] = frozenset({SIMULATED_PLAY})
    close_action = "close_betting"
    fault_action = None
    draws: Mapping[str, Mapping[str, int]] = {"dice": {"low": 1, "high": 6}}

    def __init__(self, game_id: str, rules: Mapping[str, Any]) -> None:
        self.id = game_id
        self.rules = dict(rules)

    def validate_bet(self, bet: Mapping[str, Any], placed: Mapping[str, BetView]) -> dict[str, Any]:
        if set(bet) != {"bet"} or bet["bet"] not in self.bets:
            raise InvalidCommandError(f"unknown bet {dict(bet)!r}: heads or tails")
        return {"bet": bet["bet"]}

    def validate_args(self, actor: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if args:
            raise InvalidCommandError(f"{action} takes no arguments")
        return {}

    def returned(self, stake: int) -> int:
        """What a winning bet of `stake` returns (stake included)."""
        won = stake * self.rules["pays"]
        kept = -(-(won - stake) // 20)  # 5% of the winnings, rounded up
        return won - kept if commission(self.rules) else won

    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        closed = any(a["action"] == "close_betting" for a in actions)
        toss = next((sum(a["drawn"]) for a in actions if a["action"] == "toss"), None)
        face = None if toss is None else "heads" if toss % 2 else "tails"
        settle = {
            bet_id: self.returned(view["stake"]) if view["bet"]["bet"] == face else 0
            for bet_id, view in bets.items()
            if face is not None
        }
        moves: dict[str, dict[str, Draw | None]] = (
            {}
            if face
            else {DEALER: {"toss": THREE_DICE}}
            if closed
            else {DEALER: {"close_betting": None}}
        )
        return {
            "state": {"face": face},
            "betting": not closed,
            "moves": moves,
            "settle": settle,
            "void": None,
            "over": face is not None,
            "flags": [],
        }

    # Capability "simulated-play": the dealer closes, then tosses.
    def seats(self) -> int:
        return 0

    def pick_bet(self, rng: random.Random) -> str:
        return rng.choice(list(self.bets))

    def stake_multipliers(self, bet: str) -> Sequence[int]:
        return (1, 2)

    def fault_reasons(self) -> Sequence[str]:
        return ()

    def simulated_round(self, bets: Mapping[str, BetView]) -> Tossed:
        return Tossed()


class Tossed:
    def __init__(self) -> None:
        self.done: list[str] = []

    def next_move(self) -> tuple[str, str, Draw | None] | None:
        if not self.done:
            return DEALER, "close_betting", None
        return (DEALER, "toss", THREE_DICE) if len(self.done) == 1 else None

    def apply(self, actor: str, action: str, drawn: Sequence[int]) -> None:
        self.done.append(action)


@hookimpl
def ledger_register_games(registry: GameRegistry) -> None:
    registry.add(Coin("coin", RELEASE["installs"]))


@hookimpl
def ledger_game_from_rules(game_id: str, rules: Mapping[str, Any]) -> Coin | None:
    """Coin rules of a revision this release implements, exactly as it declares them."""
    if set(rules) != {"game", "revision", "pays"} or rules["game"] != "coin":
        return None
    if rules["revision"] not in RELEASE["rebuilds"] or type(rules["pays"]) is not int:
        return None
    return Coin(game_id, rules)
