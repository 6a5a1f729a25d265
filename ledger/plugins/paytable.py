"""A variant's paytable with each bet's exact theoretical return.

Computed through the plugin's own settlement function over its declared
space of equally likely outcomes, so what is printed is what the plugin
actually pays, not a second table that could disagree with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from ledger.errors import InvalidCommandError
from ledger.plugins.registry import LoadedVariant


@dataclass(frozen=True)
class PaytableLine:
    bet: str
    pays: str
    theoretical_return: Fraction


def paytable(variant: LoadedVariant) -> list[PaytableLine]:
    definition = variant.definition
    outcomes = getattr(definition, "outcome_space", None)
    if not outcomes:
        raise InvalidCommandError(f"variant {variant.id} declares no outcome space")
    describe = getattr(definition, "payout", None)
    lines = []
    stake = 1
    for bet_id in definition.bets:
        bet = variant.validate_bet({"bet": bet_id})
        bets = {"b": {"account_id": "-", "bet": bet, "stake": stake}}
        back = sum(variant.settle(variant.validate_outcome(o), bets)["b"] for o in outcomes)
        pays = describe(bet_id) if describe else "?"
        lines.append(PaytableLine(bet_id, pays, Fraction(back, stake * len(outcomes))))
    return lines
