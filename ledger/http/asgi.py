"""The ASGI application `ledger serve` runs: each worker process opens its own
node from the environment `ledger serve` sets (store, keys, passphrase, RNG
seeds directory) and closes it when uvicorn shuts the worker down."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from ledger.audit.self_status import SelfStatus
from ledger.casino.opened import open_ledger
from ledger.crypto.keystore import keys_dir
from ledger.http import gc_pauses
from ledger.http.app import Service, create_app
from ledger.http.rng import SharedRngServer
from ledger.http.serve_settings import (
    ANCHOR_ENV,
    PEERS_ENV,
    READ_ONLY_ENV,
    RNG_ENV,
    SELF_EVERY_ENV,
    SELF_STATUS_ENV,
    SUPERVISOR_ENV,
    TILES_ENV,
    WRITER_ENV,
    passphrase,
)
from ledger.http.tokens import TokenStore
from ledger.rng.server import default_rng_dir as rng_dir_beside
from ledger.store.config import STORE_ENV
from ledger.store.sealed_rows import SEALED_ENV

log = logging.getLogger("ledger.serve")

__all__ = [
    "ANCHOR_ENV",
    "PEERS_ENV",
    "READ_ONLY_ENV",
    "RNG_ENV",
    "STORE_ENV",
    "SUPERVISOR_ENV",
    "TILES_ENV",
    "WRITER_ENV",
    "build",
    "default_rng_dir",
    "passphrase",
]


def default_rng_dir() -> Path:
    return rng_dir_beside(keys_dir().path)


def _stop_with_supervisor() -> None:
    """A worker of `serve --workers N` ends when its supervisor does, however
    the supervisor ends (uvicorn stops its workers only when it is told to
    stop; killed, it would leave them serving). Linux: the kernel sends the
    worker SIGTERM when its parent dies, and uvicorn shuts down on SIGTERM."""
    supervisor = os.environ.get(SUPERVISOR_ENV)
    if not supervisor or not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != int(supervisor):  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def build() -> FastAPI:
    """A worker's app (uvicorn's factory): its node opens here, closes at shutdown."""
    _stop_with_supervisor()
    gc_pauses.install()  # a big live round must not pause every bet for 100 ms
    anchor = None if os.environ.get(ANCHOR_ENV, "1") != "0" else 0
    ledger = open_ledger(
        os.environ.get(STORE_ENV) or None,
        None,
        passphrase=passphrase(),
        anchor_seconds=anchor,
        anchor_events=anchor,
        writable=os.environ.get(READ_ONLY_ENV) != "1",
    )
    node = ledger.node
    told = os.environ.get(SEALED_ENV)
    if told:  # (the anchor process's socket: it need not verify what this worker seals)
        node.tell_sealed_rows_to(told)
    rng = SharedRngServer(Path(os.environ.get(RNG_ENV) or default_rng_dir()))
    service = Service.of(ledger, rng, TokenStore(node.keys.path))
    writer = os.environ.get(WRITER_ENV)
    if writer:
        try:
            service.casino.send_bets_to(writer)
        except OSError as exc:  # it stopped: this worker places its bets itself
            log.warning("the writer process cannot be reached (%s): bets are placed here", exc)
    tiles = os.environ.get(TILES_ENV)
    checked = os.environ.get(SELF_STATUS_ENV)
    self_status = SelfStatus(Path(checked), int(os.environ[SELF_EVERY_ENV])) if checked else None
    app = create_app(service, tiles=Path(tiles) if tiles else None, self_status=self_status)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            service.casino.stop_sending_bets()  # the writer process sees this worker hang up
            node.close()

    app.router.lifespan_context = lifespan
    return app
