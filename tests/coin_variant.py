"""A tiny variant for the money tests: a coin toss paying 1:1 (a push on its edge)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ledger.domain.round import BetRecord
from ledger.errors import InvalidCommandError
from ledger.plugins import hookimpl
from ledger.plugins.registry import VariantRegistry

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


class CoinDefinition(CoinToss):
    """The coin toss as a plugin declares it (the contract's view)."""

    rules: ClassVar[dict[str, Any]] = {"pays": {"heads": 1, "tails": 1}, "edge": "push"}
    bets = ("heads", "tails")
    legal_commands: ClassVar[dict[str, list[str]]] = {
        "betting": ["place_bet", "withdraw_bet", "close_betting"],
        "closed": ["record_outcome"],
    }

    def validate_bet(self, bet: Mapping[str, Any]) -> dict[str, Any]:
        if "bet" in bet:  # the catalogue form {"bet": id}
            if set(bet) != {"bet"} or bet["bet"] not in self.bets:
                raise InvalidCommandError(f"unknown bet {dict(bet)!r}")
            return {"on": bet["bet"]}
        return super().validate_bet(bet)


class CoinPlugin:
    """A plugin object registering the coin toss (tests register it directly)."""

    @hookimpl
    def ledger_register_variants(self, registry: VariantRegistry) -> None:
        registry.add(CoinDefinition())


# Plugin objects as an entry point would name them (module attributes).
coin_plugin = CoinPlugin()
other_coin_plugin = CoinPlugin()
