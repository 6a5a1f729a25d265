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

On a PostgreSQL store it also listens on TCP (`ledger serve --peers`) for
the writers of other nodes on the store: each round is sequenced by one
writer, and the others hand it the round's bets
(`ledger.casino.round_routes`); the bets a peer hands this writer are
placed here.

It listens on the socket path it is given, says READY, and serves until
asked to stop (SIGTERM or SIGINT: it takes no new connection and serves the
workers connected until they hang up), or until `ledger serve` dies (the
kernel's SIGTERM).
"""

from __future__ import annotations

import functools
import logging
import os
import select
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.casino.bet_channel import serve_connection
from ledger.http.side_process import SideProcess, end_with, say_ready, stop_signals

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger

log = logging.getLogger("ledger.writer")
READY = b"writing\n"
ACCEPT_POLL = 0.2  # seconds: how soon a stop is noticed between connections
HANG_UP_SECONDS = 30.0  # a worker that stays connected this long after a stop is left


def start(path: Path, env: dict[str, str] | None = None) -> SideProcess:
    """The writer process listening on `path`, for the serving process that calls this."""
    return SideProcess("ledger.http.writer_process", str(path), env=env)


def main(argv: list[str]) -> int:
    from ledger.casino.opened import open_ledger
    from ledger.casino.runner import WAIT_ENV
    from ledger.http import gc_pauses
    from ledger.http.serve_settings import ANCHOR_ENV, PEERS_ENV, passphrase
    from ledger.store.sealed_rows import SEALED_ENV

    end_with(int(argv[0]))
    path = Path(argv[1])
    # Bets reach this process already grouped (a line a turn of a worker's event
    # loop): waiting for more before a commit only delays it (single bets: about
    # a tenth fewer a second with the 1 ms of the Python API's default).
    os.environ.setdefault(WAIT_ENV, "0")
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
    told = os.environ.get(SEALED_ENV)
    if told:
        ledger.node.tell_sealed_rows_to(told)
    workers = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path.unlink(missing_ok=True)
    workers.bind(str(path))
    workers.listen(64)
    peers = Peers.listen(ledger, os.environ.get(PEERS_ENV) or "")
    say_ready(READY)
    served: list[threading.Thread] = []
    try:
        while not stopped.is_set():
            listening = [workers, *([peers.listener] if peers else [])]
            ready, _, _ = select.select(listening, [], [], ACCEPT_POLL)
            for listener in ready:
                connection, _ = listener.accept()
                connection.settimeout(None)
                if listener is workers:
                    place = peers.routes.submit if peers else ledger.casino.submit_bets_here
                    serve = functools.partial(serve_connection, connection, place)
                else:
                    assert peers is not None
                    serve = functools.partial(peers.serve, connection)
                thread = threading.Thread(target=serve, name="ledger-bets-from", daemon=True)
                thread.start()
                served.append(thread)
    finally:
        workers.close()
        path.unlink(missing_ok=True)
        if peers is not None:
            peers.close()
        # A worker still connected is still serving (Ctrl-C reaches every
        # process of the server at once): its bets are placed until it hangs up.
        for thread in served:
            thread.join(timeout=HANG_UP_SECONDS)
        ledger.node.close()
    return 0


class Peers:
    """The other nodes' writers: the TCP listener they hand bets to, and this
    writer's routes to them."""

    def __init__(self, ledger: Ledger, listener: socket.socket, address: str) -> None:
        from ledger.casino import peer_link
        from ledger.casino.round_routes import RoundRoutes
        from ledger.crypto.roles import Role
        from ledger.store.config import store_url
        from ledger.store.round_writers import RoundWriters

        node = ledger.node
        self.listener = listener
        self.casino = ledger.casino
        self.secret = peer_link.link_secret(node.keys.signer(Role.LEDGER_NODE, node.passphrase))
        writers = RoundWriters(store_url(os.environ.get("LEDGER_STORE") or None), address)
        self.routes = RoundRoutes(writers, self.secret, self.casino.submit_bets_here)

    @classmethod
    def listen(cls, ledger: Ledger, address: str) -> Peers | None:
        """Listening on `address` (host:port, port 0 for any free one); None for "" or off."""
        if address in ("", "off"):
            return None
        host, _, port = address.rpartition(":")
        listener = socket.create_server((host.strip("[]"), int(port)), backlog=64)
        bound_host, bound_port = listener.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        return cls(ledger, listener, f"{shown}:{bound_port}")

    def serve(self, connection: socket.socket) -> None:
        """A peer's bets, placed here once it proved the ledger-node key."""
        from ledger.casino import peer_link

        try:
            framing = peer_link.accept(connection, self.secret)
        except OSError as exc:
            log.warning("a peer was refused: %s", exc)
            connection.close()
            return
        serve_connection(connection, self.casino.submit_bets_here, framing)

    def close(self) -> None:
        self.listener.close()
        self.routes.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
