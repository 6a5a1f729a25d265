"""The ASGI application `ledger serve` runs: each worker process opens its own
node from the environment `ledger serve` sets (store, keys, passphrase, RNG
seeds directory) and closes it when uvicorn shuts the worker down."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from ledger.http.app import Service, create_app
from ledger.http.rng import SharedRngServer
from ledger.http.tokens import TokenStore
from ledger.node import PASSPHRASE_ENV, keys_dir, open_node
from ledger.store.config import STORE_ENV

RNG_ENV = "LEDGER_RNG_DIR"
ANCHOR_ENV = "LEDGER_SERVE_ANCHOR"  # "0": this worker never checkpoints (several workers)

__all__ = ["ANCHOR_ENV", "RNG_ENV", "STORE_ENV", "build", "default_rng_dir", "passphrase"]


def passphrase() -> bytes | None:
    value = os.environ.get(PASSPHRASE_ENV)
    return value.encode() if value else None


def default_rng_dir() -> Path:
    return keys_dir().path.parent / "rng-seeds"


def build() -> FastAPI:
    """A worker's app (uvicorn's factory): its node opens here, closes at shutdown."""
    anchor = None if os.environ.get(ANCHOR_ENV, "1") != "0" else 0
    node = open_node(
        os.environ.get(STORE_ENV) or None,
        None,
        passphrase=passphrase(),
        anchor_seconds=anchor,
        anchor_events=anchor,
    )
    from ledger.plugins.manager import get_plugin_manager

    rng = SharedRngServer(Path(os.environ.get(RNG_ENV) or default_rng_dir()))
    service = Service(node.app, get_plugin_manager().variants(), rng, TokenStore(node.keys.path))
    app = create_app(service)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            node.close()

    app.router.lifespan_context = lifespan
    return app
