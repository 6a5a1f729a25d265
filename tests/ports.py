"""Ports for the `ledger serve` processes the tests start.

A port the kernel picks (bind to 0) is free only until the probe closes it: a
test worker beside this one can be handed the same port before our server
binds it, and our health check would then reach the other worker's server.
So each pytest-xdist worker takes its ports from a range of its own, below the
kernel's ephemeral range (32768 and up on Linux) that outgoing connections and
bind-to-0 draw from, and hands out its ports in turn (a port a finished
test's server just closed is not taken again at once).
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from collections.abc import Iterator

FIRST = 20_000
PER_WORKER = 1_000  # 12 workers fit below 32768
WORKERS = 12


def _worker_index() -> int:
    """gw0, gw1, ... under pytest-xdist; 0 in a single process."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw") or 0) % WORKERS


def _candidates() -> Iterator[int]:
    start = FIRST + _worker_index() * PER_WORKER
    # A random start: another run of the suite on this machine (another checkout)
    # is unlikely to walk the same ports at the same time.
    offset = random.randrange(PER_WORKER)
    for step in itertools.count():
        yield start + (offset + step) % PER_WORKER


_ports = _candidates()


def free_port() -> int:
    """A port of this worker's range on 127.0.0.1 that nothing is bound to now."""
    for _ in range(PER_WORKER):
        port = next(_ports)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or still closing): the next one
            return port
    raise RuntimeError(f"no free port in this worker's range from {FIRST}")
