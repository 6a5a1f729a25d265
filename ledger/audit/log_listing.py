"""`ledger events`: every event of the log, in log order, as its signed
envelope names it (position, signing time, type, stream, version).

One streaming pass, memory flat in the log's size. What is shown comes from
the signed header, never from a stored column alone: every row is checked
against its header (type, stream, version, payload hash) and every envelope's
signature against the keyring, so a relabelled, edited or forged row stops
the listing with a `VerificationError` naming it. Not checked: chains, the
Merkle tree, checkpoints, actor signatures (`ledger verify` checks them).
`ledger events --significant` lists only the events an auditor reviews first
(`ledger.audit.significant`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.audit.significant import READ_BATCH, signed_time
from ledger.crypto.envelope import SignerCheck, check_row, open_envelope
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import stream_of


@dataclass(frozen=True)
class LoggedEvent:
    position: int  # log position (the Merkle log's leaf order)
    at: datetime  # when it was signed (UTC)
    type: str  # the event type, e.g. Round.BetPlaced
    stream: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "at": self.at.isoformat(),
            "type": self.type,
            "stream": self.stream,
            "version": self.version,
        }


def scan_log(
    app: LedgerApplication,
    *,
    since: datetime | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[LoggedEvent]:
    """Every event signed at or after `since`, in log order; `progress(n)`
    after each batch of n rows read."""
    signer_check = SignerCheck(app.current_keyring())
    transcoder = app.mapper.transcoder
    tables = app.tables
    position, after = 0, 0
    while rows := tables.rows_after(after, READ_BATCH):
        for _, originator_id, version, topic, state in rows:
            stream = stream_of(originator_id)
            envelope = open_envelope(bytes(state), stream=stream, version=version)
            check_row(envelope, stream=stream, version=version, topic=topic)
            signer_check.check_signature(envelope, stream=stream, version=version)
            v1 = envelope.signed_at is None  # its time is in its payload
            at = signed_time(envelope, transcoder.decode(envelope.payload) if v1 else None)
            if since is None or at >= since:
                kind = envelope.event_type.partition(":")[2] or envelope.event_type
                yield LoggedEvent(position, at, kind, stream, version)
            position += 1
        after = rows[-1][0]
        if progress:
            progress(len(rows))
