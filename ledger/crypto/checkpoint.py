"""Signed checkpoints (tree heads), after C2SP tlog-checkpoint.

The note body is ``origin\\nsize\\nbase64(root)\\ntime ISO-8601\\n``; the signature
is Ed25519 over ``CHECKPOINT_DOMAIN + body``. A file holds the body, a blank
line, and one signature line ``— <key id> <base64 signature>``, so an auditor
can keep it, diff it and check it with nothing but the keyring.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from ledger.crypto.canonical import CHECKPOINT_DOMAIN
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.signing import Signer, verify_signature
from ledger.errors import VerificationError

_DASH = "\u2014"


@dataclass(frozen=True)
class Checkpoint:
    """A signed statement: the log `origin` had `size` events with Merkle `root`."""

    origin: str
    size: int
    root: bytes
    issued_at: datetime
    key_id: str
    signature: bytes

    @property
    def body(self) -> str:
        root = base64.b64encode(self.root).decode()
        return f"{self.origin}\n{self.size}\n{root}\ntime {self.issued_at.isoformat()}\n"

    def to_note(self) -> str:
        signature = base64.b64encode(self.signature).decode()
        return f"{self.body}\n{_DASH} {self.key_id} {signature}\n"

    @classmethod
    def sign(
        cls, *, origin: str, size: int, root: bytes, signer: Signer, now: datetime | None = None
    ) -> Checkpoint:
        unsigned = cls(origin, size, root, now or datetime.now(UTC), signer.key_id, b"")
        signature = signer.sign(CHECKPOINT_DOMAIN + unsigned.body.encode())
        return cls(origin, size, root, unsigned.issued_at, signer.key_id, signature)

    @classmethod
    def from_note(cls, text: object) -> Checkpoint:
        """Parse a note; anything but a canonical, timezone-aware note raises
        `VerificationError` (never another exception: stored notes are untrusted)."""
        if not isinstance(text, str):
            kind = type(text).__name__
            raise VerificationError(f"malformed checkpoint: the note is {kind}, not text")
        try:
            body, signature_block = text.split("\n\n", 1)
            origin, size, root, time_line = body.split("\n")
            dash, key_id, signature = signature_block.strip().split(" ")
            if dash != _DASH or not time_line.startswith("time "):
                raise ValueError("not a checkpoint note")
            checkpoint = cls(
                origin=origin,
                size=int(size),
                root=base64.b64decode(root, validate=True),
                issued_at=datetime.fromisoformat(time_line.removeprefix("time ")),
                key_id=key_id,
                signature=base64.b64decode(signature, validate=True),
            )
        except (ValueError, binascii.Error) as exc:
            raise VerificationError(f"malformed checkpoint: {exc}") from exc
        if checkpoint.size < 0 or len(checkpoint.root) != 32:
            raise VerificationError("malformed checkpoint: negative size or a root not 32 bytes")
        if checkpoint.issued_at.utcoffset() is None:
            raise VerificationError("malformed checkpoint: its time has no UTC offset")
        if checkpoint.to_note() != text:
            raise VerificationError("checkpoint is not in canonical form")
        return checkpoint

    def verify(self, keyring: Keyring, *, origin: str | None = None) -> None:
        """Check the signature with a checkpoint key from `keyring`, else raise."""
        label = f"checkpoint of size {self.size}"
        record = keyring.get(self.key_id)
        if record is None:
            raise VerificationError(f"signed by unknown key {self.key_id[:16]}", where=label)
        if record.role is not Role.CHECKPOINT:
            raise VerificationError(f"signed by a {record.role.value} key", where=label)
        if not record.valid_at(self.issued_at):
            raise VerificationError("signed outside its key's validity period", where=label)
        if not verify_signature(
            record.public_key, CHECKPOINT_DOMAIN + self.body.encode(), self.signature
        ):
            raise VerificationError("bad signature", where=label)
        if origin is not None and self.origin != origin:
            raise VerificationError(f"origin is {self.origin!r}, expected {origin!r}", where=label)


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
