"""Signed checkpoints (tree heads): C2SP tlog-checkpoint signed notes.

The text is ``origin\\nsize\\nbase64(root)\\ntime <ISO-8601>\\n`` (the time is an
extension line, so it is signed with the rest); the note is the text, a blank
line and one signature line ``— <key name> <base64(key hash || signature)>``,
Ed25519 over the text with no prefix (see `ledger.crypto.note`). Any tool that
reads C2SP checkpoints checks ours with the verifier key `ledger keys list`
prints.

Releases up to 0.2 wrote a project-specific form, still read and verified
(their stores and kept checkpoints must keep verifying): the same text, but
signed over ``CHECKPOINT_DOMAIN + text`` and named by key id, with a bare
64-byte signature. The length of the decoded signature (64 or 68 bytes) tells
the forms apart; nothing new is written in the old one.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from ledger.crypto.canonical import CHECKPOINT_DOMAIN
from ledger.crypto.keys import Keyring, PublicKeyRecord, Role
from ledger.crypto.note import (
    KEY_HASH_SIZE,
    NoteError,
    SignatureLine,
    key_hash,
    split_note,
    strict_b64decode,
)
from ledger.crypto.signing import NamedSigner, verify_signature
from ledger.errors import ConfigError, VerificationError

_SIGNATURE_SIZE = 64
_DECIMAL = re.compile(r"0|[1-9][0-9]*")  # no sign, no leading zeros, ASCII digits only
_MAX_SIZE = 2**63 - 1  # the store's BIGINT column, and the spec's uint64 in practice
_TIME = "time "


@dataclass(frozen=True)
class Checkpoint:
    """A signed statement: the log `origin` had `size` events with Merkle `root`.

    `key_name` is the name on the signature line; `key_hash` its 4-byte key
    hash, or None for the old form (whose `key_name` is the key id)."""

    origin: str
    size: int
    root: bytes
    issued_at: datetime
    key_name: str
    signature: bytes
    key_hash: bytes | None = None

    @property
    def legacy(self) -> bool:
        """Written by release 0.2 or before (project-specific form)."""
        return self.key_hash is None

    @property
    def text(self) -> str:
        """The signed text (C2SP tlog-checkpoint body, with the time extension line)."""
        root = base64.b64encode(self.root).decode()
        return f"{self.origin}\n{self.size}\n{root}\n{_TIME}{self.issued_at.isoformat()}\n"

    body = text  # the name before C2SP notes; kept for callers

    @property
    def signed_message(self) -> bytes:
        text = self.text.encode()
        return CHECKPOINT_DOMAIN + text if self.legacy else text

    @property
    def key_label(self) -> str:
        """How messages name the signing key: `name+hash` (old form: the key id's start)."""
        if self.key_hash is None:
            return self.key_name[:16]
        return f"{self.key_name}+{self.key_hash.hex()}"

    def to_note(self) -> str:
        blob = self.signature if self.key_hash is None else self.key_hash + self.signature
        return f"{self.text}\n{SignatureLine(self.key_name, blob).format()}"

    @classmethod
    def sign(
        cls,
        *,
        origin: str,
        size: int,
        root: bytes,
        signer: NamedSigner,
        now: datetime | None = None,
    ) -> Checkpoint:
        """A C2SP checkpoint signed by `signer` under its key name."""
        if signer.name is None:
            raise ConfigError("a checkpoint's signer needs its key name (load it by name)")
        try:
            hashed = key_hash(signer.name, signer.public_key)
        except NoteError as exc:
            raise ConfigError(f"cannot sign checkpoints: {exc}") from exc
        unsigned = cls(origin, size, root, now or datetime.now(UTC), signer.name, b"", hashed)
        signature = signer.sign(unsigned.signed_message)
        return cls(origin, size, root, unsigned.issued_at, signer.name, signature, hashed)

    @classmethod
    def from_note(cls, text: object) -> Checkpoint:
        """Parse a note of either form; anything but a canonical, timezone-aware
        checkpoint raises `VerificationError` (never another exception: stored
        notes are untrusted). The signature is not checked here: `verify` does."""
        if not isinstance(text, str):
            kind = type(text).__name__
            raise VerificationError(f"malformed checkpoint: the note is {kind}, not text")
        try:
            checkpoint = _parse(text)
        except NoteError as exc:
            raise VerificationError(f"malformed checkpoint: {exc}") from exc
        if checkpoint.to_note() != text:
            raise VerificationError("checkpoint is not in canonical form")
        return checkpoint

    def key_record(self, keyring: Keyring) -> PublicKeyRecord | None:
        """The keyring's key that the signature line names: by key id (old form),
        else by name and key hash (of two such keys, the one whose signature
        verifies)."""
        if self.key_hash is None:
            return keyring.get(self.key_name)
        named = [
            record
            for record in keyring
            if record.name == self.key_name and _hash_of(record) == self.key_hash
        ]
        if len(named) > 1:  # a 1 in 2^32 clash: only one of them signed it
            for record in named:
                if verify_signature(record.public_key, self.signed_message, self.signature):
                    return record
        return named[0] if named else None

    def verify(self, keyring: Keyring, *, origin: str | None = None) -> None:
        """Check the signature with a checkpoint key from `keyring`, else raise."""
        label = f"checkpoint of size {self.size}"
        record = self.key_record(keyring)
        if record is None:
            raise VerificationError(self._unknown_key(keyring), where=label)
        if record.role is not Role.CHECKPOINT:
            raise VerificationError(f"signed by a {record.role.value} key", where=label)
        if not record.valid_at(self.issued_at):
            raise VerificationError("signed outside its key's validity period", where=label)
        if not verify_signature(record.public_key, self.signed_message, self.signature):
            raise VerificationError("bad signature", where=label)
        if origin is not None and self.origin != origin:
            raise VerificationError(f"origin is {self.origin!r}, expected {origin!r}", where=label)

    def _unknown_key(self, keyring: Keyring) -> str:
        message = f"signed by unknown key {self.key_label}"
        if self.key_hash is not None:
            same_name = [r for r in keyring if r.name == self.key_name]
            if same_name:
                hashes = ", ".join(_hash_of(r).hex() for r in same_name)
                message += (
                    f" (the keyring's key {self.key_name!r} has key hash {hashes}: "
                    "another key of that name, or an altered key hash)"
                )
        return message


def _hash_of(record: PublicKeyRecord) -> bytes:
    try:
        return key_hash(record.name, record.public_key)
    except NoteError:
        return b""  # a keyring name no note can carry names no checkpoint


def _parse(note: str) -> Checkpoint:
    """Both forms: the text's lines, then the one signature line."""
    text, signatures = split_note(note)
    if len(signatures) != 1:
        raise NoteError(f"{len(signatures)} signature lines: a checkpoint carries exactly one")
    (line,) = signatures
    lines = text.split("\n")[:-1]
    if len(lines) != 4:
        raise NoteError(
            f"the text has {len(lines)} lines, not 4 (origin, tree size, root hash, time)"
        )
    origin, size_text, root_text, time_line = lines
    if not origin:
        raise NoteError("the origin line is empty")
    if not _DECIMAL.fullmatch(size_text) or int(size_text) > _MAX_SIZE:
        raise NoteError(
            f"tree size {size_text!r} is not a decimal number without sign or leading zeros"
        )
    root = strict_b64decode(root_text, "the root hash")
    if len(root) != 32:
        raise NoteError(f"the root hash is {len(root)} bytes, not 32")
    if not time_line.startswith(_TIME):
        raise NoteError("the fourth line is not the 'time' extension line")
    try:
        issued_at = datetime.fromisoformat(time_line.removeprefix(_TIME))
    except ValueError as exc:
        raise NoteError(f"the time line: {exc}") from exc
    if issued_at.utcoffset() is None:
        raise NoteError("its time has no UTC offset")
    if len(line.blob) == KEY_HASH_SIZE + _SIGNATURE_SIZE:
        hashed, signature = line.blob[:KEY_HASH_SIZE], line.blob[KEY_HASH_SIZE:]
    elif len(line.blob) == _SIGNATURE_SIZE:
        hashed, signature = None, line.blob  # the old form: key id, bare signature
    else:
        raise NoteError(
            f"the signature line holds {len(line.blob)} bytes, not a 4-byte key hash and "
            "a 64-byte Ed25519 signature"
        )
    return Checkpoint(origin, int(size_text), root, issued_at, line.name, signature, hashed)


def newest_valid(
    checkpoints: Iterable[Checkpoint], keyring: Keyring, *, origin: str | None = None
) -> tuple[Checkpoint | None, int]:
    """The checkpoint with the largest *signed* size whose signature verifies,
    and how many of `checkpoints` did not verify (they are ignored)."""
    newest, rejected = None, 0
    for checkpoint in checkpoints:
        try:
            checkpoint.verify(keyring, origin=origin)
        except VerificationError:
            rejected += 1
            continue
        if newest is None or checkpoint.size > newest.size:
            newest = checkpoint
    return newest, rejected
