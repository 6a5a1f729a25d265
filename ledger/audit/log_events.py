"""The events of a log's rows, decoded: what the settlement level reads.

Read once per chunk by the process running the settlement pass, as each chunk
is merged (decoding them in the workers instead was measured slower: the
decoded events cost more to send between processes than to decode).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    JSONTranscoder,
    Transcoder,
    UUIDAsHex,
)

from ledger.crypto.envelope import open_envelope
from ledger.errors import VerificationError
from ledger.store.merkle_log import stream_of
from ledger.store.recorders import Row

# (log position, stream, version, topic, payload, signing time µs or None for v1) of one event.
Event = tuple[int, str, int, str, dict[str, Any], int | None]


def ledger_transcoder() -> JSONTranscoder:
    """The payload transcoder a ledger store uses (eventsourcing's defaults)."""
    transcoder = JSONTranscoder()
    for transcoding in (UUIDAsHex(), DecimalAsStr(), DatetimeAsISO()):
        transcoder.register(transcoding)
    return transcoder


def events_of_rows(rows: list[Row], position: int, transcoder: Transcoder) -> Iterator[Event]:
    """The events of consecutive rows, the first at log position `position`. A
    row that cannot be read as an event is passed over (its envelope check
    made it a finding)."""
    for _, originator_id, version, topic, state in rows:
        try:
            stream = stream_of(originator_id)
            envelope = open_envelope(bytes(state), stream=stream, version=version)
            payload = transcoder.decode(envelope.payload)
        except (VerificationError, TypeError, ValueError, AttributeError):
            position += 1
            continue
        yield position, stream, version, topic, payload, envelope.signed_at
        position += 1
