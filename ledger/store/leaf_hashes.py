"""The Merkle leaf hashes of a range of positions, read raw: each row's index and
hash column as stored, nothing checked or converted here (an archive's tiles
read every leaf, and hold the tree they make to the checkpoint's signed root;
`MerkleLogTables.leaves` checks each row as it reads it, for callers that do
not)."""

from __future__ import annotations

from typing import Any

from ledger.store.merkle_log import MerkleLogTables


class LeafHashes:
    def __init__(self, tables: MerkleLogTables) -> None:
        self._recorder = tables.recorder
        self._range = tables.recorder.sql(
            "SELECT leaf_index, leaf_hash FROM {leaves} "
            "WHERE leaf_index >= %s AND leaf_index < %s ORDER BY leaf_index"
        )

    def between(self, begin: int, end: int) -> list[tuple[Any, Any]]:
        """(index column, hash column) of the leaf rows with index in [begin, end)."""
        with self._recorder.read() as cursor:
            cursor.execute(self._range, (begin, end))
            rows: list[tuple[Any, Any]] = cursor.fetchall()
            return rows
