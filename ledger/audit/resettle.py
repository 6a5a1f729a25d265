"""Re-settling every round from its recorded facts, with the variant and rules
it opened with: the payouts in the log must be what the rules pay."""

from __future__ import annotations

from typing import Any

from eventsourcing.utils import get_topic

from ledger.audit.round_variants import RoundVariants
from ledger.domain.round import Round
from ledger.errors import VerificationError
from ledger.variants.api import Variant

_OPENED = get_topic(Round.Opened)
_BET = get_topic(Round.BetPlaced)
_WITHDRAWN = get_topic(Round.BetWithdrawn)
_OUTCOME = get_topic(Round.OutcomeRecorded)
_SETTLED = get_topic(Round.Settled)
_VOIDED = get_topic(Round.Voided)
_CORRECTED = get_topic(Round.Corrected)


class Resettler:
    """Follows the log in order; at each settlement, settles again and compares."""

    def __init__(self, variants: RoundVariants) -> None:
        self.variants = variants
        self.rounds: dict[str, dict[str, Any]] = {}
        self.resettled = 0  # settlements and corrections settled again
        self.bets = 0  # bets whose return was re-derived

    def observe(self, stream: str, topic: str, state: dict[str, Any], where: str) -> None:
        if topic == _OPENED:
            self.rounds[stream] = {
                "variant": self.variants.of(stream, state),
                "bets": {},
                "outcome": None,
            }
            return
        game = self.rounds.get(stream)
        if game is None:
            return
        if topic == _BET:
            game["bets"][state["bet_id"]] = {
                "account_id": state["account_id"],
                "bet": state["bet"],
                "stake": state["stake"],
            }
        elif topic == _WITHDRAWN:
            game["bets"].pop(state["bet_id"], None)
        elif topic == _OUTCOME:
            game["outcome"] = state["outcome"]
        elif topic == _VOIDED:
            del self.rounds[stream]
        elif topic == _SETTLED:
            self._check(game, state["results"], where)  # kept: a correction may follow
        elif topic == _CORRECTED:
            if state["wrong_outcome"] != game["outcome"]:
                raise VerificationError(
                    "the correction names a wrong outcome that was not the one recorded",
                    where=where,
                )
            game["outcome"] = state["right_outcome"]
            self._check(game, state["results"], where)

    def _check(self, game: dict[str, Any], results: list[dict[str, Any]], where: str) -> None:
        if game["outcome"] is None:
            raise VerificationError("settled without a recorded outcome", where=where)
        variant: Variant = game["variant"]
        returns = variant.settle(game["outcome"], game["bets"])
        recorded = {r["bet_id"]: r for r in results}
        if set(recorded) != set(game["bets"]):
            raise VerificationError(
                "the settlement does not cover exactly the round's bets", where=where
            )
        for bet_id, bet in game["bets"].items():
            result = recorded[bet_id]
            if (result["account_id"], result["stake"]) != (bet["account_id"], bet["stake"]):
                raise VerificationError(
                    f"bet {bet_id} settled for the wrong player or stake", where=where
                )
            if result["returned"] != returns[bet_id]:
                raise VerificationError(
                    f"bet {bet_id} returned {result['returned']}, the rules pay {returns[bet_id]}",
                    where=where,
                )
        self.resettled += 1
        self.bets += len(results)
