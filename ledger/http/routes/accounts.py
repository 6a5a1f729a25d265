"""Accounts: a player's wallet, opened, read, paid into and out of, closed."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

from ledger.history.proof import history_proof
from ledger.history.span import MAX_LAST, Span
from ledger.http import cursors, models, responses, views
from ledger.http.dependencies import (
    CASHIER,
    DEFAULT_PAGE,
    READERS,
    CasinoDep,
    Currency,
    Cursor,
    IdempotencyKey,
    Limit,
    ServiceDep,
    Uuid,
)
from ledger.http.routing import Router
from ledger.projections.pages import accounts_page

router = Router()


@router.endpoint("POST", "/accounts", (CASHIER,), responses.AccountOpened, status=201)
def open_account(
    body: models.NewAccount, key: IdempotencyKey, casino: CasinoDep
) -> responses.AccountOpened:
    """Open a player's wallet."""
    return responses.AccountOpened(
        account_id=casino.open_account(request_id=key, owner=body.owner, currency=body.currency)
    )


@router.endpoint("GET", "/accounts", READERS, responses.Accounts)
def list_accounts(
    service: ServiceDep,
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
    kind: Annotated[
        Literal["player", "house"] | None,
        Query(description="players' wallets or tables' house accounts"),
    ] = None,
    currency: Currency = None,
    status: Annotated[Literal["open", "closed"] | None, Query(description="open or closed")] = None,
) -> responses.Accounts:
    """The accounts, oldest first, a page at a time.

    Players' wallets and tables' house accounts, from the accounts' read model
    (caught up first), filtered by kind, currency and status. A `cursor` that is not one
    this list gave with these filters is a 400, and nothing is read."""
    filters = {"kind": kind, "currency": currency, "status": status}
    after = cursors.decode(cursor, "accounts", filters)  # before anything is read or written
    service.catch_up()
    page = accounts_page(
        service.app, after=after, limit=limit, kind=kind, currency=currency, status=status
    )
    return views.accounts(
        page, cursors.next_page(page, "accounts", filters), service.casino.context.personal
    )


@router.endpoint("GET", "/accounts/{account_id}", READERS, responses.Account)
def get_account(account_id: Uuid, casino: CasinoDep) -> responses.Account:
    """An account's state, from its events."""
    return views.account(casino.account(account_id), casino.context.personal)


@router.endpoint("GET", "/accounts/{account_id}/history", READERS, responses.AccountHistory)
def history(
    account_id: Uuid,
    service: ServiceDep,
    last: Annotated[int | None, Query(ge=1, le=MAX_LAST)] = None,
    since: Annotated[str | None, Query(max_length=40)] = None,
) -> responses.AccountHistory:
    """The account's rounds in a span (`last` rounds, default 10, or `since` a date or
    time), with the proof that none is missing (`ledger history`, docs/history.md)."""
    app = service.app
    proof = history_proof(app, app.current_keyring(), account_id, Span.of(last, since))
    return responses.AccountHistory.model_validate(proof, strict=False)


@router.endpoint("POST", "/accounts/{account_id}/deposits", (CASHIER,), responses.WalletBalance)
def deposit(
    account_id: Uuid, body: models.Amount, key: IdempotencyKey, casino: CasinoDep
) -> responses.WalletBalance:
    """Deposit into a wallet (minor units): the balance after it."""
    return responses.WalletBalance(
        balance=casino.deposit(request_id=key, account_id=account_id, amount=body.amount)
    )


@router.endpoint("POST", "/accounts/{account_id}/withdrawals", (CASHIER,), responses.WalletBalance)
def withdraw(
    account_id: Uuid, body: models.Amount, key: IdempotencyKey, casino: CasinoDep
) -> responses.WalletBalance:
    """Withdraw from a wallet (minor units): the balance after it."""
    return responses.WalletBalance(
        balance=casino.withdraw(request_id=key, account_id=account_id, amount=body.amount)
    )


@router.endpoint("POST", "/accounts/{account_id}/close", (CASHIER,), responses.AccountClosed)
def close_account(
    account_id: Uuid, body: models.Reason, key: IdempotencyKey, casino: CasinoDep
) -> responses.AccountClosed:
    """Close a wallet."""
    casino.close_account(request_id=key, account_id=account_id, reason=body.reason)
    return responses.AccountClosed(closed=account_id)
