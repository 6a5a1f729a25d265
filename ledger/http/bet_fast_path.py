"""The betting window's hot path: `POST /v1/rounds/{round_id}/bets`, served lean.

A live table takes thousands of bets on one round in a few seconds, and
FastAPI's per-request machinery (dependency solving, parameter parsing, a
worker thread per request) costs more than the bet itself. This pure ASGI
layer answers the requests it can answer exactly as the FastAPI route does:
an operator's bet with a valid `Idempotency-Key` and a body that the route's
own model (`models.NewBet`) accepts. It submits the bet to the command runner
and awaits its commit on the event loop (no thread per request), then answers
with the route's own body and status, or the ledger's error as the route's
error handlers would.

A table device's bet is taken here too, its token checked against the
round's table as the route checks it (a table's own role pays no more per bet
than an operator's). Everything else goes on to the FastAPI route, which
answers as documented: a missing or malformed key, a body the model refuses
(422), any other role, path or method. The OpenAPI document describes the
route; tests send the same requests both ways and compare the answers.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import MutableMapping
from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError
from pydantic import ValidationError
from starlette.responses import JSONResponse

from ledger.casino import MAX_REQUEST_ID, Casino
from ledger.errors import LedgerError
from ledger.http import models
from ledger.http.dependencies import ANOTHER_TABLE, PLAY
from ledger.http.errors import error_body, ledger_error_response, store_unavailable_response
from ledger.http.middleware import Asgi, Receive, Scope, Send
from ledger.http.tokens import ApiRole, Token

_BETS = re.compile(r"/v1/rounds/([^/]{1,64})/bets")


class BetFastPath:
    def __init__(self, app: Asgi, casino: Casino) -> None:
        self.app = app
        self.casino = casino

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = (
            _BETS.fullmatch(scope["path"])
            if scope["type"] == "http" and scope["method"] == "POST"
            else None
        )
        state: MutableMapping[str, Any] = scope.get("state") or {}
        token: Token | None = state.get("token")
        key = _idempotency_key(scope)
        if found is None or token is None or token.role not in PLAY or key is None:
            await self.app(scope, receive, send)
            return
        body, more = await _whole_body(receive)
        try:
            bet = models.NewBet.model_validate_json(body) if not more else None
        except ValidationError:
            bet = None
        if bet is None:  # the route says what is wrong, in its words
            await self.app(scope, _replay(body, receive), send)
            return
        round_id = found.group(1)
        try:
            if token.role is ApiRole.TABLE_DEVICE and await self._table_of(round_id) != token.table:
                response = JSONResponse(
                    error_body(403, ANOTHER_TABLE, code="another_table"), status_code=403
                )
            else:
                bet_id = await asyncio.wrap_future(
                    self.casino.asked_by(token.asked_by()).submit_bet(
                        request_id=key,
                        round_id=round_id,
                        account_id=bet.account_id,
                        bet=bet.bet,
                        stake=bet.stake,
                    )
                )
                response = JSONResponse({"bet_id": bet_id}, status_code=201)
        except LedgerError as exc:
            response = ledger_error_response(exc)
        except (OperationalError, InterfaceError) as exc:
            response = store_unavailable_response(exc)
        await response(scope, _replay(body, receive), send)

    async def _table_of(self, round_id: str) -> str:
        """The round's table: remembered, or read off the event loop the first time."""
        known = self.casino.known_table_of_round(round_id)
        if known is not None:
            return known
        return await asyncio.to_thread(self.casino.table_of_round, round_id)


def _idempotency_key(scope: Scope) -> str | None:
    """The header's value when the route's own rule would take it (1..200 characters)."""
    for name, value in scope.get("headers", []):
        if name == b"idempotency-key":
            text: str = value.decode("latin-1")
            return text if 0 < len(text) <= MAX_REQUEST_ID else None
    return None


async def _whole_body(receive: Receive) -> tuple[bytes, bool]:
    """The request body (BodyLimit replays it as one message); `more` when it is not."""
    message = await receive()
    if message["type"] != "http.request":
        return b"", True
    return message.get("body", b""), bool(message.get("more_body", False))


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def again() -> MutableMapping[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
