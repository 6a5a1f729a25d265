"""`/tlog/`: a tiles directory (`ledger tiles DIR`) served read-only as C2SP
tlog-tiles, to anyone: a monitor reads it with no token and no project code.

Only the spec's own paths are answered (`checkpoint`, `tile/<L>/<N>[.p/<W>]`,
`tile/entries/<N>[.p/<W>]`, each parsed to its one canonical spelling before
a file is opened), so nothing else of the directory can be reached. Tiles
and bundles never change once written (a path names its width too), so they
are cacheable for a year; the checkpoint changes as the log grows, so it is
not cached. Entry bundles are gzipped for a client that accepts it.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from ledger.crypto.tiles import TileError, TilePath

PREFIX = "/tlog/"
IMMUTABLE = b"public, max-age=31536000, immutable"
CHECKPOINT_CACHE = b"no-cache"

Scope = dict[str, Any]
Asgi = Any


class TlogFiles:
    """Answer GET and HEAD under `PREFIX` from `directory`; pass the rest on."""

    def __init__(self, app: Asgi, directory: Path) -> None:
        self.app = app
        self.directory = directory

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _send(send, scope, 405, b"read-only: GET or HEAD\n", b"text/plain", b"no-store")
            return
        found = self._lookup(path.removeprefix(PREFIX))
        if found is None:
            await _send(send, scope, 404, b"no such tile\n", b"text/plain", b"no-store")
            return
        relative, content_type, cache = found
        try:
            body = (self.directory / relative).read_bytes()
        except OSError:  # missing, a directory, unreadable: no such tile to serve
            await _send(send, scope, 404, b"no such tile\n", b"text/plain", b"no-store")
            return
        extra: list[tuple[bytes, bytes]] = []
        if relative.startswith("tile/entries/") and _accepts_gzip(scope):
            body = gzip.compress(body, mtime=0)
            extra.append((b"content-encoding", b"gzip"))
        extra.append((b"vary", b"accept-encoding"))
        await _send(send, scope, 200, body, content_type, cache, extra)

    @staticmethod
    def _lookup(relative: str) -> tuple[str, bytes, bytes] | None:
        if relative == "checkpoint":
            return relative, b"text/plain; charset=utf-8", CHECKPOINT_CACHE
        try:
            tile = TilePath.parse(relative)
        except TileError:
            return None
        return str(tile), b"application/octet-stream", IMMUTABLE


def _accepts_gzip(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"accept-encoding":
            codings = value.decode("latin-1").split(",")
            return any(coding.split(";")[0].strip() == "gzip" for coding in codings)
    return False


async def _send(
    send: Any,
    scope: Scope,
    status: int,
    body: bytes,
    content_type: bytes,
    cache: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", cache),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
