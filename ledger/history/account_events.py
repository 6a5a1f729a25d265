"""An account event's envelope, read for a history: its header checked, its
payload's hash held to the header, the movement it records."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

from ledger.crypto.envelope import Envelope, open_envelope
from ledger.errors import VerificationError
from ledger.export.records import decode_payload, type_name
from ledger.history.span import Movement


@dataclass(frozen=True)
class AccountEvent:
    state: bytes  # the envelope, as stored
    envelope: Envelope
    movement: Movement
    request_id: str | None = None  # a deposit's or withdrawal's request (`ledger.history.requests`)


def read_account_event(state: bytes, account: str, version: int) -> AccountEvent:
    """The event at `version` of `account`'s stream, from its envelope bytes,
    else `VerificationError` saying what is wrong."""
    envelope = open_envelope(state, stream=account, version=version)
    label = f"account {account} version {version}"
    if envelope.stream != account:
        raise VerificationError(
            f"the event here is of stream {envelope.stream}, not this account's", where=label
        )
    if envelope.version != version:
        raise VerificationError(
            f"the event here is version {envelope.version}: an event was removed, added or moved",
            where=label,
        )
    if hashlib.sha256(envelope.payload).digest() != envelope.payload_hash:
        raise VerificationError("the payload is not the one its header signs", where=label)
    kind = type_name(envelope.event_type)
    if not kind.startswith("Account."):
        raise VerificationError(f"a {kind} event in an account's stream", where=label)
    try:
        payload = decode_payload(envelope.payload)
        at = datetime.fromisoformat(payload["timestamp"])
        amount, round_id = payload.get("amount"), payload.get("round_id")
        reference = payload.get("reference")
        request_id = payload.get("request_id")
    except (ValueError, KeyError, TypeError) as exc:
        raise VerificationError(f"an unreadable payload ({exc})", where=label) from None
    if at.tzinfo is None or not (amount is None or type(amount) is int):
        raise VerificationError("a payload with a malformed time or amount", where=label)
    movement = Movement(
        version,
        kind,
        at,
        amount,
        None if round_id is None else str(round_id),
        None if reference is None else str(reference),
    )
    return AccountEvent(
        state, envelope, movement, request_id if isinstance(request_id, str) else None
    )
