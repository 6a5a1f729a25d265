"""The envelope formats: v2 (signing time) written, v1 (release 0.1) read, and
every malformed header a clear `VerificationError`, never another exception."""

from __future__ import annotations

import json
import struct

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.crypto.canonical import ENVELOPE_DOMAIN, ENVELOPE_DOMAIN_V1
from ledger.crypto.envelope import (
    ENVELOPE_PREFIX,
    MAGIC,
    MAGIC_V1,
    SIGNED_AT_OFFSET,
    open_envelope,
    seal,
)
from ledger.crypto.keys import Role
from ledger.crypto.signing import InMemorySigner, verify_signature
from ledger.errors import VerificationError

SIGNER = InMemorySigner(Ed25519PrivateKey.generate(), Role.LEDGER_NODE)
STREAM = "0b5e4d9a-5d8e-4f5c-9d57-8b3b1c0c2a11"
FIELDS: dict[str, object] = {
    "key_id": SIGNER.key_id,
    "payload_sha256": "ab" * 32,
    "prev": "00" * 32,
    "signed_at": 1_767_225_600_000_001,
    "stream": STREAM,
    "type": "ledger.domain.table:Table.Opened",
    "version": 1,
}


def stored(header: bytes, magic: bytes = MAGIC) -> bytes:
    return ENVELOPE_PREFIX.pack(magic, len(header)) + header + bytes(64) + b"{}"


def raw(fields: dict[str, object]) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def test_v2_envelope_carries_its_signing_time_at_the_fixed_offset() -> None:
    data, entry_hash = seal(
        stream=STREAM,
        version=1,
        event_type="ledger.domain.table:Table.Opened",
        prev_hash=bytes(32),
        payload=b"{}",
        signer=SIGNER,
        signed_at=1_767_225_600_000_001,
    )
    assert data.startswith(MAGIC)
    envelope = open_envelope(data, stream=STREAM, version=1)
    assert envelope.signed_at == 1_767_225_600_000_001
    assert envelope.header[SIGNED_AT_OFFSET:].startswith(b"1767225600000001,")
    assert envelope.signed_message == ENVELOPE_DOMAIN + envelope.header
    assert verify_signature(SIGNER.public_key, envelope.signed_message, envelope.signature)
    assert envelope.entry_hash == entry_hash


def test_v1_envelope_opens_without_a_signing_time() -> None:
    fields = {k: v for k, v in FIELDS.items() if k != "signed_at"}
    header = raw(fields)
    envelope = open_envelope(stored(header, MAGIC_V1), stream=STREAM, version=1)
    assert envelope.signed_at is None
    assert envelope.signed_message == ENVELOPE_DOMAIN_V1 + header


BAD_HEADERS: dict[str, tuple[bytes, bytes, str]] = {
    "not json": (b"{not json", MAGIC, "header is not JSON"),
    "not utf-8": (b"\xff\xfe", MAGIC, "header is not JSON"),
    "a list": (b"[1,2]", MAGIC, "not a JSON object"),
    "v2 without signed_at": (
        raw({k: v for k, v in FIELDS.items() if k != "signed_at"}),
        MAGIC,
        "wrong for format v2: signed_at",
    ),
    "v1 with signed_at": (raw(FIELDS), MAGIC_V1, "wrong for format v1: signed_at"),
    "extra field": (raw(FIELDS | {"zz": 1}), MAGIC, "wrong for format v2: zz"),
    "version a string": (raw(FIELDS | {"version": "1"}), MAGIC, "version is not an integer"),
    "version a float": (raw(FIELDS | {"version": 1.0}), MAGIC, "version is not an integer"),
    "version true": (raw(FIELDS | {"version": True}), MAGIC, "version is not an integer"),
    "huge version": (raw(FIELDS | {"version": 10**30}), MAGIC, "version is out of range"),
    "negative time": (raw(FIELDS | {"signed_at": -1}), MAGIC, "signed_at is out of range"),
    "time a string": (raw(FIELDS | {"signed_at": "now"}), MAGIC, "signed_at is not an integer"),
    "stream a number": (raw(FIELDS | {"stream": 7}), MAGIC, "stream is not a string"),
    "short prev": (raw(FIELDS | {"prev": "00"}), MAGIC, "prev is not 64 hex digits"),
    "upper-case key id": (
        raw(FIELDS | {"key_id": SIGNER.key_id.upper()}),
        MAGIC,
        "key_id is not 64 hex digits",
    ),
    "whitespace": (raw(FIELDS).replace(b",", b", "), MAGIC, "not in canonical form"),
    "leading zero time": (
        raw(FIELDS).replace(b'"signed_at":1', b'"signed_at":01'),
        MAGIC,
        "header is not JSON",
    ),
}


@pytest.mark.parametrize("case", list(BAD_HEADERS))
def test_malformed_headers_are_verification_errors(case: str) -> None:
    header, magic, message = BAD_HEADERS[case]
    with pytest.raises(VerificationError, match=message) as caught:
        open_envelope(stored(header, magic), stream=STREAM, version=1)
    assert f"stream {STREAM} version 1" in str(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "truncated prefix"),
        (b"LSE2\x00", "truncated prefix"),
        (b"XXXX\x00\x02{}", "bad magic"),
        (struct.pack(">4sH", MAGIC, 500) + b"{}", "truncated envelope"),
        (stored(raw(FIELDS))[:-70], "truncated envelope"),
    ],
)
def test_truncated_or_foreign_bytes_are_verification_errors(data: bytes, message: str) -> None:
    with pytest.raises(VerificationError, match=message):
        open_envelope(data, stream=STREAM, version=1)


def test_state_that_is_not_bytes_is_a_verification_error() -> None:
    with pytest.raises(VerificationError, match="stored state is not bytes"):
        open_envelope("text", stream=STREAM, version=1)  # type: ignore[arg-type]
