"""A history proof checked with the public keyring alone (docs/history.md, "Checking
a proof", is the same list for outside programs).

1. The checkpoint: a C2SP note the log's checkpoint key signed, with an
   `accounts` line (the account heads map's root).
2. The head: its leaf and the map proof lead to that root, so it is the
   account's newest event in the checkpoint's tree (not a stale one).
3. The events: the first is the head (its entry hash), each next one the
   event its predecessor's `prev` names, all of the account's stream, each
   payload the one its header signs, each header signed by a ledger-node key.
4. The span: the events are exactly what the span's rule takes from the head
   back (its boundary included), or reach the account's first event.
5. The summary (movements, rounds) is what those events say.
6. Who asked (format v2): each request record is signed by a ledger-node key
   and records the request or bet of the movement `asked` pairs it with, and
   says the `asked_by` given there (`ledger.history.requests`). A v1 proof
   (made before) has neither.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.heads_map import account_key, head_leaf, root_from_proof
from ledger.crypto.keys import Keyring
from ledger.crypto.roles import Role
from ledger.crypto.signing import verify_signature
from ledger.errors import VerificationError
from ledger.history.account_events import AccountEvent, read_account_event
from ledger.history.proof import FORMAT
from ledger.history.requests import check_asked
from ledger.history.span import Movement, Span, rounds_of, walk

_FIELDS = ("format", "account", "span", "checkpoint", "head", "map_proof", "events")
_SUMMARY = ("movements", "rounds")
_ASKED = ("requests", "asked")  # format v2
FORMAT_V1 = "casino-ledger/account-history/v1"


@dataclass(frozen=True)
class CheckedHistory:
    account: UUID
    span: Span
    checkpoint: Checkpoint
    movements: list[Movement]
    rounds: list[dict[str, Any]]
    whole: bool  # the span reached the account's first event
    asked: dict[int, Any]  # movement version -> who asked, where a record says (v2)


def check_history(proof: object, keyring: Keyring) -> CheckedHistory:
    """Every step above, else `VerificationError` naming the first that fails
    (`ValueError`: not a history proof at all)."""
    v2 = isinstance(proof, dict) and proof.get("format") == FORMAT
    fields = _FIELDS + _SUMMARY + (_ASKED if v2 else ())
    if not isinstance(proof, dict) or set(proof) != set(fields):
        raise ValueError(f"a history proof is a JSON object of exactly {', '.join(fields)}")
    if proof["format"] not in (FORMAT, FORMAT_V1):
        raise ValueError(f"not a {FORMAT} (or v1) proof")
    account = UUID(str(proof["account"]))
    span = Span.from_json(proof["span"])
    checkpoint = Checkpoint.from_note(proof["checkpoint"])
    checkpoint.verify(keyring)
    if checkpoint.accounts is None:
        raise VerificationError("the checkpoint signs no account heads map")
    version, position, entry = _head(proof["head"])
    siblings = [_hex32(s, "a map proof hash") for s in _list(proof["map_proof"], "map_proof")]
    leaf = head_leaf(account_key(account), version, position, entry)
    if root_from_proof(account_key(account), leaf, siblings) != checkpoint.accounts:
        raise VerificationError(
            f"the head (version {version}) is not the one the checkpoint of size "
            f"{checkpoint.size} holds for account {account}: a stale or forged head"
        )
    if position >= checkpoint.size:
        raise VerificationError("the head lies outside the checkpoint's tree")
    events = _chain(account, version, entry, _list(proof["events"], "events"), keyring)
    taken = list(walk(span, (event.movement for event in events)))
    if len(taken) != len(events):
        raise VerificationError(
            f"the proof holds {len(events)} events, the span takes {len(taken)}: "
            "events beyond the span's boundary"
        )
    whole = not taken or not taken[-1][1]
    if whole and events[-1].movement.version != 1:
        raise VerificationError(
            f"the events stop at version {events[-1].movement.version}, before the span's "
            "boundary and the account's first event: events are missing"
        )
    movements = [movement for movement, boundary in taken if not boundary]
    rounds = rounds_of(movements)
    if proof["movements"] != [m.to_json() for m in movements] or proof["rounds"] != rounds:
        raise VerificationError("the proof's movements or rounds are not what its events say")
    asked: dict[int, Any] = {}
    if v2:
        records = [_base64(text) for text in _list(proof["requests"], "requests")]
        spanned = events[: len(movements)]
        check_asked(spanned, str(account), keyring, records, proof["asked"])
        asked = {entry["version"]: entry["asked_by"] for entry in proof["asked"]}
    return CheckedHistory(account, span, checkpoint, movements, rounds, whole, asked)


def _chain(
    account: UUID, version: int, entry: bytes, encoded: list[object], keyring: Keyring
) -> list[AccountEvent]:
    stream, expected, events = str(account), entry, []
    if not encoded:
        raise VerificationError("the proof holds no event: not even the head")
    if len(encoded) > version:
        raise VerificationError("the proof holds more events than the account's versions")
    for offset, text in enumerate(encoded):
        state = _base64(text)
        event = read_account_event(state, stream, version - offset)
        if event.envelope.entry_hash != expected:
            what = "the head" if offset == 0 else f"version {version - offset + 1}'s prev"
            raise VerificationError(
                f"account {stream} version {version - offset} is not the event {what} names: "
                "an event was removed, added or altered"
            )
        _check_signature(event, keyring)
        expected = event.envelope.prev_hash
        events.append(event)
    return events


def _check_signature(event: AccountEvent, keyring: Keyring) -> None:
    envelope = event.envelope
    record = keyring.get(envelope.key_id)
    if record is None or record.role is not Role.LEDGER_NODE:
        raise VerificationError(
            f"version {envelope.version} is signed by key {envelope.key_id[:16]}, "
            "not a ledger-node key of the keyring"
        )
    if not verify_signature(record.public_key, envelope.signed_message, envelope.signature):
        raise VerificationError(f"version {envelope.version}: bad signature")


def _head(data: object) -> tuple[int, int, bytes]:
    if not isinstance(data, dict) or set(data) != {"version", "position", "entry_hash"}:
        raise ValueError("the head is not {version, position, entry_hash}")
    version, position = data["version"], data["position"]
    if type(version) is not int or type(position) is not int or version < 1 or position < 0:
        raise ValueError("the head's version and position are not whole numbers")
    return version, position, _hex32(data["entry_hash"], "the head's entry hash")


def _list(value: object, name: str) -> list[object]:
    if not isinstance(value, list):
        raise ValueError(f"{name} is not a list")
    return value


def _hex32(value: object, what: str) -> bytes:
    try:
        digest = bytes.fromhex(value) if isinstance(value, str) else b""
    except ValueError:
        digest = b""
    if len(digest) != 32 or value != digest.hex():
        raise ValueError(f"{what} is not 64 lowercase hex digits")
    return digest


def _base64(value: object) -> bytes:
    try:
        if isinstance(value, str):
            return base64.b64decode(value, validate=True)
    except binascii.Error:
        pass
    raise ValueError("an event is not base64")
