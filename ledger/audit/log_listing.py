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

from ledger.audit.significant import log_envelopes, signed_time
from ledger.crypto.envelope import SignerCheck
from ledger.store.application import LedgerApplication


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
    for position, stream, version, _, envelope in log_envelopes(app, progress):
        signer_check.check_signature(envelope, stream=stream, version=version)
        v1 = envelope.signed_at is None  # its time is in its payload
        at = signed_time(envelope, transcoder.decode(envelope.payload) if v1 else None)
        if since is None or at >= since:
            kind = envelope.event_type.partition(":")[2] or envelope.event_type
            yield LoggedEvent(position, at, kind, stream, version)
