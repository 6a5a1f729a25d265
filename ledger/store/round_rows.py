"""The rounds' rows as `ledger archive` chooses from them (`ledger.archive.due`),
read light: only the rows whose topic column names a round's event, and of
each only its stream id column, its topic, the bytes where a v2 envelope's
signing time sits, and the whole envelope only for the topics whose payload
the choice reads (a round's opening and its settlements). The database skips
every other row, so the choice costs a fraction of a read of the log.

Nothing here is trusted: it only says which rounds to try. Every event of a
chosen round is then read in log order and checked before anything leaves
the store (`ledger.archive.write`); a row read wrongly here can only keep a
round in the store or have the archive refuse to write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

from ledger.crypto.envelope import ENVELOPE_PREFIX, SIGNED_AT_OFFSET
from ledger.store.merkle_log import MerkleLogTables

ROUND_TOPIC: Final = "ledger.domain.round:Round."
_AT: Final = ENVELOPE_PREFIX.size + SIGNED_AT_OFFSET  # where the signing time's digits start
_AT_BYTES: Final = 24  # its digits (at most 16) and the comma after them
PAGE: Final = 5000

# (row id, stream id column, topic, the bytes at the signing time, the envelope
# or None), as the driver gives them (the caller checks their types).
RoundRow = tuple[Any, ...]


def last_id_under(tables: MerkleLogTables, size: int) -> int:
    """The row id the Merkle leaf at position `size - 1` names (0 for none): the
    last of the log's first `size` rows, if its row says so. Not trusted: the
    archive holds it to the id of the row it reads at that position."""
    if size <= 0:
        return 0
    found = tables.leaves(size - 1, size)
    return found[0][1] if found else 0


class RoundRows:
    """The round rows among the log's events up to a row id, a page a query."""

    def __init__(self, tables: MerkleLogTables, whole: tuple[str, str]) -> None:
        """`whole`: the two topics whose rows come with their envelope."""
        self.tables = tables
        self._whole = whole
        # (substr on both stores: SQLite's blob and PostgreSQL's bytea alike, 1-based.)
        self._page = tables.recorder.sql(
            f"SELECT {{id}}, originator_id, topic, substr(state, {_AT + 1}, {_AT_BYTES}), "
            "CASE WHEN topic IN (%s, %s) THEN state END FROM {events} "
            f"WHERE {{id}} > %s AND {{id}} <= %s AND substr(topic, 1, {len(ROUND_TOPIC)}) = %s "
            "ORDER BY {id} LIMIT %s"
        )

    def pages(
        self, after_id: int, last_id: int, progress: Callable[[int], None] | None = None
    ) -> Iterator[list[RoundRow]]:
        """The round rows with ids in (after_id, last_id], in id order, a page at a time."""
        after = after_id
        while after < last_id:
            with self.tables.recorder.read() as cursor:
                cursor.execute(self._page, (*self._whole, after, last_id, ROUND_TOPIC, PAGE))
                rows: list[RoundRow] = cursor.fetchall()
            if not rows:
                return
            yield rows
            after = rows[-1][0]
            if progress is not None:
                progress(len(rows))
