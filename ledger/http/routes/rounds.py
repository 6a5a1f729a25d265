"""Rounds: opened at a table, read one by one (state and log) or as summaries."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from ledger.http import models, responses, views
from ledger.http.dependencies import (
    DEVICE,
    OPERATOR,
    READERS,
    Caller,
    CasinoDep,
    IdempotencyKey,
    RoundId,
    ServiceDep,
    check_own_table,
)
from ledger.http.routing import Router
from ledger.projections import queries

router = Router()


@router.endpoint("POST", "/rounds", (OPERATOR,), responses.RoundOpened, status=201)
def open_round(
    body: models.NewRound, key: IdempotencyKey, casino: CasinoDep
) -> responses.RoundOpened:
    """Open a round at a table."""
    round_id = casino.open_round(request_id=key, table_id=body.table_id, dealer=body.dealer)
    return responses.RoundOpened(round_id=round_id)


@router.endpoint("GET", "/rounds/{round_id}", (*READERS, DEVICE), responses.Round)
def get_round(round_id: RoundId, caller: Caller, casino: CasinoDep) -> responses.Round:
    """A round's state and log, from its events."""
    check_own_table(caller, casino, round_id)
    return views.round_state(
        casino.round(round_id), casino.moves(round_id), casino.context.personal
    )


@router.endpoint("GET", "/rounds", READERS, responses.Rounds)
def list_rounds(
    service: ServiceDep,
    open_only: Annotated[bool, Query(alias="open")] = False,
) -> responses.Rounds:
    """Round summaries (the rounds projection, caught up first)."""
    service.catch_up()
    return views.round_summaries(
        queries.rounds(service.app, open_only=open_only), service.casino.context.personal
    )
