"""Tables: a game at a currency and limits, with its house account."""

from __future__ import annotations

from ledger.http import models, responses, views
from ledger.http.dependencies import (
    ANOTHER_TABLE,
    DEVICE,
    OPERATOR,
    READERS,
    Caller,
    CasinoDep,
    IdempotencyKey,
    Uuid,
)
from ledger.http.errors import CodedHTTPException
from ledger.http.routing import Router

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
