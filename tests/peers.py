"""HTTP peers that are not what a command expects, served from a thread on a
free loopback port: one that answers 404 to everything (a web server, a
witness, the tiles: anything but a ledger node's API) and one that trickles
its answer a byte at a time (a slow or hostile peer)."""

from __future__ import annotations

import contextlib
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
    """The base URL of a server that reads a request, then sends its status
    line a byte every `interval` seconds, for as long as the client listens:
    each read is quick, the answer never ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    stopped = threading.Event()

    def serve(connection: socket.socket) -> None:
        with connection:
            try:
                connection.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10**6:
                    if stopped.wait(interval):
                        return
                    connection.sendall(bytes([byte]))
            except OSError:
                return  # the client gave up: what is being tested

    def accept() -> None:
        while not stopped.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stopped.set()
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
