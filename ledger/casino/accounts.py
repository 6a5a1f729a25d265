"""Wallets: opened, topped up, paid out and closed (each a command body)."""

from __future__ import annotations

from ledger.casino.runner import Body, Work
from ledger.domain.account import Account


def open_account(kind: str, owner: str, currency: str) -> Body:
    def body(work: Work) -> tuple[str, list[Account]]:
        account = Account.open(kind, owner, currency)
        return str(account.id), [account]

    return body


def deposit(request_id: str, account_id: str, amount: int) -> Body:
    def body(work: Work) -> tuple[int, list[Account]]:
        account = work.account(account_id)
        account.deposit(amount, request_id)
        return account.balance, [account]

    return body


def withdraw(request_id: str, account_id: str, amount: int) -> Body:
    def body(work: Work) -> tuple[int, list[Account]]:
        account = work.account(account_id)
        account.withdraw(amount, request_id)
        return account.balance, [account]

    return body


def close_account(account_id: str, reason: str) -> Body:
    def body(work: Work) -> tuple[None, list[Account]]:
        account = work.account(account_id)
        account.close(reason)
        return None, [account]

    return body
