"""One HTTP client for the `ledger serve` processes the tests start.

`httpx.get(...)` and `httpx.request(...)` build a new client on every call, and
building one loads the system's CA bundle: about 40 ms of CPU a request, on
servers that are plain HTTP on 127.0.0.1. This client is built once. It keeps
no connection alive, so each request still opens a connection of its own, as
those calls did (a test that kills a server sees the same sockets).
"""

from __future__ import annotations

from typing import Any

import httpx

_CLIENT = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    return _CLIENT.request(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return _CLIENT.request("GET", url, **kwargs)
