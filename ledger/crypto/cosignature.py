"""C2SP tlog-cosignature, Ed25519 (`cosignature/v1`): a witness's statement
that, at a time, the checkpoint it signs is the largest consistent tree it has
seen for the log's origin.

A cosignature is a signed-note signature line ``— <witness name>
base64(key ID || timestamp || signature)``:

- key ID: the first 4 bytes of SHA-256(name || 0x0A || 0x04 || 32-byte
  public key), 0x04 being the cosignature/v1 type (a log's note signature,
  type 0x01, never has a witness's key ID, even with the same key);
- timestamp: the POSIX time of cosigning, 8 bytes big-endian, below 2^63;
- signature: Ed25519 over ``cosignature/v1\\ntime <timestamp>\\n`` followed by
  the checkpoint's whole text (every line up to the blank line, final newline
  included, extension lines too).

A witness's verifier key is ``name+keyID+base64(0x04 || public key)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger.crypto.note import (
    KEY_HASH_SIZE,
    NoteError,
    SignatureLine,
    check_key_name,
    key_hash,
    verifier_key,
)
from ledger.crypto.note import strict_b64decode as _b64decode
from ledger.crypto.signing import Signer, verify_signature
from ledger.errors import VerificationError

COSIGNATURE_TYPE = b"\x04"
HEADER = "cosignature/v1\n"
TIMESTAMP_SIZE = 8
SIGNATURE_SIZE = 64
BLOB_SIZE = KEY_HASH_SIZE + TIMESTAMP_SIZE + SIGNATURE_SIZE  # 76 bytes
MAX_TIMESTAMP = 2**63 - 1


def cosigner_key_id(name: str, public_key: bytes) -> bytes:
    """The 4-byte key ID of a cosignature/v1 key."""
    return key_hash(name, public_key, COSIGNATURE_TYPE)


def cosigner_verifier_key(name: str, public_key: bytes) -> str:
    """``name+keyID+base64(0x04 || public key)``: how a witness's key is handed out."""
    return verifier_key(name, public_key, COSIGNATURE_TYPE)


@dataclass(frozen=True)
class Cosigner:
    """A witness as a verifier knows it: its name and Ed25519 public key."""

    name: str
    public_key: bytes

    @property
    def key_id(self) -> bytes:
        return cosigner_key_id(self.name, self.public_key)

    @property
    def label(self) -> str:
        return f"{self.name}+{self.key_id.hex()}"

    @property
    def verifier_key(self) -> str:
        return cosigner_verifier_key(self.name, self.public_key)

    @classmethod
    def parse(cls, text: str) -> Cosigner:
        """A witness verifier key (type 0x04); its stated key ID must match."""
        parts = text.strip().split("+", 2)  # base64 may hold '+' too
        if len(parts) != 3:
            raise NoteError(f"witness key {text!r}: a verifier key is name+keyID+base64")
        name, id_hex, encoded = parts
        check_key_name(name)
        typed = _b64decode(encoded, f"witness key {name!r}")
        if len(typed) != 33 or typed[:1] != COSIGNATURE_TYPE:
            kind = f"type 0x{typed[0]:02x}" if typed else "empty"
            raise NoteError(
                f"witness key {name!r} is not a cosignature/v1 Ed25519 key (type 0x04, "
                f"32 bytes; it is {kind}, {len(typed) - 1 if typed else 0} bytes)"
            )
        cosigner = cls(name, typed[1:])
        if id_hex != cosigner.key_id.hex():
            raise NoteError(f"witness key {name!r}: its key ID {id_hex!r} is not its key's ID")
        return cosigner


def signed_message(text: str, timestamp: int) -> bytes:
    """What a cosignature signs: the header, the time line, the checkpoint text."""
    if not text.endswith("\n"):
        raise NoteError("a checkpoint's text ends in a newline")
    return f"{HEADER}time {timestamp}\n{text}".encode()


def cosign(
    text: str, name: str, signer: Signer, public_key: bytes, timestamp: int
) -> SignatureLine:
    """The cosignature line of witness `name` (key `signer`) on checkpoint `text`."""
    if not 0 <= timestamp <= MAX_TIMESTAMP:
        raise ValueError(f"timestamp {timestamp} is outside 0..2^63-1")
    signature = signer.sign(signed_message(text, timestamp))
    blob = cosigner_key_id(name, public_key) + timestamp.to_bytes(TIMESTAMP_SIZE, "big") + signature
    return SignatureLine(check_key_name(name), blob)


def is_line_of(line: SignatureLine, cosigner: Cosigner) -> bool:
    """Whether `line` names `cosigner` (its name and key ID): only such a line is its."""
    return line.name == cosigner.name and line.blob[:KEY_HASH_SIZE] == cosigner.key_id


def verify_cosignature(line: SignatureLine, text: str, cosigner: Cosigner) -> int:
    """The timestamp of `cosigner`'s valid cosignature `line` on `text`, else raise."""
    if not is_line_of(line, cosigner):
        raise VerificationError(f"the line is not {cosigner.label}'s")
    if len(line.blob) != BLOB_SIZE:
        raise VerificationError(
            f"cosignature of {cosigner.label} holds {len(line.blob)} bytes, not "
            f"{BLOB_SIZE} (key ID, 8-byte timestamp, Ed25519 signature)"
        )
    stamp = line.blob[KEY_HASH_SIZE : KEY_HASH_SIZE + TIMESTAMP_SIZE]
    timestamp = int.from_bytes(stamp, "big")
    if timestamp > MAX_TIMESTAMP:
        raise VerificationError(f"cosignature of {cosigner.label}: timestamp beyond 2^63-1")
    signature = line.blob[KEY_HASH_SIZE + TIMESTAMP_SIZE :]
    if not verify_signature(cosigner.public_key, signed_message(text, timestamp), signature):
        raise VerificationError(
            f"cosignature of {cosigner.label} does not verify (forged or moved)"
        )
    return timestamp
