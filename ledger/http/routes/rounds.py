"""Rounds: opened at a table, read one by one (state and log) or as summaries."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from ledger.errors import ConfigError, InvalidCommandError
from ledger.http import cursors, models, responses, views
from ledger.http.dependencies import (
    DEFAULT_PAGE,
    DEVICE,
    OPERATOR,
    READERS,
    Caller,
    CasinoDep,
    Cursor,
    IdempotencyKey,
    Limit,
    RoundId,
    ServiceDep,
    check_own_table,
)
from ledger.http.routing import Router
from ledger.inputs import parse_moment
from ledger.projections.base import utc_text
from ledger.projections.pages import rounds_page
from ledger.projections.rounds import OPEN_STATUSES

router = Router()
SINCE = "rounds opened at or after: a date (its midnight UTC) or an ISO 8601 time with its offset"
BEFORE = "rounds opened before: a date (its midnight UTC) or an ISO 8601 time with its offset"


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
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
    table_id: Annotated[
        str | None, Query(min_length=1, max_length=64, description="the rounds of this table")
    ] = None,
    status: Annotated[
        responses.RoundStatus | None, Query(description="the rounds in this status")
    ] = None,
    open_only: Annotated[
        bool, Query(alias="open", description="the rounds neither settled nor voided")
    ] = False,
    opened_since: Annotated[str | None, Query(max_length=40, description=SINCE)] = None,
    opened_before: Annotated[str | None, Query(max_length=40, description=BEFORE)] = None,
) -> responses.Rounds:
    """Round summaries, oldest first, a page at a time.

    From the rounds' read model, caught up first: at one table, in one status
    (or `open`: neither settled nor voided), opened from `opened_since` and
    before `opened_before`. A `cursor` that is not one
    this list gave with these filters is a 400, and nothing is read."""
    since, before = _moment(opened_since, "opened_since"), _moment(opened_before, "opened_before")
    filters = {"table_id": table_id, "status": status, "open": open_only or None,
               "opened_since": since, "opened_before": before}  # fmt: skip
    after = cursors.decode(cursor, "rounds", filters)  # before anything is read or written
    statuses = _statuses(status, open_only)
    service.catch_up()
    page = rounds_page(
        service.app,
        after=after,
        limit=limit,
        table_id=table_id,
        statuses=statuses,
        opened_since=since,
        opened_before=before,
    )
    return views.round_summaries(
        page.rows, service.casino.context.personal, cursors.next_page(page, "rounds", filters)
    )


def _moment(text: str | None, name: str) -> str | None:
    """A time filter as the projection stores times (UTC text), or a 400 naming it."""
    if text is None:
        return None
    try:
        return utc_text(parse_moment(text, name))
    except OverflowError:  # a time whose UTC is before year 1 or after 9999
        raise ConfigError(f"{name} {text!r} is out of range once in UTC", param=name) from None


def _statuses(status: str | None, open_only: bool) -> list[str]:
    """The statuses a page keeps (none: every status)."""
    if not open_only:
        return [] if status is None else [status]
    if status is None:
        return list(OPEN_STATUSES)
    if status not in OPEN_STATUSES:
        raise InvalidCommandError(
            f"open=true keeps rounds neither settled nor voided, not status={status}",
            code="invalid_value",
            param="status",
        )
    return [status]
