"""A tiny variant for the money tests: a coin toss paying 1:1 (a push on its edge)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.domain.round import BetRecord
from ledger.errors import InvalidCommandError

FACES = ("heads", "tails", "edge")


class CoinToss:
    id = "coin"
    version = "1.0"
    rules_hash = "c01" * 21 + "c"

    def validate_bet(self, bet: Mapping[str, Any]) -> dict[str, Any]:
        if dict(bet) not in ({"on": "heads"}, {"on": "tails"}):
            raise InvalidCommandError(f"unknown bet {dict(bet)!r}: bet on heads or tails")
        return dict(bet)

    def validate_outcome(self, outcome: Mapping[str, Any]) -> dict[str, Any]:
        if set(outcome) != {"face"} or outcome["face"] not in FACES:
            raise InvalidCommandError(f"bad outcome {dict(outcome)!r}")
        return dict(outcome)

    def settle(self, outcome: Mapping[str, Any], bets: Mapping[str, BetRecord]) -> dict[str, int]:
        face = outcome["face"]
        return {
            bet_id: (
                record["stake"]
                if face == "edge"
                else 2 * record["stake"]
                if record["bet"]["on"] == face
                else 0
            )
            for bet_id, record in bets.items()
        }


VARIANTS = {CoinToss.id: CoinToss()}
