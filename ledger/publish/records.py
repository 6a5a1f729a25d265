"""The messages a publisher sends: each event of the log after a position, in
log order, as the export bundle's event record (docs/export.md) with the
names a broker routes and de-duplicates by. An archived event's place is
skipped (its event is in an archive: `ledger.archive`), as the HTTP feed
skips it; each message names the position of the one before it, so a
consumer sees a gap that is an archive's and tells it from a lost message."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from ledger.errors import ConfigError
from ledger.export.currencies import StreamCurrencies
from ledger.export.records import event_line_of, type_name
from ledger.store.merkle_log import MerkleLogTables, stream_of

READ_BATCH: Final = 1000
_NOT_IN_SUBJECT = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class Message:
    position: int
    previous: int | None  # the position of the message before it (None: the first)
    type: str  # the event type's stable name, e.g. Round.BetPlaced
    body: bytes  # the event record: one line of JSON, no newline


def subject_token(type_name: str) -> str:
    """An event type as subject tokens a broker routes by (`Round.BetPlaced`
    stays two tokens; anything a subject cannot hold becomes `_`)."""
    return _NOT_IN_SUBJECT.sub("_", type_name).strip(".") or "_"


class LogMessages:
    """The log read after a position, a batch at a time."""

    def __init__(self, tables: MerkleLogTables) -> None:
        self._tables = tables
        self._currencies = StreamCurrencies(tables)
        self._subjects: dict[str, str] = {}  # signed type -> its subject tokens

    def start_id(self, after: int | None) -> int:
        """The row id of log position `after` (0: from the start)."""
        if after is None:
            return 0
        found = self._tables.id_at_offset(after)
        if found is None:
            size, _ = self._tables.event_count()
            raise ConfigError(
                f"the broker holds position {after}, past this log's end ({size} events): "
                "it holds another ledger's log, or this store went back in time"
            )
        return found

    def batch(
        self, after_id: int, position: int, previous: int | None
    ) -> tuple[list[Message], int, int]:
        """The messages of the rows after row id `after_id` (whose next position is
        `position`; the last message sent was at `previous`), at most
        `READ_BATCH` rows read; the id of the last row read (`after_id` when
        there was none) and how many rows were read."""
        rows = self._tables.rows_after(after_id, READ_BATCH)
        messages: list[Message] = []
        for offset, (_, originator_id, version, topic, state) in enumerate(rows):
            if topic is None:  # an archived event's place
                continue
            at = position + offset
            state = bytes(state)
            stream = stream_of(originator_id)
            currency = self._currencies.of_state(stream, version, state)
            line, _, _, signed_type = event_line_of(at, state, currency)
            body = line.rstrip("\n").encode()
            subject = self._subjects.get(signed_type)
            if subject is None:
                subject = self._subjects[signed_type] = subject_token(type_name(signed_type))
            messages.append(Message(at, previous, subject, body))
            previous = at
        return messages, (rows[-1][0] if rows else after_id), len(rows)
