"""The API's routes, one router per resource. `ROUTERS` is their order in the
OpenAPI document (and on /docs)."""

from __future__ import annotations

from ledger.http.routes import (
    accounts,
    audit,
    balances,
    bets,
    events,
    games,
    health,
    interventions,
    play,
    rounds,
    seeds,
    tables,
    tokens,
)
from ledger.http.routing import Router

ROUTERS: tuple[Router, ...] = (
    accounts.router,
    tables.router,
    seeds.router,
    rounds.router,
    bets.router,
    play.router,
    interventions.router,
    balances.router,
    audit.router,
    games.router,
    events.router,
    tokens.router,
    health.router,
)
