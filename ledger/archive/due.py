"""Which rounds an archive takes: finished (settled to the end, or voided), every
event of theirs signed before the horizon and under the checkpoint the
archive is verified against. A round's stream leaves whole, so no chain in
the store ever starts at an archived event; accounts, tables, seeds and the
registers stay (they carry balances and keys forward, and a player's history
walks its account's chain: docs/archive.md).

One read of the log's rows, keeping a few fields per round (not per event):
memory grows with the rounds, not with the log."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ledger.crypto.envelope import ENVELOPE_PREFIX, SIGNED_AT_OFFSET
from ledger.store.merkle_log import MerkleLogTables
from ledger.store.recorders import Row

ROUND_TOPIC = "ledger.domain.round:Round."
_SETTLED = ROUND_TOPIC + "Settled"
_VOIDED = ROUND_TOPIC + "Voided"
_OPENED = ROUND_TOPIC + "Opened"
READ_BATCH = 5000
_AT = ENVELOPE_PREFIX.size + SIGNED_AT_OFFSET


@dataclass
class _Round:
    finished: bool = False
    newest: int = 0  # the newest signing time, µs
    currency: str | None = None


def log_rows(
    tables: MerkleLogTables, size: int, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, Row]]:
    """(position, row) of the log's first `size` positions, a batch a query."""
    position, after = 0, 0
    while position < size and (rows := tables.rows_after(after, min(READ_BATCH, size - position))):
        for row in rows:
            yield position, row
            position += 1
        after = rows[-1][0]
        if progress is not None:
            progress(len(rows))


def rounds_due(
    tables: MerkleLogTables,
    horizon: int,
    size: int,
    progress: Callable[[int], None] | None = None,
) -> dict[object, str | None]:
    """The finished rounds whose every event, all among the log's first `size`,
    was signed before `horizon` (µs): each stream id column, as stored, to the
    round's currency."""
    rounds: dict[object, _Round] = {}
    for _, (_, originator_id, _, topic, state) in log_rows(tables, size, progress):
        if type(topic) is not str or not topic.startswith(ROUND_TOPIC):
            continue  # (an archived event's marker row has no topic: its round is gone)
        found = rounds.get(originator_id)
        if found is None:
            found = rounds[originator_id] = _Round()
        found.newest = max(found.newest, int(state[_AT : state.index(b",", _AT)]))
        if topic == _OPENED:
            currency = _payload(state).get("currency")
            found.currency = currency if isinstance(currency, str) else None
        elif topic == _VOIDED:
            found.finished = True
        elif topic == _SETTLED:
            settled = _payload(state)
            found.finished |= settled.get("step") is None or bool(settled.get("over"))
    return {
        stream: found.currency
        for stream, found in rounds.items()
        if found.finished and found.newest < horizon
    }


def _payload(state: bytes) -> dict[str, object]:
    header_end = ENVELOPE_PREFIX.size + int.from_bytes(state[4:6], "big")
    try:
        found = json.loads(state[header_end + 64 :])
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
