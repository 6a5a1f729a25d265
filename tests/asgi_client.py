"""A synchronous HTTP client of an ASGI app, the app run in this thread.

Starlette's TestClient runs the app on an event loop in a second thread and
hands every request across (eight hand-offs each): on a 2-core VM that is
4-5 ms a request, against 1-2 ms for the app's own work, and the HTTP tests
make thousands. This one drives httpx's ASGITransport on an event loop of
this thread's own instead; the app's synchronous routes still run in anyio's
worker threads, as they do when served. Responses are httpx's, as the
TestClient's are. A response is read whole: a stream that never ends (the
feed's `follow`) needs a real server (tests/http_api/test_http_feed.py runs one).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import httpx

BASE_URL = "http://testserver"  # the TestClient's, so absolute URLs in answers read the same


class InThreadClient:
    """Each thread that calls it gets an event loop and a client of its own
    (a mirror's follower thread and the test itself, for one)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._local = threading.local()
        self._opened: list[tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = []
        self._lock = threading.Lock()

    def _mine(self) -> tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]:
        mine: tuple[asyncio.AbstractEventLoop, httpx.AsyncClient] | None = getattr(
            self._local, "mine", None
        )
        if mine is None:
            transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)  # a 500
            # Redirects followed, as the TestClient does by default.
            client = httpx.AsyncClient(
                transport=transport, base_url=BASE_URL, follow_redirects=True
            )
            mine = self._local.mine = (asyncio.new_event_loop(), client)
            with self._lock:
                self._opened.append(mine)
        return mine

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        loop, client = self._mine()
        return loop.run_until_complete(client.request(method, url, **kwargs))

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("PUT", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", url, **kwargs)

    def __del__(self) -> None:
        # Collected: the transports hold no socket, only the loops to free.
        for loop, _ in self._opened:
            with contextlib.suppress(Exception):
                loop.close()
