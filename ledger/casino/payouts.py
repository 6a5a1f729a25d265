"""Money out of a round: a settlement, void or correction mirrored on every
wallet and on the house, and the RNG table counting one round fewer in play."""

from __future__ import annotations

from eventsourcing.domain import Aggregate

from ledger.casino.runner import Work
from ledger.domain.account import Account
from ledger.domain.round import Round
from ledger.domain.round_records import BetResult


def pay(
    work: Work, game_round: Round, results: list[BetResult], label: str = "return"
) -> list[Account]:
    """Each result moves `returned - stake` to the wallet beyond its stake: for a
    settlement or void `stake` is what the bet put in play; for a correction it
    is what the first settlement returned, so only the difference moves. The
    house takes or pays the net in one movement."""
    accounts: dict[str, Account] = {}
    house_net = 0
    for result in results:
        change = (
            result["returned"] if label != "correction" else (result["returned"] - result["stake"])
        )
        if change:
            account = accounts.get(result["account_id"]) or work.account(result["account_id"])
            accounts[result["account_id"]] = account
            reference = f"{label} {result['bet_id']}"
            if change > 0:
                account.credit(change, game_round.id, reference)
            else:
                account.debit(-change, game_round.id, reference)
        house_net += result["stake"] - result["returned"]
    changed = list(accounts.values())
    if house_net:  # zero for a void: every stake goes back
        house = work.account(game_round.house_account)
        if house_net > 0:
            house.credit(house_net, game_round.id, f"round {label}")
        else:
            house.debit(-house_net, game_round.id, f"round {label}")
        changed.append(house)
    return changed


def ended(work: Work, game_round: Round) -> list[Aggregate]:
    """An RNG table counts one round fewer in play."""
    if game_round.seed_id is None:
        return []
    table = work.table(game_round.table_id)
    table.round_ended()
    return [table]
