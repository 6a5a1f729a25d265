"""The log's origin setting (LEDGER_ORIGIN) and a reader's check of it.

Apart from `ledger.node` so that `verify`, which opens no node, reads it
without importing the node's checkpointer, anchor and witnesses.
"""

from __future__ import annotations

import os

from ledger.errors import ConfigError, LedgerError
from ledger.store.merkle_log import MerkleLogTables, parse_checkpoint_row

ORIGIN_ENV = "LEDGER_ORIGIN"


def check_expected_origin(tables: MerkleLogTables) -> None:
    """For a reader (verify): when LEDGER_ORIGIN is set, the store's newest
    checkpoint is for that origin, else the store is another log (ConfigError).
    A checkpoint row that cannot be read is left to verify to report."""
    wanted = os.environ.get(ORIGIN_ENV)
    newest = tables.newest_checkpoint_row() if wanted else None
    if newest is None:
        return
    try:
        found = parse_checkpoint_row(newest).origin
    except (LedgerError, ValueError, TypeError):
        return
    if found != wanted:
        raise ConfigError(
            f"{ORIGIN_ENV} is {wanted!r} but the store's checkpoints are for {found!r}: "
            f"this store holds another log (or unset {ORIGIN_ENV})"
        )
