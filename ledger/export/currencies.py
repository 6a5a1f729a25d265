"""The currency each event's record names: its stream's, from the stream's
opening event (read once per stream, from the store when the opening event
came before the reader started)."""

from __future__ import annotations

from typing import Any, Final

from ledger.export.records import decode_payload, opening_currency, split_envelope, stream_currency
from ledger.store.merkle_log import MerkleLogTables

_KNOWN_MAX: Final = 100_000  # streams remembered; past that, forgotten and read again


class StreamCurrencies:
    """The currency of each stream, from its opening event (read once per stream)."""

    def __init__(self, tables: MerkleLogTables) -> None:
        self._tables = tables
        self._known: dict[str, str | None] = {}

    def of_state(self, stream: str, version: int, state: bytes) -> str | None:
        """`of`, from the event's stored bytes (its payload decoded only when it
        opens its stream)."""
        if version == 1:
            if len(self._known) > _KNOWN_MAX:  # a long follow: memory stays bounded
                self._known.clear()
            try:
                self._known[stream] = opening_currency(state)
            except ValueError:  # not an envelope: the record's own reading says why
                self._known[stream] = None
            return self._known[stream]
        return self.of(stream, version, {})

    def of(self, stream: str, version: int, payload: dict[str, Any]) -> str | None:
        if version == 1:
            self._known[stream] = stream_currency(payload)
        elif stream not in self._known:
            row = self._tables.row_by_stream(stream, 1)
            try:
                opening = None if row is None else decode_payload(split_envelope(bytes(row[4]))[3])
            except ValueError:
                opening = None
            self._known[stream] = None if opening is None else stream_currency(opening)
        return self._known[stream]
