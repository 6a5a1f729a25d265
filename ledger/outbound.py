"""HTTP requests the ledger makes to its peers (a mirror's source, a witness),
each under one overall deadline.

A socket time-out bounds one read, not a request: a peer that sends its
answer a byte at a time, each just inside the time-out, holds a reader for
as long as it likes. Here a timer cuts the connection when the deadline
passes, whatever phase the request is in (connecting, sending, waiting for
the headers, reading the body), and an answer larger than `max_bytes` is cut
too: what a peer sends is its own to choose, and the ledger's to bound. A
deadline that passed while connecting (no socket yet to cut) ends the request
once connected, and a body cut short is never taken for the whole answer.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import urllib.parse
from dataclasses import dataclass

MAX_BYTES = 64 * 1024 * 1024  # far above the largest answer a ledger peer gives (a feed page)


class DeadlinePassed(OSError):
    """The request did not complete within its deadline (a slow or silent peer)."""


class AnswerTooLarge(OSError):
    """The peer's answer was larger than the reader accepts."""


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: bytes


def request(
    method: str,
    url: str,
    *,
    deadline: float,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    max_bytes: int = MAX_BYTES,
) -> Answer:
    """`method url`, answered in full within `deadline` seconds, or an OSError
    (`DeadlinePassed`, `AnswerTooLarge`, or the network's own)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname, parts.port, timeout=deadline)
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked on it

    timer = threading.Timer(deadline, cut)
    timer.daemon = True
    timer.start()
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.connect()
        if expired.is_set():  # it passed while connecting, before there was a socket to cut
            raise DeadlinePassed(f"no complete answer within {deadline:g} s")
        connection.request(method, target, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise AnswerTooLarge(f"{url} answered more than {max_bytes} bytes")
        if expired.is_set() or response.length:  # cut mid-body, or closed before its end
            raise http.client.IncompleteRead(data, response.length)
        return Answer(response.status, response.getheader("Content-Type", ""), data)
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            raise DeadlinePassed(f"no complete answer within {deadline:g} s") from None
        if isinstance(exc, OSError):
            raise
        raise OSError(f"not an HTTP answer ({type(exc).__name__})") from None
    finally:
        timer.cancel()
        connection.close()
