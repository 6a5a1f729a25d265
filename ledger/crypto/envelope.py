"""The signed envelope around every stored event.

Stored bytes: ``MAGIC | u16 header length | header | signature(64) | payload``.
The header is the canonical JSON of exactly the signed fields (stream id,
version, event type, hash of the previous envelope in the stream, SHA-256 of
the payload bytes, signing key id); the signature is Ed25519 over
``ENVELOPE_DOMAIN + header``.

An envelope's *entry hash* is the RFC 9162 leaf hash of its header: the same
32 bytes link the next event of the stream to it and make its leaf in the
Merkle tree over the whole log, so one hash serves both layers.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Final, NamedTuple

from ledger.crypto.canonical import ENVELOPE_DOMAIN, canonical_flat
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.merkle import hash_leaf
from ledger.crypto.signing import Signer, verify_signature
from ledger.errors import VerificationError

MAGIC: Final = b"LSE1"
GENESIS_HASH: Final = bytes(32)  # the "previous envelope" of a stream's first event
ENVELOPE_PREFIX = _PREFIX = struct.Struct(">4sH")
_SIGNATURE_SIZE = 64
_decode_header = json.JSONDecoder().decode  # str in: skips json.loads' encoding sniffing


def where(stream: object, version: int) -> str:
    return f"stream {stream} version {version}"


class Envelope(NamedTuple):
    """A parsed envelope: the signed header's fields plus the raw parts.

    A NamedTuple, not a frozen dataclass: `ledger verify` builds one per
    event, and tuple construction is several times cheaper.
    """

    header: bytes
    signature: bytes
    payload: bytes
    stream: str
    version: int
    event_type: str
    prev_hash: bytes
    payload_hash: bytes
    key_id: str

    @property
    def entry_hash(self) -> bytes:
        return hash_leaf(self.header)

    @property
    def signed_message(self) -> bytes:
        return ENVELOPE_DOMAIN + self.header


# The canonical header (RFC 8785: keys sorted, no whitespace) for values that
# need no JSON escaping, built directly: sealing and verifying do this once
# per event. `header_bytes` falls back to the general encoder otherwise, and a
# property test holds the two to each other.
_HEADER = '{"key_id":"%s","payload_sha256":"%s","prev":"%s","stream":"%s","type":"%s","version":%d}'


def is_plain(text: str) -> bool:
    """True when JSON encodes `text` as itself between quotes."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def header_bytes(
    key_id: str, payload_sha256: str, prev: str, stream: str, event_type: str, version: int
) -> bytes:
    """The canonical header bytes for these field values."""
    if is_plain(key_id) and is_plain(stream) and is_plain(event_type) and type(version) is int:
        return (_HEADER % (key_id, payload_sha256, prev, stream, event_type, version)).encode()
    return canonical_flat(
        {
            "key_id": key_id,
            "payload_sha256": payload_sha256,
            "prev": prev,
            "stream": stream,
            "type": event_type,
            "version": version,
        }
    )


def seal(
    *,
    stream: str,
    version: int,
    event_type: str,
    prev_hash: bytes,
    payload: bytes,
    signer: Signer,
) -> tuple[bytes, bytes]:
    """Return (stored bytes, entry hash) for one event."""
    header = header_bytes(
        signer.key_id,
        hashlib.sha256(payload).hexdigest(),
        prev_hash.hex(),
        stream,
        event_type,
        version,
    )
    signature = signer.sign(ENVELOPE_DOMAIN + header)
    stored = b"".join((_PREFIX.pack(MAGIC, len(header)), header, signature, payload))
    return stored, hash_leaf(header)


def open_envelope(data: bytes, *, stream: object, version: int) -> Envelope:
    """Parse stored bytes; `stream`/`version` (the row's columns) only name the event."""
    try:
        magic, header_size = _PREFIX.unpack_from(data)
        if magic != MAGIC:
            raise ValueError("not a sealed envelope (bad magic)")
        start = _PREFIX.size
        header = data[start : start + header_size]
        signature = data[start + header_size : start + header_size + _SIGNATURE_SIZE]
        if len(signature) != _SIGNATURE_SIZE:
            raise ValueError("truncated envelope")
        payload = data[start + header_size + _SIGNATURE_SIZE :]
        fields = _decode_header(header.decode())
        envelope = Envelope(
            header,
            signature,
            payload,
            fields["stream"],
            fields["version"],
            fields["type"],
            bytes.fromhex(fields["prev"]),
            bytes.fromhex(fields["payload_sha256"]),
            fields["key_id"],
        )
    except (struct.error, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise VerificationError(f"malformed envelope: {exc}", where=where(stream, version)) from exc
    if not isinstance(envelope.version, int) or len(envelope.prev_hash) != 32:
        raise VerificationError("malformed envelope header", where=where(stream, version))
    return envelope


def check_row(envelope: Envelope, *, stream: str, version: int, topic: str) -> None:
    """The integrity checks an envelope can pass alone, against its row's columns.

    Catches a flipped payload byte, a changed event type, an envelope moved to
    another stream or position. Signatures and chain links are checked by the
    caller (they need the keyring and the stream's previous event).
    """
    problem = None
    if envelope.stream != stream:
        problem = f"envelope belongs to stream {envelope.stream}, stored in another stream"
    elif envelope.version != version:
        problem = f"envelope is version {envelope.version}, stored as version {version}"
    elif envelope.event_type != topic:
        problem = f"event type is {topic!r} but the signed type is {envelope.event_type!r}"
    elif hashlib.sha256(envelope.payload).digest() != envelope.payload_hash:
        problem = "payload bytes do not match the signed payload hash"
    if problem:
        raise VerificationError(problem, where=where(stream, version))


class SignerCheck:
    """Checks an envelope's signer against the keyring (cheap) and its signature."""

    def __init__(self, keyring: Keyring) -> None:
        self._public_keys = {
            record.key_id: record.public_key
            for record in keyring
            if record.role is Role.LEDGER_NODE
        }
        self._other_roles = {r.key_id: r.role for r in keyring if r.role is not Role.LEDGER_NODE}

    def check_signer(self, envelope: Envelope, *, stream: object, version: int) -> bytes:
        """Return the signer's public key, or raise if it is not a ledger-node key."""
        public_key = self._public_keys.get(envelope.key_id)
        if public_key is None:
            role = self._other_roles.get(envelope.key_id)
            reason = (
                f"signed by a {role.value} key, not a ledger-node key"
                if role
                else f"signed by key {envelope.key_id[:16]}, which is not in the keyring"
            )
            raise VerificationError(reason, where=where(stream, version))
        return public_key

    def check_signature(self, envelope: Envelope, *, stream: object, version: int) -> None:
        public_key = self.check_signer(envelope, stream=stream, version=version)
        if not verify_signature(public_key, envelope.signed_message, envelope.signature):
            raise VerificationError("envelope signature is invalid", where=where(stream, version))
