"""What `ledger serve` hands its processes in their environment: the names of
the settings, and the passphrase. A module of its own, light to import: the
writer and anchor processes read these and never build the HTTP app (which
would cost each of them about 0.3 s of CPU as it starts)."""

from __future__ import annotations

import os

from ledger.node import PASSPHRASE_ENV

RNG_ENV = "LEDGER_RNG_DIR"
TILES_ENV = "LEDGER_SERVE_TILES"  # a tiles directory to serve at /tlog/ (`serve --tiles`)
ANCHOR_ENV = "LEDGER_SERVE_ANCHOR"  # "0": this worker never checkpoints (several workers)
SUPERVISOR_ENV = "LEDGER_SERVE_SUPERVISOR"  # the pid of `ledger serve --workers N`, N > 1
READ_ONLY_ENV = "LEDGER_SERVE_READ_ONLY"  # "1": no signing key (`ledger serve --read-only`)
WRITER_ENV = "LEDGER_SERVE_WRITER"  # the writer process's socket: bets are placed there
PEERS_ENV = "LEDGER_SERVE_PEERS"  # host:port the writer takes other nodes' bets on ("off": none)
# The self-verification's status file (`ledger.audit.self_status`) and its period in
# seconds, for the health endpoint (unset: self-verification off).
SELF_STATUS_ENV = "LEDGER_SERVE_SELF_STATUS"
SELF_EVERY_ENV = "LEDGER_SERVE_SELF_EVERY"


def passphrase() -> bytes | None:
    value = os.environ.get(PASSPHRASE_ENV)
    return value.encode() if value else None
