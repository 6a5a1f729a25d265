"""The signed envelope around every stored event.

Stored bytes: ``MAGIC | u16 header length | header | signature(64) | payload``.
The header is the canonical JSON (RFC 8785) of exactly the signed fields; the
signature is Ed25519 over ``domain + header``.

Format versions (the magic says which; both open, only v2 is written):

- **v2** (``LSE2``, domain ``casino-ledger/event-envelope/v2``): fields
  ``key_id``, ``payload_sha256``, ``prev``, ``signed_at``, ``stream``, ``type``,
  ``version``. ``signed_at`` is the signing time in integer microseconds since
  the Unix epoch, UTC (exact in JSON below 2^53). Keys sort in that order and
  the first three values are 64 hex characters each, so ``signed_at`` always
  starts at byte `SIGNED_AT_OFFSET` of the header: the verifier's fast path
  reads it there without parsing JSON.
- **v1** (``LSE1``, domain ``casino-ledger/event-envelope/v1``, release 0.1):
  the same fields without ``signed_at``. An old envelope carries no signing
  time: `ledger verify` judges it by the time of the first checkpoint that
  covers it, and fails one that no checkpoint covers.

A header must hold exactly its version's fields, with the right JSON types,
in canonical form: anything else is a malformed envelope.

An envelope's *entry hash* is the RFC 9162 leaf hash of its header: the same
32 bytes link the next event of the stream to it and make its leaf in the
Merkle tree over the whole log, so one hash serves both layers.
"""

from __future__ import annotations

import hashlib
import json
import struct
import time
from typing import Final, NamedTuple

from ledger.crypto.canonical import ENVELOPE_DOMAIN, ENVELOPE_DOMAIN_V1, canonical_flat
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.merkle import hash_leaf
from ledger.crypto.signing import Signer, verify_signature
from ledger.crypto.validity import signing_problem
from ledger.errors import VerificationError, with_article

MAGIC: Final = b"LSE2"
MAGIC_V1: Final = b"LSE1"  # release 0.1: no signing time; read, never written
GENESIS_HASH: Final = bytes(32)  # the "previous envelope" of a stream's first event
ENVELOPE_PREFIX = _PREFIX = struct.Struct(">4sH")
_SIGNATURE_SIZE = 64
_decode_header = json.JSONDecoder().decode  # str in: skips json.loads' encoding sniffing
# '{"key_id":"' + 64 + '","payload_sha256":"' + 64 + '","prev":"' + 64 + '","signed_at":'
PREV_OFFSET: Final = 11 + 64 + 20 + 64 + 10  # where a v2 header's "prev" hex starts
SIGNED_AT_OFFSET: Final = PREV_OFFSET + 64 + 14
_V2_FIELDS = frozenset(
    ("key_id", "payload_sha256", "prev", "signed_at", "stream", "type", "version")
)
_V1_FIELDS = _V2_FIELDS - {"signed_at"}
_HEX = frozenset("0123456789abcdef")
JSON_SAFE_INT: Final = 1 << 53  # RFC 8785 integers are exact below this


def now_micros() -> int:
    """The signing clock: integer microseconds since the Unix epoch, UTC."""
    return time.time_ns() // 1000


def where(stream: object, version: object) -> str:
    return f"stream {stream} version {version}"


class Envelope(NamedTuple):
    """A parsed envelope: the signed header's fields plus the raw parts.

    A NamedTuple, not a frozen dataclass: `ledger verify` builds one per
    event, and tuple construction is several times cheaper. `signed_at` is
    None for a v1 envelope (it carries no signing time).
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
    signed_at: int | None

    @property
    def entry_hash(self) -> bytes:
        return hash_leaf(self.header)

    @property
    def signed_message(self) -> bytes:
        domain = ENVELOPE_DOMAIN_V1 if self.signed_at is None else ENVELOPE_DOMAIN
        return domain + self.header


# The canonical header (RFC 8785: keys sorted, no whitespace) for values that
# need no JSON escaping, built directly: sealing and verifying do this once
# per event. `header_bytes` falls back to the general encoder otherwise, and a
# property test holds the two to each other.
_HEADER = (
    '{"key_id":"%s","payload_sha256":"%s","prev":"%s","signed_at":%d,'
    '"stream":"%s","type":"%s","version":%d}'
)
_HEADER_V1 = (
    '{"key_id":"%s","payload_sha256":"%s","prev":"%s","stream":"%s","type":"%s","version":%d}'
)
PLAIN_HEADER: Final = _HEADER  # for values `is_plain` accepts: the verifier's fast path


def is_plain(text: str) -> bool:
    """True when JSON encodes `text` as itself between quotes."""
    return text.isascii() and text.isprintable() and '"' not in text and "\\" not in text


def header_bytes(
    key_id: str,
    payload_sha256: str,
    prev: str,
    signed_at: int | None,
    stream: str,
    event_type: str,
    version: int,
) -> bytes:
    """The canonical header bytes for these field values (v1 when `signed_at` is None)."""
    plain = is_plain(key_id) and is_plain(stream) and is_plain(event_type) and type(version) is int
    if signed_at is None:
        if plain:
            return (
                _HEADER_V1 % (key_id, payload_sha256, prev, stream, event_type, version)
            ).encode()
        fields: dict[str, str | int] = {}
    else:
        if plain and type(signed_at) is int:
            return (
                _HEADER % (key_id, payload_sha256, prev, signed_at, stream, event_type, version)
            ).encode()
        fields = {"signed_at": signed_at}
    fields |= {
        "key_id": key_id,
        "payload_sha256": payload_sha256,
        "prev": prev,
        "stream": stream,
        "type": event_type,
        "version": version,
    }
    return canonical_flat(fields)


def seal(
    *,
    stream: str,
    version: int,
    event_type: str,
    prev_hash: bytes,
    payload: bytes,
    signer: Signer,
    signed_at: int,
) -> tuple[bytes, bytes]:
    """Return (stored bytes, entry hash) for one event, as a v2 envelope.

    `signed_at` comes from the caller's clock (`now_micros` in production), so
    tests can sign at chosen times."""
    header = envelope_header(
        stream=stream,
        version=version,
        event_type=event_type,
        prev_hash=prev_hash,
        payload=payload,
        key_id=signer.key_id,
        signed_at=signed_at,
    )
    return assemble(header, signer.sign(ENVELOPE_DOMAIN + header), payload), hash_leaf(header)


def envelope_header(
    *,
    stream: str,
    version: int,
    event_type: str,
    prev_hash: bytes,
    payload: bytes,
    key_id: str,
    signed_at: int,
) -> bytes:
    """The v2 header `seal` signs (its leaf hash is the entry hash)."""
    return header_bytes(
        key_id,
        hashlib.sha256(payload).hexdigest(),
        prev_hash.hex(),
        signed_at,
        stream,
        event_type,
        version,
    )


def assemble(header: bytes, signature: bytes, payload: bytes) -> bytes:
    """The stored bytes of a v2 envelope."""
    return b"".join((_PREFIX.pack(MAGIC, len(header)), header, signature, payload))


def _is_hex64(value: object) -> bool:
    return type(value) is str and len(value) == 64 and _HEX.issuperset(value)


def _header_problem(fields: object, v2: bool) -> str | None:
    """What is wrong with a parsed header's fields, or None."""
    if type(fields) is not dict:
        return "header is not a JSON object"
    expected = _V2_FIELDS if v2 else _V1_FIELDS
    if fields.keys() != expected:
        odd = sorted(fields.keys() ^ expected)
        return f"header fields are wrong for format {'v2' if v2 else 'v1'}: {', '.join(odd)}"
    for name in ("key_id", "payload_sha256", "prev"):
        if not _is_hex64(fields[name]):
            return f"header field {name} is not 64 hex digits"
    for name in ("stream", "type"):
        if type(fields[name]) is not str:
            return f"header field {name} is not a string"
    for name in ("version", "signed_at") if v2 else ("version",):
        if type(fields[name]) is not int:
            return f"header field {name} is not an integer"
        if not 0 <= fields[name] < JSON_SAFE_INT:
            return f"header field {name} is out of range"
    return None


def open_envelope(data: bytes, *, stream: object, version: object) -> Envelope:
    """Parse stored bytes; `stream`/`version` (the row's columns) only name the event.

    Every way the bytes can be wrong is a `VerificationError`: a truncated
    envelope, a header that is not JSON, missing, extra or mistyped fields,
    a header not in canonical form."""
    label = where(stream, version)
    if type(data) is not bytes:
        raise VerificationError("stored state is not bytes", where=label)
    try:
        magic, header_size = _PREFIX.unpack_from(data)
    except struct.error:
        raise VerificationError("malformed envelope: truncated prefix", where=label) from None
    if magic not in (MAGIC, MAGIC_V1):
        raise VerificationError("malformed envelope: bad magic", where=label)
    v2 = magic == MAGIC
    start = _PREFIX.size
    header = data[start : start + header_size]
    signature = data[start + header_size : start + header_size + _SIGNATURE_SIZE]
    if len(header) != header_size or len(signature) != _SIGNATURE_SIZE:
        raise VerificationError("malformed envelope: truncated envelope", where=label)
    try:
        fields = _decode_header(header.decode())
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise VerificationError("malformed envelope: header is not JSON", where=label) from None
    problem = _header_problem(fields, v2)
    if problem is None:
        signed_at = fields["signed_at"] if v2 else None
        try:
            canonical_header = header_bytes(
                fields["key_id"],
                fields["payload_sha256"],
                fields["prev"],
                signed_at,
                fields["stream"],
                fields["type"],
                fields["version"],
            )
        except (ValueError, UnicodeError):  # e.g. a lone surrogate RFC 8785 cannot encode
            canonical_header = b""
        if canonical_header != header:
            problem = "header is not in canonical form"
    if problem is not None:
        raise VerificationError(f"malformed envelope: {problem}", where=label)
    return Envelope(
        header,
        signature,
        data[start + header_size + _SIGNATURE_SIZE :],
        fields["stream"],
        fields["version"],
        fields["type"],
        bytes.fromhex(fields["prev"]),
        bytes.fromhex(fields["payload_sha256"]),
        fields["key_id"],
        signed_at,
    )


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
        # (not_before, not_after, revoked_at) in microseconds, per ledger-node key.
        self.windows = {r.key_id: r.window_micros() for r in keyring if r.role is Role.LEDGER_NODE}

    def check_validity(self, envelope: Envelope, *, stream: object, version: object) -> None:
        """A v2 envelope's signing time inside its key's validity period, and
        before its key's revocation.

        What a reader can check alone: the event is judged by its own signing
        time, as if it vouched for it; `ledger verify` judges a revoked key's
        events by the checkpoints that cover them (`ledger.crypto.validity`)."""
        window = self.windows.get(envelope.key_id)
        signed_at = envelope.signed_at
        if window is not None and signed_at is not None:
            problem = signing_problem(signed_at, window, signed_at)
            if problem:
                raise VerificationError(problem, where=where(stream, version))

    def check_signer(self, envelope: Envelope, *, stream: object, version: int) -> bytes:
        """Return the signer's public key, or raise if it is not a ledger-node key."""
        public_key = self._public_keys.get(envelope.key_id)
        if public_key is None:
            role = self._other_roles.get(envelope.key_id)
            reason = (
                f"signed by {with_article(role.value)} key, not a ledger-node key"
                if role
                else f"signed by key {envelope.key_id[:16]}, which is not in the keyring"
            )
            raise VerificationError(reason, where=where(stream, version))
        return public_key

    def check_signature(self, envelope: Envelope, *, stream: object, version: int) -> None:
        public_key = self.check_signer(envelope, stream=stream, version=version)
        if not verify_signature(public_key, envelope.signed_message, envelope.signature):
            raise VerificationError("envelope signature is invalid", where=where(stream, version))
