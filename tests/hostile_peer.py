"""Hostile HTTP peers on real sockets, for the deadline tests (a witness
asked by the checkpointer, a source asked by a mirror)."""

from __future__ import annotations

import itertools
import socket
import threading


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
            head = b"" if self.trickle == "headers" else self.HEADERS
            if head:
                connection.sendall(head)
            endless = self.HEADERS[:17] + b"X-Slow: " if self.trickle == "headers" else b""
            for byte in itertools.chain(endless, itertools.repeat(ord("a"))):
                if self.stopped.wait(self.pause):
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return  # the caller hung up: cut off
                self.sent += 1

    def __enter__(self) -> SlowLoris:
        self.threads[0].start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        for thread in list(self.threads):
            thread.join(10)
        self.listener.close()
