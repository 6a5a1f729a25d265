"""C2SP signed notes (https://c2sp.org/signed-note), Ed25519 only.

A note is a text (non-empty, every line ending in a newline), a blank line,
then signature lines ``— <key name> <base64(4-byte key hash || signature)>``.
The signature is Ed25519 over the text exactly, with no prefix. The key hash
binds a signature line to one key: the first 4 bytes of
SHA-256(key name || 0x0A || 0x01 || 32-byte public key), 0x01 being the
Ed25519 signature type. A verifier key is written ``name+hash+base64(0x01 ||
public key)`` (hash as 8 lowercase hex digits), the form other tools take.

Every parser here is strict and canonical (one spelling per note), because the
notes it reads come from rows an attacker may edit.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from ledger.crypto.signing import Signer

ED25519_TYPE = b"\x01"
KEY_HASH_SIZE = 4
DASH = "\u2014"  # the em dash that starts every signature line

# A key name: non-empty, no whitespace, no '+' (the verifier key's separator).
_NAME = re.compile(r"[^\s+]+")


class NoteError(ValueError):
    """A note, signature line or verifier key that is not well formed."""


@dataclass(frozen=True)
class SignatureLine:
    """One ``— name base64`` line: the key name and the decoded bytes."""

    name: str
    blob: bytes

    def format(self) -> str:
        return f"{DASH} {self.name} {base64.b64encode(self.blob).decode()}\n"


def check_key_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise NoteError(f"key name {name!r}: must be non-empty, without spaces or '+'")
    return name


def key_hash(name: str, public_key: bytes, key_type: bytes = ED25519_TYPE) -> bytes:
    """The 4-byte key hash of a key, as the signed-note spec defines it (an
    Ed25519 note key by default; a cosignature/v1 key has its own type byte)."""
    check_key_name(name)
    return hashlib.sha256(name.encode() + b"\n" + key_type + public_key).digest()[:KEY_HASH_SIZE]


def verifier_key(name: str, public_key: bytes, key_type: bytes = ED25519_TYPE) -> str:
    """``name+hash+base64(type || public key)``, the type 0x01 by default."""
    encoded = base64.b64encode(key_type + public_key).decode()
    return f"{name}+{key_hash(name, public_key, key_type).hex()}+{encoded}"


def parse_verifier_key(text: str) -> tuple[str, bytes]:
    """(name, 32-byte public key) of a verifier key; its stated hash must match."""
    parts = text.split("+", 2)  # base64 may hold '+' too
    if len(parts) != 3:
        raise NoteError("a verifier key is name+hash+base64")
    name, hash_hex, encoded = parts
    check_key_name(name)
    typed = strict_b64decode(encoded, "the verifier key")
    if len(typed) != 33 or typed[:1] != ED25519_TYPE:
        raise NoteError("the verifier key is not an Ed25519 key (type 0x01, 32 bytes)")
    public_key = typed[1:]
    if hash_hex != key_hash(name, public_key).hex():
        raise NoteError(f"the verifier key's hash {hash_hex!r} is not its key's hash")
    return name, public_key


def strict_b64decode(text: str, what: str) -> bytes:
    """Standard, padded base64 in its one canonical spelling (no stray bits)."""
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise NoteError(f"{what} is not valid base64") from exc
    if base64.b64encode(decoded).decode() != text:
        raise NoteError(f"{what} is not canonical base64")
    return decoded


def split_note(note: str) -> tuple[str, list[SignatureLine]]:
    """(text, signature lines) of a note, checking its shape (not the signatures)."""
    if not note.endswith("\n"):
        raise NoteError("the note does not end in a newline")
    split = note.rfind("\n\n")
    if split < 0:
        raise NoteError("no blank line between the text and the signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block:
        raise NoteError("no signature line")
    lines: list[SignatureLine] = []
    for number, line in enumerate(block[:-1].split("\n"), start=1):
        fields = line.split(" ")
        if len(fields) != 3 or fields[0] != DASH:
            raise NoteError(f"signature line {number} is not '{DASH} <key name> <base64>'")
        name = check_key_name(fields[1])
        lines.append(SignatureLine(name, strict_b64decode(fields[2], f"signature line {number}")))
    return text, lines


def sign_note(text: str, name: str, public_key: bytes, signer: Signer) -> str:
    """The note: `text` signed by `signer` (whose public key is `public_key`) as `name`."""
    if not text.endswith("\n"):
        raise NoteError("a note's text ends in a newline")
    signature = signer.sign(text.encode())
    line = SignatureLine(check_key_name(name), key_hash(name, public_key) + signature)
    return f"{text}\n{line.format()}"
