"""HTTP peers that are not what a command expects, served from a thread on a
free loopback port: one that answers 404 to everything (a web server, a
witness, the tiles: anything but a ledger node's API) and `SlowLoris`, one
that never gives a whole answer (a slow or hostile peer: a mirror's source,
a witness the checkpointer asks)."""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _NotFound(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        body = b"<html><body>404 Not Found</body></html>"
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def not_a_ledger() -> Iterator[str]:
    """The base URL of a server that answers 404 to every request."""
    with _serving(_NotFound) as base:
        yield base


class _NoCheckpoints(_NotFound):
    def do_GET(self) -> None:
        if not self.path.startswith("/v1/checkpoints?"):
            return self._answer()
        body = b'{"checkpoints": [], "next_after": null}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return None


@contextmanager
def empty_ledger() -> Iterator[str]:
    """The base URL of a server that answers as a ledger node holding no
    checkpoint yet (a command that must refuse before it reads any further)."""
    with _serving(_NoCheckpoints) as base:
        yield base


@contextmanager
def trickling(interval: float = 0.2) -> Iterator[str]:
    """The base URL of a server that sends its status line a byte every
    `interval` seconds, for as long as the client listens: each read is
    quick, the answer never ends."""
    with SlowLoris("headers", interval) as peer:
        yield peer.url


class SlowLoris:
    """A peer that never gives a whole answer. `trickle="headers"` sends its
    status line and headers one byte every `pause` seconds, without end;
    `trickle="body"` sends whole headers, then the body that way;
    `trickle=None` accepts and says nothing. Each byte comes well inside a
    time-out per read."""

    HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"

    def __init__(self, trickle: str | None, pause: float = 0.2) -> None:
        self.trickle = trickle
        self.pause = pause
        self.sent = 0  # bytes trickled so far, to all its callers
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.1)
        self.stopped = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._answer, args=(connection,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            if self.trickle is None:
                self.stopped.wait()
                return
            if self.trickle == "headers":  # the status line, then one header without end
                whole, trickled = b"", self.HEADERS[:17] + b"X-Slow: "
            else:  # whole headers, then the body without end
                whole, trickled = self.HEADERS, b""
            try:
                connection.sendall(whole)
                for byte in itertools.chain(trickled, itertools.repeat(ord("a"))):
                    if self.stopped.wait(self.pause):
                        return
                    connection.sendall(bytes([byte]))
                    self.sent += 1
            except OSError:
                return  # the caller hung up: cut off

    def __enter__(self) -> SlowLoris:
        self.threads[0].start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        for thread in list(self.threads):
            thread.join(10)
        self.listener.close()
