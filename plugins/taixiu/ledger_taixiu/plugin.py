"""The plugin: two variants of the three-dice game, declared as data.

``taixiu`` (seed 000) and ``sicbo-void`` (seed 004) share the bets and the
paytable and differ only in what a faulty throw does (RULES.md §1.2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledger.plugins import hookimpl
from ledger.plugins.registry import VariantRegistry
from ledger_taixiu.rules import (
    ALL_OUTCOMES,
    BET_IDS,
    TAIXIU_PAYTABLE,
    Paytable,
    check_dice,
    parse_bet,
    paytable_profile,
    returned,
)

# What a faulty throw does, per profile.
TAIXIU_FAULTS = {
    "after_fault": "rethrow",  # bets locked, the dealer re-shakes
    "void_after": 2,  # the re-shake faulty too: void, every stake returned
}
SICBO_VOID_FAULTS = {
    "after_fault": "reopen-betting",  # the throw is void; withdrawals and new bets allowed
    "void_after": 3,
}


class DiceVariant:
    """A three-dice variant: its paytable and fault policy are its rules."""

    bets: Sequence[str] = BET_IDS

    def __init__(self, variant_id: str, paytable: Paytable, faults: Mapping[str, Any]) -> None:
        self.id = variant_id
        self.paytable = paytable
        self.rules: Mapping[str, Any] = {
            "game": "three-dice",
            "paytable": paytable_profile(paytable),
            "faults": dict(faults),
        }
        # After a faulty throw taixiu stays closed (bets locked) while
        # sicbo-void goes back to betting: the state says what is legal.
        self.legal_commands: Mapping[str, Sequence[str]] = {
            "betting": ["place_bet", "withdraw_bet", "close_betting"],
            "closed": ["record_outcome", "record_fault"],
        }
        self.outcome_space = [{"dice": list(dice)} for dice in ALL_OUTCOMES]

    def validate_bet(self, bet: Mapping[str, Any]) -> dict[str, Any]:
        return {"bet": parse_bet(bet)}

    def validate_outcome(self, outcome: Mapping[str, Any]) -> dict[str, Any]:
        return {"dice": list(check_dice(outcome.get("dice")))}

    def settle(
        self, outcome: Mapping[str, Any], bets: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, int]:
        dice = check_dice(tuple(outcome["dice"]))
        return {
            bet_id: returned(record["bet"]["bet"], record["stake"], dice, self.paytable)
            for bet_id, record in bets.items()
        }

    def payout(self, bet_id: str) -> str:
        pays = self.paytable[bet_id]
        return " / ".join(f"{x}:1" for x in pays) if isinstance(pays, tuple) else f"{pays}:1"


@hookimpl
def ledger_register_variants(registry: VariantRegistry) -> None:
    registry.add(DiceVariant("taixiu", TAIXIU_PAYTABLE, TAIXIU_FAULTS))
    registry.add(DiceVariant("sicbo-void", TAIXIU_PAYTABLE, SICBO_VOID_FAULTS))
