"""`ledger serve`'s writer: one process that places every bet its workers take.

A bet's HTTP request (parsing, authentication, validating the body, the JSON
of the answer) cost about as much Python as the bet itself, and in one
process both shared one GIL: under a burst the node used one core. Here the
HTTP workers parse and check each request and hand the bet, already valid,
to this process over a Unix socket (`ledger.casino.bet_channel`); this
process runs the node's command runner for them: the same batches, the same
order, the same idempotency by request id, each bet answered after the
commit that holds it. The workers keep every other command (they write
through the node's writer lock as the processes of a node always have).

It listens on the socket path it is given, says READY, and serves until
asked to stop (SIGTERM or SIGINT: it takes no new connection and serves the
workers connected until they hang up), or until `ledger serve` dies (the
kernel's SIGTERM).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from pathlib import Path

from ledger.http.side_process import SideProcess, end_with, say_ready, stop_signals

log = logging.getLogger("ledger.writer")
READY = b"writing\n"
ACCEPT_POLL = 0.2  # seconds: how soon a stop is noticed between connections
HANG_UP_SECONDS = 30.0  # a worker that stays connected this long after a stop is left


def start(path: Path, env: dict[str, str] | None = None) -> SideProcess:
    """The writer process listening on `path`, for the serving process that calls this."""
    return SideProcess("ledger.http.writer_process", str(path), env=env)


def main(argv: list[str]) -> int:
    from ledger.casino.bet_channel import serve_connection
    from ledger.casino.opened import open_ledger
    from ledger.http import gc_pauses
    from ledger.http.asgi import ANCHOR_ENV, passphrase

    end_with(int(argv[0]))
    path = Path(argv[1])
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    stopped = stop_signals()
    gc_pauses.install()  # the live round is held here
    anchor = None if os.environ.get(ANCHOR_ENV, "1") != "0" else 0
    ledger = open_ledger(
        os.environ.get("LEDGER_STORE") or None,
        os.environ.get("LEDGER_KEYS"),
        passphrase=passphrase(),
        anchor_seconds=anchor,
        anchor_events=anchor,
    )
    casino = ledger.casino
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path.unlink(missing_ok=True)
    listener.bind(str(path))
    listener.listen(64)
    listener.settimeout(ACCEPT_POLL)
    say_ready(READY)
    workers: list[threading.Thread] = []
    try:
        while not stopped.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            connection.settimeout(None)
            worker = threading.Thread(
                target=serve_connection,
                args=(connection, casino.submit_bet),
                name="ledger-bets-from-worker",
                daemon=True,
            )
            worker.start()
            workers.append(worker)
    finally:
        listener.close()
        path.unlink(missing_ok=True)
        # A worker still connected is still serving (Ctrl-C reaches every
        # process of the server at once): its bets are placed until it hangs up.
        for worker in workers:
            worker.join(timeout=HANG_UP_SECONDS)
        ledger.node.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
