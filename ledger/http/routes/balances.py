"""Ledger balances, from the postings (the balances projection)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from ledger.domain.money import wallet
from ledger.errors import NotFoundError
from ledger.http import responses, views
from ledger.http.dependencies import READERS, ServiceDep
from ledger.http.routing import Router
from ledger.projections import queries

router = Router()


@router.endpoint("GET", "/balances", READERS, responses.Balances)
def balances(
    service: ServiceDep,
    account: Annotated[str | None, Query(max_length=100)] = None,
) -> responses.Balances:
    """Balances from the postings (the balances projection, caught up first):
    every ledger account, or one (an account id, or a name like cashier:EUR)."""
    service.catch_up()
    if account is None:
        rows = queries.balances(service.app)
    else:
        rows = queries.balances(service.app, account) or queries.balances(
            service.app, wallet(account)
        )
        if not rows:
            raise NotFoundError(f"no ledger account {account!r}")
    return views.balances(rows, queries.currency_totals(service.app))
