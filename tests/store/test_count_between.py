"""`MerkleLogTables.count_between` counts the log's rows in an id range; from the
log's start inside a SQLite transaction it counts every row without the range
when the range holds them all. Both ways give the range's count, archived
places included, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ledger.archive.run import archive_rounds
from ledger.node import Node
from tests.history.test_history import Tables


def test_the_count_of_a_range_is_the_same_with_or_without_the_shortcut(
    node: Node, tmp_path: Path
) -> None:
    tables = Tables(node)
    tables.play(2)
    archive_rounds(node, datetime.now(UTC), tmp_path / "a1")  # archived places count too
    tables.play(1)
    log = node.app.tables
    ids = [row[0] for row in log.rows_after(0, 10**6)]
    assert len(ids) > 10 and log.event_count()[0] <= len(ids)
    last = ids[-1]
    with log.recorder.read() as cursor:
        counts = {
            (after, upto): (log.count_between(after, upto, cursor), log.count_between(after, upto))
            for after, upto in ((0, last), (0, last + 5), (0, ids[-2]), (ids[3], last), (0, 0))
        }
    for (after, upto), (in_transaction, ranged) in counts.items():
        expected = len([i for i in ids if after < i <= upto])
        assert in_transaction == ranged == expected, (after, upto)
