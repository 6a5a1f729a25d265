"""The events of a log's rows, decoded: what the settlement level reads.

Read once per chunk by the process running the settlement pass, as each chunk
is merged (decoding them in the workers instead was measured slower: the
decoded events cost more to send between processes than to decode).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    JSONTranscoder,
    Transcoder,
    UUIDAsHex,
)

from ledger.crypto.envelope import ENVELOPE_PREFIX, MAGIC, SIGNED_AT_OFFSET, open_envelope
from ledger.errors import VerificationError
from ledger.store.merkle_log import MerkleLogTables, stream_of
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


def verified_events(
    rows: list[Row], position: int, transcoder: Transcoder, found: set[int]
) -> Iterator[Event]:
    """The events of rows a chunk has just verified, byte for byte these rows
    (the caller compared their digest with the one the chunk took), read
    without checking again what the chunk checked: the payload after the
    signature, the signing time's digits at their fixed offset, each stream's
    name once per chunk. A row the chunk made a finding of, or a release 0.1
    envelope, is read as `events_of_rows` reads it."""
    decode = transcoder.decode
    prefix, at = ENVELOPE_PREFIX.size, ENVELOPE_PREFIX.size + SIGNED_AT_OFFSET
    streams: dict[object, str] = {}
    for row in rows:
        _, originator_id, version, topic, state = row
        if position in found or state[:4] != MAGIC:
            yield from events_of_rows([row], position, transcoder)
            position += 1
            continue
        stream = streams.get(originator_id)
        if stream is None:
            stream = streams[originator_id] = stream_of(originator_id)
        payload_at = prefix + int.from_bytes(state[4:prefix], "big") + 64
        try:
            payload = decode(state[payload_at:])
        except (TypeError, ValueError, AttributeError):
            position += 1  # (a payload that is not JSON: the rules steps say so)
            continue
        signed_at = int(state[at : state.index(b",", at)])
        yield position, stream, version, topic, payload, signed_at
        position += 1


READ_BATCH = 5000  # rows a query when reading the whole log in order


def events(
    tables: MerkleLogTables,
    transcoder: Transcoder,
    progress: Callable[[int], None] | None,
    start: tuple[int, int] = (0, 0),
) -> Iterator[Event]:
    """Every event of a store from `start` (log position, the row id before it),
    in log order. A row that cannot be read as an event is passed over (its
    envelope check already made it a finding)."""
    position, after = start
    while rows := tables.rows_after(after, READ_BATCH):
        if progress:
            progress(len(rows))
        yield from events_of_rows(rows, position, transcoder)
        position += len(rows)
        after = rows[-1][0]
