"""Wallets: opened, topped up, paid out and closed (each a command body)."""

from __future__ import annotations

import uuid

from ledger.casino.runner import Body, Work
from ledger.domain.account import Account, check_kind
from ledger.domain.money import check_currency
from ledger.privacy.personal import PersonalData


def open_account(personal: PersonalData, kind: str, owner: str, currency: str) -> Body:
    """The owner is sealed under the new account's own subject key (made here,
    in the writer, so a retried request makes none)."""

    def body(work: Work) -> tuple[str, list[Account]]:
        check_kind(kind)  # refused before a key is made
        check_currency(currency)
        account_id = uuid.uuid4()
        sealed = personal.seal_owner(str(account_id), owner)
        account = Account.open(kind, sealed, currency, account_id)
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
