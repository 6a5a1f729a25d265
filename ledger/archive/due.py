"""Which rounds an archive takes: finished (settled to the end, or voided), every
event of theirs signed before the horizon and under the checkpoint the
archive is verified against. A round's stream leaves whole, so no chain in
the store ever starts at an archived event; accounts, tables, seeds and the
registers stay (they carry balances and keys forward, and a player's history
walks its account's chain: docs/archive.md).

One read of the rounds' rows (`ledger.store.round_rows`: the database passes
over every other row, and hands the whole envelope only of a round's opening
and settlements), keeping a few fields per round (not per event): memory
grows with the rounds, not with the log. The archive's workers read a range
of the log each (`round_states_in`), their states `merged` in log order.
What it reads is not trusted: it chooses the rounds to try, and every event
of theirs is checked as the archive is written."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ledger.crypto.envelope import ENVELOPE_PREFIX
from ledger.crypto.keys import Keyring
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import MerkleLogTables
from ledger.store.recorders import Row
from ledger.store.round_rows import ROUND_TOPIC, RoundRows

_SETTLED = ROUND_TOPIC + "Settled"
_VOIDED = ROUND_TOPIC + "Voided"
_OPENED = ROUND_TOPIC + "Opened"
READ_BATCH = 5000
NEVER = 1 << 63  # a signing time past every horizon


@dataclass
class RoundState:
    """What the choice keeps of a round (the rows read so far)."""

    finished: bool = False
    newest: int = 0  # the newest signing time, µs
    currency: str | None = None
    opened: bool = False  # an opening read (its currency the round's)

    def then(self, later: RoundState) -> RoundState:
        """This round's state once the rows read into `later` (after these) are in."""
        return RoundState(
            self.finished or later.finished,
            max(self.newest, later.newest),
            later.currency if later.opened else self.currency,
            self.opened or later.opened,
        )


def log_batches(
    tables: MerkleLogTables, size: int, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, list[Row]]]:
    """(position of the first, rows) of the log's first `size` positions, a batch
    a query."""
    position, after = 0, 0
    while position < size and (rows := tables.rows_after(after, min(READ_BATCH, size - position))):
        yield position, rows
        position += len(rows)
        after = rows[-1][0]
        if progress is not None:
            progress(len(rows))


def due_rounds(states: dict[object, RoundState], horizon: int) -> dict[object, str | None]:
    """The finished rounds whose every event (of those read: `round_states`) was
    signed before `horizon` (µs): each stream id column, as stored, to the
    round's currency. A round with a signing time that does not read as one is
    not chosen (its events would not check)."""
    return {
        stream: state.currency
        for stream, state in states.items()
        if state.finished and state.newest < horizon
    }


def round_states(
    tables: MerkleLogTables,
    after_id: int,
    last_id: int,
    progress: Callable[[int], None] | None = None,
) -> dict[object, RoundState]:
    """Each round's state from its rows with ids in (after_id, last_id] (up to
    `round_rows.last_id_under` the checkpoint's size, for the whole log): the
    states of ranges read apart, `merged` in order, are those of the whole."""
    rounds: dict[object, RoundState] = {}
    for page in RoundRows(tables, (_OPENED, _SETTLED)).pages(after_id, last_id, progress):
        for _, originator_id, topic, at, state in page:
            if type(topic) is not str or not topic.startswith(ROUND_TOPIC):
                continue  # (what the query asked the database for)
            found = rounds.get(originator_id)
            if found is None:
                found = rounds[originator_id] = RoundState()
            signed_at = _signed_at(at)
            if signed_at > found.newest:
                found.newest = signed_at
            if topic == _OPENED:
                currency = _payload(state).get("currency")
                found.currency = currency if isinstance(currency, str) else None
                found.opened = True
            elif topic == _VOIDED:
                found.finished = True
            elif topic == _SETTLED:
                settled = _payload(state)
                found.finished |= settled.get("step") is None or bool(settled.get("over"))
    return rounds


def round_states_in(store: str, after_id: int, last_id: int) -> dict[object, RoundState]:
    """`round_states` on a connection of its own to the store `store` names (in a
    worker: the archive's workers read a range of the log each, while it makes
    its tiles)."""
    app = LedgerApplication(store, keyring=Keyring(), create=False)
    try:
        return round_states(app.tables, after_id, last_id)
    finally:
        app.close()


def merged(ranges: list[dict[object, RoundState]]) -> dict[object, RoundState]:
    """The states read from consecutive ranges of the log, in order, as one."""
    found: dict[object, RoundState] = {}
    for states in ranges:
        for stream, state in states.items():
            before = found.get(stream)
            found[stream] = state if before is None else before.then(state)
    return found


def _signed_at(at: object) -> int:
    """The signing time whose digits `at` starts with (µs); past every horizon
    when they are not digits followed by a comma."""
    if type(at) is not bytes:
        return NEVER
    digits = at[: at.find(b",")]
    return int(digits) if digits.isdigit() else NEVER


def _payload(state: object) -> dict[str, object]:
    if type(state) is not bytes:
        return {}
    header_end = ENVELOPE_PREFIX.size + int.from_bytes(state[4:6], "big")
    try:
        found = json.loads(state[header_end + 64 :])
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
