"""Balances per ledger account, from the postings alone, and each account's totals.

`proj_balances` sums every posting recorded on a money movement (deposit,
withdrawal, bet, withdrawn bet, settlement, void) per ledger account name and
currency: wallets (``wallet:<id>``, players' and houses'), rounds' in-play
accounts (``in-play:<round>``) and the cashiers (``cashier:<CUR>``). Postings
balance, so per currency the balances always sum to zero.

`proj_accounts` keeps, per account aggregate, who holds it and what went
through it: deposits and withdrawals (from the account's own events), stakes
(bets placed, less bets withdrawn) and returns (what settlements and voids paid
back, stakes included; a correction replaces what its round's settlement
returned with what the right outcome returns, exactly as its compensating
postings do). For a player wallet

    balance = deposits - withdrawals - staked + returned.

The account aggregates' Debited/Credited events are not read: they mirror the
round's postings, and counting both would count the money twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from ledger.domain.account import Account
from ledger.domain.money import Posting
from ledger.domain.names import personal_text
from ledger.domain.round import Round
from ledger.domain.round_records import BetResult
from ledger.projections.base import Handler, Projection, utc_text
from ledger.projections.sql import Tx

WALLET_PREFIX = "wallet:"


class Balances(Projection):
    name = "balances"
    tables: ClassVar[Mapping[str, str]] = {
        "proj_balances": (
            "account TEXT NOT NULL, currency TEXT NOT NULL, balance BIGINT NOT NULL, "
            "postings INTEGER NOT NULL, PRIMARY KEY (account, currency)"
        ),
        "proj_accounts": (
            "account_id TEXT PRIMARY KEY, kind TEXT NOT NULL, owner TEXT NOT NULL, "
            "currency TEXT NOT NULL, status TEXT NOT NULL, deposits BIGINT NOT NULL, "
            "withdrawals BIGINT NOT NULL, staked BIGINT NOT NULL, returned BIGINT NOT NULL, "
            "opened_at TEXT NOT NULL, closed_at TEXT"
        ),
    }

    def handlers(self) -> Mapping[type[Any], Handler]:
        return {
            Account.Opened: self.opened,
            Account.Deposited: self.deposited,
            Account.Withdrawn: self.withdrawn,
            Account.Closed: self.closed,
            Round.BetPlaced: self.bet_placed,
            Round.BetWithdrawn: self.bet_withdrawn,
            Round.Settled: self.paid_out,
            Round.Voided: self.paid_out,
            Round.Corrected: self.corrected,
        }

    # Accounts.
    def opened(self, event: Account.Opened, tx: Tx) -> None:
        tx.execute(
            "INSERT INTO {proj_accounts} (account_id, kind, owner, currency, status, deposits, "
            "withdrawals, staked, returned, opened_at) "
            "VALUES (%s, %s, %s, %s, 'open', 0, 0, 0, 0, %s)",
            (
                str(event.originator_id),
                event.kind,
                personal_text(event.owner),
                event.currency,
                utc_text(event.timestamp),
            ),
        )

    def deposited(self, event: Account.Deposited, tx: Tx) -> None:
        post(tx, event.postings)
        _add(tx, "deposits", str(event.originator_id), event.amount)

    def withdrawn(self, event: Account.Withdrawn, tx: Tx) -> None:
        post(tx, event.postings)
        _add(tx, "withdrawals", str(event.originator_id), event.amount)

    def closed(self, event: Account.Closed, tx: Tx) -> None:
        tx.execute(
            "UPDATE {proj_accounts} SET status = 'closed', closed_at = %s WHERE account_id = %s",
            (utc_text(event.timestamp), str(event.originator_id)),
        )

    # Rounds.
    def bet_placed(self, event: Round.BetPlaced, tx: Tx) -> None:
        post(tx, event.postings)
        _add(tx, "staked", event.account_id, event.stake)

    def bet_withdrawn(self, event: Round.BetWithdrawn, tx: Tx) -> None:
        post(tx, event.postings)
        # The event names the bet, not its wallet: the postings pay the stake back to it.
        for leg in event.postings:
            if leg["account"].startswith(WALLET_PREFIX) and leg["amount"] > 0:
                _add(tx, "staked", leg["account"][len(WALLET_PREFIX) :], -leg["amount"])

    def paid_out(self, event: Round.Settled | Round.Voided, tx: Tx) -> None:
        post(tx, event.postings)
        results: list[BetResult] = (
            event.results if isinstance(event, Round.Settled) else event.returns
        )
        for account_id, returned in _per_account(results).items():
            if returned:
                _add(tx, "returned", account_id, returned)

    def corrected(self, event: Round.Corrected, tx: Tx) -> None:
        post(tx, event.postings)  # the reversal of the settlement, then the new one
        before = _per_account(event.reversed_results)
        after = _per_account(event.results)
        for account_id in sorted(before.keys() | after.keys()):
            change = after.get(account_id, 0) - before.get(account_id, 0)
            if change:
                _add(tx, "returned", account_id, change)


def post(tx: Tx, postings: Iterable[Posting]) -> None:
    """Add each leg to its account's balance in its currency."""
    for leg in postings:
        tx.execute(
            "INSERT INTO {proj_balances} AS b (account, currency, balance, postings) "
            "VALUES (%s, %s, %s, 1) ON CONFLICT (account, currency) DO UPDATE "
            "SET balance = b.balance + excluded.balance, postings = b.postings + 1",
            (leg["account"], leg["currency"], int(leg["amount"])),
        )


def _add(tx: Tx, column: str, account_id: str, amount: int) -> None:
    assert column in ("deposits", "withdrawals", "staked", "returned")
    tx.execute(
        f"UPDATE {{proj_accounts}} SET {column} = {column} + %s WHERE account_id = %s",
        (int(amount), account_id),
    )


def _per_account(results: Iterable[BetResult]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for result in results:
        totals[result["account_id"]] = totals.get(result["account_id"], 0) + result["returned"]
    return totals
