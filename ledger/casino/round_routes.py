"""Where a node's writer places each round's bets: here, or at the writer that
sequences the round (the sequencer pattern across nodes).

Nodes writing one PostgreSQL store each run a writer process. Were each to
place the bets its own HTTP workers take, every writer would read and check
(an Ed25519 verify an event) every bet the others wrote on the round before
its next commit, and lose races on the round's version: a second node cost
1.55x the CPU a bet and added nothing. Instead one writer sequences a round
(`ledger.store.round_writers` says which), and the others hand it the
round's bets over an authenticated line (`ledger.casino.peer_link`),
answering their clients with what it answers. So a bet's domain work and
sealing happen once, on one node; the other nodes' share is HTTP and a hop.
Rounds of different tables are sequenced by whichever writers claimed them,
so a studio's tables spread over its nodes.

A peer that cannot be reached, or that hangs up with bets unanswered, makes
this writer place them itself, by request id: a bet the peer committed
before it went is recognised and answered with its first result.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future

from ledger.casino import peer_link
from ledger.casino.bet_batches import BetRequest
from ledger.casino.bet_channel import BetChannel, PlaceHere
from ledger.store.round_writers import RoundWriters

log = logging.getLogger("ledger.rounds")
ROUTE_SECONDS = 5.0  # how long a round's route is trusted before it is asked again
CONNECT_SECONDS = 2.0
MAX_ROUTES = 10_000  # rounds whose route is remembered


class RoundRoutes:
    """A writer's routes (thread-safe: each worker's connection calls `submit`)."""

    def __init__(self, writers: RoundWriters, secret: bytes, place_here: PlaceHere) -> None:
        self._writers = writers
        self._secret = secret
        self._place_here = place_here
        self._lock = threading.Lock()
        self._routes: dict[str, tuple[float, BetChannel | None]] = {}
        self._peers: dict[str, BetChannel] = {}
        self._unreachable: dict[str, float] = {}  # address -> until when it is not tried

    def submit(self, round_id: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
        """Each bet's future, answered once the commit holding it is durable."""
        peer = self._route(round_id)
        if peer is None:
            return self._place_here(round_id, bets)
        return peer.submit(round_id, bets)

    def _route(self, round_id: str) -> BetChannel | None:
        now = time.monotonic()
        known = self._routes.get(round_id)
        if known is not None and now < known[0] and (known[1] is None or known[1].connected):
            return known[1]
        with self._lock:
            address = self._writers.writer_of(round_id)
            peer = self._peer(address, now) if address else None
            if len(self._routes) >= MAX_ROUTES:
                self._routes = {r: k for r, k in self._routes.items() if now < k[0]}
            self._routes[round_id] = (now + ROUTE_SECONDS, peer)
        return peer

    def _peer(self, address: str, now: float) -> BetChannel | None:
        """The line to the writer at `address` (None: it cannot be reached now)."""
        peer = self._peers.get(address)
        if peer is not None and peer.connected:
            return peer
        if now < self._unreachable.get(address, 0.0):
            return None
        try:
            connection, framing = peer_link.connect(address, self._secret, CONNECT_SECONDS)
        except (OSError, ValueError) as exc:
            log.warning(
                "the writer at %s cannot be reached (%s): bets are placed here", address, exc
            )
            self._unreachable[address] = now + ROUTE_SECONDS
            return None
        peer = BetChannel(connection, self._place_here, framing)
        self._peers[address] = peer
        return peer

    def close(self) -> None:
        with self._lock:
            for peer in self._peers.values():
                peer.close()
            self._peers.clear()
            self._routes.clear()
        self._writers.close()
