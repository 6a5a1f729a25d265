"""A stream of a fixed id read event by event, as verify reads the registers
it trusts before the log (the audit trail's recorded runs, the erasure
register): each event's row by an indexed lookup, never a scan, its envelope
against the row, the node's signature and the chain checked before its
payload is looked at."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ledger.audit.log.log_rows import LogRows
from ledger.crypto.envelope import (
    GENESIS_HASH,
    Envelope,
    SignerCheck,
    check_row,
    open_envelope,
    where,
)
from ledger.errors import VerificationError


@dataclass(frozen=True)
class StreamEvent:
    stream: str
    position: int  # log position
    version: int
    topic: str
    envelope: Envelope

    @property
    def label(self) -> str:
        return where(self.stream, self.version)


def stream_events(tables: LogRows, stream: str, signer_check: SignerCheck) -> Iterator[StreamEvent]:
    """The stream's events in order, each checked; a bad one raises
    `VerificationError` with its log position (what follows a broken link
    cannot be told apart, so the caller reads no further)."""
    previous, version = GENESIS_HASH, 1
    while (row := tables.row_by_stream(stream, version)) is not None:
        notification_id, _, _, topic, state = row
        position = tables.position_of(notification_id)
        try:
            envelope = open_envelope(bytes(state), stream=stream, version=version)
            check_row(envelope, stream=stream, version=version, topic=topic)
            signer_check.check_signature(envelope, stream=stream, version=version)
            if envelope.prev_hash != previous:
                raise VerificationError("chain broken", where=where(stream, version))
        except VerificationError as exc:
            exc.position = position
            raise
        yield StreamEvent(stream, position, version, topic, envelope)
        previous, version = envelope.entry_hash, version + 1
