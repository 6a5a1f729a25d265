"""Who asked for an account's movements, in a history proof: the signed record
of each movement's request, and the `asked_by` it holds (docs/history.md,
"Who asked").

A deposit's or a withdrawal's request is recorded by its `Request.Completed`
(the stream its `request_id` names, version 1); a stake's by the
`Round.BetPlaced` of its bet, in the round's stream. A movement no request
asked for (a return, a payout, an opening, a closing) has none, and neither
has one whose record the store no longer holds (an archived round). The
checker holds each record to its movement: signed by a ledger-node key, of the
stream and type the movement names, recording that request or bet of this
account; `asked` says what its `asked_by` is (absent before the field: null).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ledger.crypto.envelope import open_envelope
from ledger.crypto.keys import Keyring
from ledger.crypto.roles import Role
from ledger.crypto.signing import verify_signature
from ledger.domain.request import request_uuid
from ledger.errors import VerificationError
from ledger.export.records import decode_payload, type_name
from ledger.history.account_events import AccountEvent

STAKE = "stake "  # an Account.Debited's reference for a bet's stake: "stake <bet id>"
COMPLETED, BET = "Request.Completed", "Round.BetPlaced"


@dataclass(frozen=True)
class RequestRecord:
    """Where a movement's request is recorded: the event of `type` in `stream`
    whose payload's `field` is `value`."""

    stream: str
    type: str
    field: str
    value: str


def record_of(event: AccountEvent) -> RequestRecord | None:
    movement = event.movement
    if movement.type in ("Account.Deposited", "Account.Withdrawn") and event.request_id:
        stream = str(request_uuid(event.request_id))
        return RequestRecord(stream, COMPLETED, "request_id", event.request_id)
    reference = movement.reference or ""
    if movement.type == "Account.Debited" and movement.round and reference.startswith(STAKE):
        return RequestRecord(movement.round, BET, "bet_id", reference.removeprefix(STAKE))
    return None


def asked_by_of(state: bytes, record: RequestRecord, account: str, keyring: Keyring) -> Any:
    """The `asked_by` of the envelope `state`, once it is the signed `record` of
    this account's request; else `VerificationError` saying why not."""
    label = f"the request record of {record.field} {record.value}"
    envelope = open_envelope(state, stream=record.stream, version="?")
    if hashlib.sha256(envelope.payload).digest() != envelope.payload_hash:
        raise VerificationError("its payload is not the one its header signs", where=label)
    key = keyring.get(envelope.key_id)
    if key is None or key.role is not Role.LEDGER_NODE:
        raise VerificationError("it is not signed by a ledger-node key", where=label)
    if not verify_signature(key.public_key, envelope.signed_message, envelope.signature):
        raise VerificationError("bad signature", where=label)
    try:
        payload = decode_payload(envelope.payload)
    except ValueError as exc:
        raise VerificationError(f"an unreadable payload ({exc})", where=label) from None
    if (
        envelope.stream != record.stream
        or type_name(envelope.event_type) != record.type
        or payload.get(record.field) != record.value
        or (record.type == BET and str(payload.get("account_id")) != account)
    ):
        raise VerificationError(
            f"it is not the {record.type} of stream {record.stream} recording it", where=label
        )
    return payload.get("asked_by")


def records_for(
    events: Iterable[AccountEvent],
    account: str,
    keyring: Keyring,
    read: Callable[[RequestRecord], bytes | None],
) -> tuple[list[bytes], list[dict[str, Any]]]:
    """The request records of `events` that `read` finds (None: not held), and
    `asked`: for each, its movement's version and who asked."""
    found: list[bytes] = []
    asked: list[dict[str, Any]] = []
    for event in events:
        record = record_of(event)
        state = None if record is None else read(record)
        if record is None or state is None:
            continue
        by = asked_by_of(state, record, account, keyring)
        found.append(state)
        asked.append({"version": event.movement.version, "asked_by": by})
    return found, asked


def check_asked(
    events: list[AccountEvent],
    account: str,
    keyring: Keyring,
    encoded: list[bytes],
    asked: object,
) -> None:
    """`asked` names movements of `events` (in order, each once), each with the
    record at its place in `encoded` and what that record says."""
    if not isinstance(asked, list) or len(asked) != len(encoded):
        raise VerificationError("the proof's asked and requests do not pair up")
    by_version = {event.movement.version: event for event in events}
    last = None
    for entry, state in zip(asked, encoded, strict=True):
        if not isinstance(entry, dict) or set(entry) != {"version", "asked_by"}:
            raise ValueError('an asked entry is not {"version", "asked_by"}')
        event = by_version.get(entry["version"])
        record = None if event is None else record_of(event)
        if event is None or record is None or (last is not None and entry["version"] >= last):
            raise VerificationError(
                f"asked names version {entry['version']!r}: not a movement of the span asked for "
                "by a request, or out of order"
            )
        last = entry["version"]
        if asked_by_of(state, record, account, keyring) != entry["asked_by"]:
            raise VerificationError(
                f"version {last}: asked_by is not what its signed request record says"
            )
