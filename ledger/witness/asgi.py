"""The witness over HTTP: a small ASGI app, `POST <prefix>/add-checkpoint` and
`GET <prefix>/` (its name and verifier key, for an operator checking it up)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from anyio import to_thread

from ledger.witness.witness import Answer, Witness

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
MAX_BODY = 1 << 16  # 63 proof lines and a checkpoint with its signatures fit many times


def witness_app(witness: Witness, verifier_key: str, prefix: str = "") -> Callable[..., Any]:
    prefix = prefix.rstrip("/")

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == f"{prefix}/add-checkpoint":
            if method != "POST":
                answer = Answer.text(405, "add-checkpoint takes a POST")
            else:
                body = await _body(receive)
                if body is None:
                    answer = Answer.text(413, f"the request is larger than {MAX_BODY} bytes")
                else:
                    answer = await to_thread.run_sync(witness.add_checkpoint, body)
        elif path in (f"{prefix}/", prefix) and method == "GET":
            answer = Answer.text(200, f"{witness.name}\n{verifier_key}")
        else:
            answer = Answer.text(404, "not found (POST add-checkpoint)")
        await send(
            {
                "type": "http.response.start",
                "status": answer.status,
                "headers": [
                    (b"content-type", answer.content_type.encode()),
                    (b"content-length", str(len(answer.body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer.body})

    return app


async def _body(receive: Receive) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
