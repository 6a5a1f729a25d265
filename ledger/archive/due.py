"""Which rounds an archive takes: finished (settled to the end, or voided), every
event of theirs signed before the horizon and under the checkpoint the
archive is verified against. A round's stream leaves whole, so no chain in
the store ever starts at an archived event; accounts, tables, seeds and the
registers stay (they carry balances and keys forward, and a player's history
walks its account's chain: docs/archive.md).

One read of the rounds' rows (`ledger.store.round_rows`: the database passes
over every other row, and hands the whole envelope only of a round's opening
and settlements), keeping a few fields per round (not per event): memory
grows with the rounds, not with the log. What it reads is not trusted: it
chooses the rounds to try, and every event of theirs is checked as the
archive is written."""

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
    last_id: int,
    progress: Callable[[int], None] | None = None,
) -> dict[object, str | None]:
    """The finished rounds whose every event, all among the rows up to `last_id`
    (`round_rows.last_id_under` the checkpoint's size), was signed before
    `horizon` (µs): each stream id column, as stored, to the round's currency.
    A round with a signing time that does not read as one is not chosen (its
    events would not check)."""
    rounds: dict[object, _Round] = {}
    for page in RoundRows(tables, (_OPENED, _SETTLED)).pages(last_id, progress):
        for _, originator_id, topic, at, state in page:
            if type(topic) is not str or not topic.startswith(ROUND_TOPIC):
                continue  # (what the query asked the database for)
            found = rounds.get(originator_id)
            if found is None:
                found = rounds[originator_id] = _Round()
            signed_at = _signed_at(at)
            if signed_at > found.newest:
                found.newest = signed_at
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


def rounds_due_in(store: str, horizon: int, last_id: int) -> dict[object, str | None]:
    """`rounds_due` on a connection of its own to the store `store` names (in a
    worker: the archive makes its tiles meanwhile)."""
    app = LedgerApplication(store, keyring=Keyring(), create=False)
    try:
        return rounds_due(app.tables, horizon, last_id)
    finally:
        app.close()


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
