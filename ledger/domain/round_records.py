"""A round's records: its statuses, limits, bets and their results, what its
log keeps of each step, an operator's signature; the results and postings of
a settlement, from the returns a game gives."""

from __future__ import annotations

from typing import Any, TypedDict
from uuid import UUID

from ledger.domain.money import Posting, check_amount, in_play, posting, wallet
from ledger.errors import InvalidCommandError

BETTING = "betting"  # open for bets
CLOSED = "closed"  # betting closed, awaiting the outcome
DECIDED = "decided"  # outcome recorded, awaiting settlement
SETTLED = "settled"
VOIDED = "voided"


class Limits(TypedDict):
    min_bet: int
    max_bet: int
    max_round: int  # one player's total stake in one round


class BetRecord(TypedDict):
    account_id: str
    bet: dict[str, Any]
    stake: int


class BetResult(TypedDict):
    bet_id: str
    account_id: str
    stake: int
    returned: int  # paid back to the wallet: 0 (lost), the stake (push), stake + win


class LogEntry(TypedDict, total=False):
    """One step of a round's life as recorded: the settlement-API-1 event shape
    (close_betting, outcome, fault), or an action as the game saw it."""

    close_betting: bool
    outcome: dict[str, Any]
    fault: str
    action: dict[str, Any]  # a RecordedAction: actor, action, args, drawn


class OperatorSignature(TypedDict):
    """An operator's own signature over the fact (see ledger.crypto.actor)."""

    key_id: str
    signature: str


def check_limits(limits: Limits) -> Limits:
    for name in ("min_bet", "max_bet", "max_round"):
        check_amount(limits.get(name), f"limit {name}", param=f"limits.{name}")
    if not limits["min_bet"] <= limits["max_bet"] <= limits["max_round"]:
        raise InvalidCommandError(
            "limits must satisfy min_bet <= max_bet <= max_round",
            code="invalid_value",
            param="limits",
        )
    return {k: limits[k] for k in ("min_bet", "max_bet", "max_round")}  # type: ignore[return-value]


def bet_results(returns: dict[str, int], bets: dict[str, BetRecord]) -> list[BetResult]:
    """Each bet's result: a return (an int >= 0) for every bet, once."""
    if set(returns) != set(bets):
        raise InvalidCommandError(
            "a settlement must give a return for every bet, once", code="invalid_settlement"
        )
    results: list[BetResult] = []
    for bet_id, record in bets.items():
        returned = returns[bet_id]
        if isinstance(returned, bool) or not isinstance(returned, int) or returned < 0:
            raise InvalidCommandError(
                f"return for bet {bet_id} must be an int >= 0", code="invalid_settlement"
            )
        results.append(
            {
                "bet_id": bet_id,
                "account_id": record["account_id"],
                "stake": record["stake"],
                "returned": returned,
            }
        )
    return results


def settlement_legs(
    round_id: UUID | str, currency: str, house: UUID | str, record: BetRecord, returned: int
) -> list[Posting]:
    """A settled bet's postings: the stake out of play, the return to the wallet,
    the house keeping a loss or paying a win."""
    stake = record["stake"]
    legs = [posting(in_play(round_id), -stake, currency)]
    if returned:
        legs.append(posting(wallet(record["account_id"]), returned, currency))
    if stake != returned:  # the house keeps a loss or pays a win
        legs.append(posting(wallet(house), stake - returned, currency))
    return legs


def stake_legs(round_id: UUID | str, currency: str, account: str, amount: int) -> list[Posting]:
    """A bet's postings: the stake from the wallet into the round's play."""
    return [
        posting(wallet(account), -amount, currency),
        posting(in_play(round_id), amount, currency),
    ]


def return_legs(round_id: UUID | str, currency: str, account: str, amount: int) -> list[Posting]:
    """A stake given back (a withdrawn bet, a void): out of play into the wallet."""
    return [
        posting(in_play(round_id), -amount, currency),
        posting(wallet(account), amount, currency),
    ]


def stakes_returned(
    round_id: UUID | str, currency: str, bets: dict[str, BetRecord]
) -> tuple[list[BetResult], list[Posting]]:
    """A void of `bets`: each stake back (its result), and the postings giving it back."""
    returns = bet_results({b: r["stake"] for b, r in bets.items()}, bets)
    postings = [
        leg
        for result in returns
        for leg in return_legs(round_id, currency, result["account_id"], result["stake"])
    ]
    return returns, postings
