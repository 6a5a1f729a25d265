"""HTTP clients for the `ledger serve` processes the tests start.

`httpx.get(...)` and `httpx.request(...)` build a new client on every call, and
building one loads the system's CA bundle: about 40 ms of CPU a request, on
servers that are plain HTTP on 127.0.0.1. This module's client is built once;
it keeps no connection alive, so each request still opens a connection of its
own, as those calls did (a test that kills a server sees the same sockets).
`client(...)` builds a client of a test's own (keep-alive, a base URL) on the
same loaded TLS context, for the same reason.

`serving(base)` asks whether a server answers yet with the cheapest request
that goes through the whole app: a route that needs a token, unauthenticated
(401 from the app's own middleware). `/openapi.json` was asked before, and
building that document costs each server process about 0.3 s of CPU.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx

_TLS = ssl.create_default_context()  # never used on these http:// servers, loaded once
_CLIENT = httpx.Client(verify=_TLS, limits=httpx.Limits(max_keepalive_connections=0))


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    return _CLIENT.request(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return _CLIENT.request("GET", url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return _CLIENT.request("POST", url, **kwargs)


def client(**kwargs: Any) -> httpx.Client:
    """An `httpx.Client(**kwargs)` of the caller's own, on the loaded TLS context."""
    return httpx.Client(verify=_TLS, **kwargs)


def serving(base: str, timeout: float = 2) -> bool:
    """Whether the server at `base` answers through its app (False while it
    does not accept connections yet)."""
    try:
        return _CLIENT.request("GET", f"{base}/v1/games", timeout=timeout).status_code == 401
    except httpx.TransportError:
        return False
