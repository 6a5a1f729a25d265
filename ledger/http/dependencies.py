"""What the routes share, as FastAPI dependencies: the service the app was made
over (`app.state.service`), the caller's token and its role check, and the
parameters several routes take (the `Idempotency-Key` header, the ids in a path).

The dependencies are `async` because they only read the request: FastAPI runs
an async dependency on the event loop, a plain one on a worker thread."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path, Query, Request

from ledger.casino import MAX_REQUEST_ID, Casino
from ledger.errors import with_article
from ledger.http.cursors import MAX_CURSOR
from ledger.http.errors import CodedHTTPException
from ledger.http.service import Service
from ledger.http.tokens import ApiRole, Token

DEVICE, CASHIER, OPERATOR, AUDITOR, ADMIN = (
    ApiRole.TABLE_DEVICE,
    ApiRole.CASHIER,
    ApiRole.OPERATOR,
    ApiRole.AUDITOR,
    ApiRole.ADMIN,
)
READERS = (AUDITOR, OPERATOR, CASHIER)
PLAY = (DEVICE, OPERATOR)  # a round's play: a device for its own table, or an operator
ANOTHER_TABLE = "this table device's token is for another table"

IdempotencyKey = Annotated[
    str,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=MAX_REQUEST_ID,
        description="the request id: a retry with the same key returns the first result",
    ),
]
RoundId = Annotated[str, Path(min_length=1, max_length=64)]
# Every list's paging (docs/http.md, "Lists"): a page of `limit` rows, after `cursor`.
DEFAULT_PAGE, MAX_PAGE = 100, 1000
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"rows a page, at most {MAX_PAGE}")]
Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_CURSOR,
        description="the `next_cursor` of the page before, asked with the same filters",
    ),
]
Currency = Annotated[
    str | None, Query(pattern="^[A-Z]{3}$", description="an ISO 4217 code, upper case")
]
Uuid = Annotated[str, Path(min_length=1, max_length=64)]


async def service_of(request: Request) -> Service:
    service: Service = request.app.state.service  # set by create_app
    return service


async def casino_of(request: Request) -> Casino:
    """The casino, its commands asked by the caller's token: every write binds its
    Idempotency-Key to that token, and an action the node records as its own
    command or draw names it (`Casino.asked_by`)."""
    casino = (await service_of(request)).casino
    token: Token | None = getattr(request.state, "token", None)  # none: a public route
    return casino if token is None else casino.asked_by(token.asked_by())


async def caller_of(request: Request) -> Token:
    token: Token = request.state.token  # set by Authenticate
    return token


ServiceDep = Annotated[Service, Depends(service_of)]
CasinoDep = Annotated[Casino, Depends(casino_of)]
Caller = Annotated[Token, Depends(caller_of)]


class Allow:
    """A route's dependency: the caller's token is of one of `roles` (403 otherwise)."""

    def __init__(self, roles: tuple[ApiRole, ...]) -> None:
        self.roles = roles

    async def __call__(self, request: Request) -> Token:
        token = await caller_of(request)
        if token.role not in self.roles:
            raise CodedHTTPException(
                403,
                f"{with_article(token.role.value)} token may not do this (allowed: "
                f"{', '.join(r.value for r in self.roles)})",
                "forbidden_role",
            )
        return token


def check_own_table(caller: Token, casino: Casino, round_id: str) -> None:
    """A table device may play only its own table's rounds. Called by the route
    after its parameters and body are checked, so a bad request is a 422 first."""
    if caller.role is DEVICE:
        table_id = casino.table_of_round(round_id)
        if table_id != caller.table:
            raise CodedHTTPException(403, ANOTHER_TABLE, "another_table")
