"""The row lookups verification makes besides reading the log in order."""

from __future__ import annotations

from typing import Protocol

from ledger.store.merkle_log import CheckpointRow
from ledger.store.recorders import Row


class LogRows(Protocol):
    """What the key registry, the audit trail and the checkpoint steps read: a
    store's tables, or a bundle's index of its events."""

    def row_by_stream(self, stream: str, version: int) -> Row | None: ...
    def position_of(self, notification_id: int) -> int: ...
    def checkpoint_rows(self) -> list[CheckpointRow]: ...
