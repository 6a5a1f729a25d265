"""The casino's write path: the documented Python API (`Casino`) over a
command runner that applies concurrent commands in order and saves them in
shared commits, one module per job (see `ledger.casino.facade`).

Its names are imported when first asked for (`from ledger.casino import
Casino`), not with the package: a command that opens a ledger only to read
it (`ledger balances`, `ledger rounds`) never builds the write path (the
command runner, the aggregates' event classes, asyncio for the bet channel:
about 60 ms of CPU a process)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.casino.bet_batches import MAX_BETS, BetOutcome, BetRequest
    from ledger.casino.facade import Casino
    from ledger.casino.opened import Ledger, open_ledger
    from ledger.casino.runner import MAX_REQUEST_ID, BatchSettings

_WHERE = {
    "MAX_BETS": "bet_batches",
    "BetOutcome": "bet_batches",
    "BetRequest": "bet_batches",
    "Casino": "facade",
    "Ledger": "opened",
    "open_ledger": "opened",
    "MAX_REQUEST_ID": "runner",
    "BatchSettings": "runner",
}

__all__ = [
    "MAX_BETS",
    "MAX_REQUEST_ID",
    "BatchSettings",
    "BetOutcome",
    "BetRequest",
    "Casino",
    "Ledger",
    "open_ledger",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value  # asked for once
    return value
