"""The casino's write path: the documented Python API (`Casino`) over a
command runner that applies concurrent commands in order and saves them in
shared commits, one module per job (see `ledger.casino.facade`)."""

from ledger.casino.bet_batches import MAX_BETS, BetOutcome, BetRequest
from ledger.casino.facade import Casino
from ledger.casino.opened import Ledger, open_ledger
from ledger.casino.runner import MAX_REQUEST_ID, BatchSettings

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
