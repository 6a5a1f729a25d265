"""The checkpointer: follows the notification log, extends the Merkle tree over
it, and signs a checkpoint after each batch.

The same code runs on SQLite and PostgreSQL: it only reads rows after the last
leaf's notification id (the global log order) and appends to the Merkle
tables. It checks each envelope's signature before the event enters the tree,
so it never signs a tree head over a forged event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import SignerCheck, check_row, open_envelope
from ledger.crypto.keys import Role
from ledger.crypto.merkle import CompactRange
from ledger.crypto.signing import Signer
from ledger.errors import ConfigError
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorders import LeafRow, NodeRow

DEFAULT_ORIGIN = "casino-ledger"


def load_compact_range(tables: MerkleLogTables, size: int) -> CompactRange:
    """The right edge of the stored tree: one perfect subtree per set bit of `size`."""
    hashes, offset = [], 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            stored = tables.node(level, offset >> level)
            if stored is None:
                raise LookupError(f"Merkle node ({level}, {offset >> level}) is missing")
            hashes.append(stored)
            offset += 1 << level
    return CompactRange(0, size, hashes)


class Checkpointer:
    """Extends the Merkle log over new events and signs checkpoints."""

    def __init__(
        self,
        tables: MerkleLogTables,
        *,
        signer: Signer,
        signer_check: SignerCheck,
        origin: str = DEFAULT_ORIGIN,
        batch_size: int = 1000,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if signer.role is not Role.CHECKPOINT:
            raise ConfigError(f"checkpoints need a checkpoint key, not {signer.role.value}")
        self.tables = tables
        self.signer = signer
        self.signer_check = signer_check
        self.origin = origin
        self.batch_size = batch_size
        self.clock = clock

    def catch_up(self, progress: Callable[[int], None] | None = None) -> Checkpoint | None:
        """Cover every event stored so far; return the newest checkpoint made."""
        size, last_id = self.tables.tail()
        frontier = load_compact_range(self.tables, size)
        newest = None
        while rows := self.tables.rows_after(last_id, self.batch_size):
            leaves: list[LeafRow] = []
            nodes: list[NodeRow] = []
            for notification_id, originator_id, version, topic, state in rows:
                stream = stream_of(originator_id)
                envelope = open_envelope(bytes(state), stream=stream, version=version)
                check_row(envelope, stream=stream, version=version, topic=topic)
                self.signer_check.check_signature(envelope, stream=stream, version=version)
                leaf_hash = envelope.entry_hash
                leaves.append((frontier.end, notification_id, leaf_hash))
                frontier.append(leaf_hash, nodes)
            newest = Checkpoint.sign(
                origin=self.origin,
                size=frontier.end,
                root=frontier.root(),
                signer=self.signer,
                now=self.clock(),
            )
            self.tables.append(leaves, nodes, newest)
            last_id = rows[-1][0]
            if progress:
                progress(len(rows))
        return newest

    def follow(self, poll_seconds: float = 0.5, stop: Callable[[], bool] = lambda: False) -> None:
        """Keep the log checkpointed until `stop()` says otherwise."""
        while not stop():
            if self.catch_up() is None:
                time.sleep(poll_seconds)
