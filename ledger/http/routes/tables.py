"""Tables: a game at a currency and limits, with its house account."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from ledger.http import cursors, models, responses, views
from ledger.http.dependencies import (
    ANOTHER_TABLE,
    DEFAULT_PAGE,
    DEVICE,
    OPERATOR,
    READERS,
    Caller,
    CasinoDep,
    Currency,
    Cursor,
    IdempotencyKey,
    Limit,
    ServiceDep,
    Uuid,
)
from ledger.http.errors import CodedHTTPException
from ledger.http.routing import Router
from ledger.projections.pages import tables_page

router = Router()


@router.endpoint("POST", "/tables", (OPERATOR,), responses.TableOpened, status=201)
def open_table(
    body: models.NewTable, key: IdempotencyKey, casino: CasinoDep
) -> responses.TableOpened:
    """Open a table (and its house account) of `game` (or of its deprecated alias;
    neither, or two games, is a 400)."""
    table_id = casino.open_table(
        request_id=key,
        name=body.name,
        game=body.game,
        variant=body.variant,  # alias
        kind=body.kind,
        currency=body.currency,
        limits=body.limits.model_dump(),  # type: ignore[arg-type]
    )
    return responses.TableOpened(table_id=table_id)


@router.endpoint("GET", "/tables/{table_id}", (*READERS, DEVICE), responses.Table)
def get_table(table_id: Uuid, caller: Caller, casino: CasinoDep) -> responses.Table:
    """A table's state, from its events."""
    if caller.role is DEVICE and caller.table != str(casino.table(table_id).id):
        raise CodedHTTPException(403, ANOTHER_TABLE, "another_table")
    return views.table(casino.table(table_id))


@router.endpoint("GET", "/tables", READERS, responses.Tables)
def list_tables(
    service: ServiceDep,
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
    game: Annotated[
        str | None, Query(min_length=1, max_length=100, description="the tables of this game")
    ] = None,
    currency: Currency = None,
) -> responses.Tables:
    """The tables, oldest first, a page at a time.

    From the tables' read model, caught up first; `game` and `currency` keep
    those of that game or currency. A `cursor` that is not one
    this list gave with these filters is a 400, and nothing is read."""
    filters = {"game": game, "currency": currency}
    after = cursors.decode(cursor, "tables", filters)  # before anything is read or written
    service.catch_up()
    page = tables_page(service.app, after=after, limit=limit, game=game, currency=currency)
    return views.tables(page, cursors.next_page(page, "tables", filters))
