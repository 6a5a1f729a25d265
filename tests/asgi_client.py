"""A synchronous HTTP client of an ASGI app, the app run in this thread.

Starlette's TestClient runs the app on an event loop in a second thread and
hands every request across (eight hand-offs each): on a 2-core VM that is
4-5 ms a request, against 1-2 ms for the app's own work, and the HTTP tests
make thousands. This one drives httpx's ASGITransport on an event loop of
this thread's own instead; the app's synchronous routes still run in anyio's
worker threads, as they do when served. Responses are httpx's, as the
TestClient's are. A response is read whole: a stream that never ends (the
feed's `follow`) needs a real server (tests/test_http_feed.py runs one).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import httpx

BASE_URL = "http://testserver"  # the TestClient's, so absolute URLs in answers read the same


class InThreadClient:
    def __init__(self, app: Any) -> None:
        self.app = app
        self._thread = threading.get_ident()
        self._loop = asyncio.new_event_loop()
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # a 500, as served
        # Redirects followed, as the TestClient does by default.
        self._client = httpx.AsyncClient(
            transport=transport, base_url=BASE_URL, follow_redirects=True
        )

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        if threading.get_ident() != self._thread:
            raise RuntimeError("an InThreadClient serves the thread that made it only")
        return self._loop.run_until_complete(self._client.request(method, url, **kwargs))

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("PUT", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", url, **kwargs)

    def close(self) -> None:
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._client.aclose())
            self._loop.close()

    def __del__(self) -> None:
        # Collected unclosed: the transport holds no socket, only the loop to free.
        with contextlib.suppress(Exception):
            self._loop.close()
