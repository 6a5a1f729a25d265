"""`/tlog/`: a tiles directory (`ledger tiles DIR`) served read-only as C2SP
tlog-tiles, to anyone: a monitor reads it with no token and no project code.

Only the spec's own paths are answered (`checkpoint`, `tile/<L>/<N>[.p/<W>]`,
`tile/entries/<N>[.p/<W>]`, each parsed to its one canonical spelling before
a file is opened), so nothing else of the directory can be reached; and only
a regular file inside the directory is served, reached without following a
symbolic link on any component of its path (`TilesDirectory`), so a link
planted there cannot hand out the keys. Anything else is 404, as a path with
no file is: a refused file is no tile of this log, and a 403 would only tell a
prober where the planted links are. Tiles
and bundles never change once written (a path names its width too), so they
are cacheable for a year; the checkpoint changes as the log grows, so it is
not cached. Entry bundles are gzipped for a client that accepts it.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

from ledger.crypto.tiles import TileError, TilePath
from ledger.export.tiles import CHECKPOINT_FILE, CHECKPOINT_LIMIT, limit_of
from ledger.export.tiles_directory import RefusedFile, TilesDirectory

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
        relative, content_type, cache, limit = found
        try:
            with TilesDirectory(self.directory) as tree:  # opened per request: it may be replaced
                body = tree.read(relative, limit)
        except (OSError, RefusedFile):  # missing, a link, a fifo, too large: no tile to serve
            await _send(send, scope, 404, b"no such tile\n", b"text/plain", b"no-store")
            return
        extra: list[tuple[bytes, bytes]] = []
        if relative.startswith("tile/entries/") and _accepts_gzip(scope):
            body = gzip.compress(body, mtime=0)
            extra.append((b"content-encoding", b"gzip"))
        extra.append((b"vary", b"accept-encoding"))
        await _send(send, scope, 200, body, content_type, cache, extra)

    @staticmethod
    def _lookup(relative: str) -> tuple[str, bytes, bytes, int] | None:
        """The file a request path names, its type, its caching and its largest size."""
        if relative == CHECKPOINT_FILE:
            return relative, b"text/plain; charset=utf-8", CHECKPOINT_CACHE, CHECKPOINT_LIMIT
        try:
            tile = TilePath.parse(relative)
        except TileError:
            return None
        return str(tile), b"application/octet-stream", IMMUTABLE, limit_of(tile)


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
