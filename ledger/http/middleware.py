"""Three pure ASGI layers in front of the routes: authentication (401), a body
sent as JSON (415) and a body size limit (413), all before any body is parsed
or any route runs (the bets' fast path included)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from ledger.errors import ConfigError
from ledger.http.errors import error_body
from ledger.http.tokens import TokenStore

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]

# Served without a token: the API's own description, and the node's health.
PUBLIC_PATHS = frozenset(
    {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/v1/health"}
)
DOCS_ASSETS = "/docs/assets"  # Swagger UI's own files (public, like the page)


async def _reply(
    send: Send,
    status: int,
    detail: str,
    headers: list[tuple[bytes, bytes]],
    code: str | None = None,
) -> None:
    body = json.dumps(error_body(status, detail, code=code)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Refuse a request body over `limit` bytes (413) without handing it on:
    the body is read up to the limit, then replayed to the app. `wider`: paths
    (full matches) allowed a larger body, with their limit (a batch of bets)."""

    def __init__(
        self, app: Asgi, limit: int, wider: Sequence[tuple[re.Pattern[str], int]] = ()
    ) -> None:
        self.app = app
        self.limit = limit
        self.wider = list(wider)

    def _limit_of(self, path: str) -> int:
        return next((size for where, size in self.wider if where.fullmatch(path)), self.limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit_of(scope["path"]) if self.wider else self.limit
        too_large = f"request body over {limit} bytes"
        for name, value in scope.get("headers", []):
            if name == b"content-length" and (not value.isdigit() or int(value) > limit):
                await _reply(send, 413, too_large, [(b"connection", b"close")])
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, receive, send)  # the client went away: let the app see it
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _reply(send, 413, too_large, [(b"connection", b"close")])
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class JsonBodies:
    """A route that takes a body takes JSON: a request to one whose Content-Type
    is not `application/json` (parameters allowed, a charset only UTF-8), or
    that names none, or names several, is refused (415) before its body is
    read, on the bets' fast path and the FastAPI routes alike. `routes`:
    (method, path pattern) of each route that takes a body
    (`ledger.http.routing.body_routes`), so a new one is covered as it is added."""

    def __init__(self, app: Asgi, routes: Sequence[tuple[str, re.Pattern[str]]]) -> None:
        self.app = app
        # One pattern per method, its routes' as alternatives: a request pays one
        # match (on the bets' path, which serves thousands a second), not one a route.
        by_method: dict[str, list[str]] = {}
        for method, pattern in routes:
            unnamed = re.sub(r"\(\?P<\w+>", "(?:", pattern.pattern)  # names clash across routes
            by_method.setdefault(method, []).append(f"(?:{unnamed})")
        self.routes = {m: re.compile("|".join(ps)) for m, ps in by_method.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._takes_body(scope) and not _json_declared(scope):
            detail = "the body must be sent as JSON: Content-Type: application/json"
            await _reply(send, 415, detail, [])
            return
        await self.app(scope, receive, send)

    def _takes_body(self, scope: Scope) -> bool:
        pattern = self.routes.get(scope.get("method", ""))
        return pattern is not None and pattern.match(scope.get("path", "")) is not None


def _json_declared(scope: Scope) -> bool:
    """The request's one Content-Type is JSON in UTF-8 (RFC 8259 allows no other)."""
    types = [v for name, v in scope.get("headers", []) if name == b"content-type"]
    if len(types) != 1:
        return False
    media, *parameters = types[0].decode("latin-1").split(";")
    if media.strip().lower() != "application/json":
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in (
            "utf-8",
            "utf8",
        ):
            return False
    return True


class Authenticate:
    """Every path but the API's description needs a usable bearer token (401
    otherwise, saying only that). The token found goes in the scope's state
    for the routes' role checks; its text goes nowhere else."""

    def __init__(self, app: Asgi, tokens: TokenStore) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in PUBLIC_PATHS or path.startswith(DOCS_ASSETS + "/"):
            await self.app(scope, receive, send)
            return
        presented = None
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, text = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer" and text.strip():
                    presented = text.strip()
        try:
            token = self.tokens.authenticate(presented) if presented else None
        except ConfigError as exc:  # fail closed, saying why (the file's path, not its content)
            await _reply(send, 500, str(exc), [], code="token_store_unreadable")
            return
        if token is None:
            detail = (
                "missing bearer token (Authorization: Bearer <token>)"
                if presented is None
                else "unknown, revoked or expired token"
            )
            await _reply(send, 401, detail, [(b"www-authenticate", b"Bearer")])
            return
        scope.setdefault("state", {})["token"] = token
        await self.app(scope, receive, send)
