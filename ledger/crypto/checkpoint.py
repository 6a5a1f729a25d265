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
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from ledger.crypto.canonical import CHECKPOINT_DOMAIN
from ledger.crypto.keys import Keyring, PublicKeyRecord, Role, to_micros
from ledger.crypto.note import (
    KEY_HASH_SIZE,
    NoteError,
    SignatureLine,
    key_hash,
    split_note,
    strict_b64decode,
)
from ledger.crypto.signing import NamedSigner, verify_signature
from ledger.crypto.validity import key_problem
from ledger.errors import ConfigError, VerificationError, with_article

_SIGNATURE_SIZE = 64
_DECIMAL = re.compile(r"0|[1-9][0-9]*")  # no sign, no leading zeros, ASCII digits only
_MAX_SIZE = 2**63 - 1  # the store's BIGINT column, and the spec's uint64 in practice
_TIME = "time "
_ACCOUNTS = "accounts "


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
    # Every other signature line of the note (witnesses' cosignatures, other
    # signers), in note order, and where the log's own line sits among them.
    others: tuple[SignatureLine, ...] = ()
    log_line: int = 0
    # The root of the account heads map at `size` (`ledger.crypto.heads_map`),
    # an extension line after the time; None in checkpoints signed before it.
    accounts: bytes | None = None

    @property
    def legacy(self) -> bool:
        """Written by release 0.2 or before (project-specific form)."""
        return self.key_hash is None

    @property
    def text(self) -> str:
        """The signed text (C2SP tlog-checkpoint body, with the time extension line)."""
        root = base64.b64encode(self.root).decode()
        text = f"{self.origin}\n{self.size}\n{root}\n{_TIME}{self.issued_at.isoformat()}\n"
        if self.accounts is not None:
            text += f"{_ACCOUNTS}{base64.b64encode(self.accounts).decode()}\n"
        return text

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

    @property
    def own_line(self) -> SignatureLine:
        """The log's signature line."""
        blob = self.signature if self.key_hash is None else self.key_hash + self.signature
        return SignatureLine(self.key_name, blob)

    @property
    def lines(self) -> list[SignatureLine]:
        """Every signature line, in note order."""
        lines = list(self.others)
        lines.insert(self.log_line, self.own_line)
        return lines

    def to_note(self) -> str:
        return f"{self.text}\n{''.join(line.format() for line in self.lines)}"

    def bare(self) -> Checkpoint:
        """This checkpoint with only the log's own signature line."""
        return replace(self, others=(), log_line=0)

    @classmethod
    def sign(
        cls,
        *,
        origin: str,
        size: int,
        root: bytes,
        signer: NamedSigner,
        now: datetime | None = None,
        accounts: bytes | None = None,
    ) -> Checkpoint:
        """A C2SP checkpoint signed by `signer` under its key name (with the
        account heads map's root `accounts`, when given)."""
        if signer.name is None:
            raise ConfigError("a checkpoint's signer needs its key name (load it by name)")
        try:
            hashed = key_hash(signer.name, signer.public_key)
        except NoteError as exc:
            raise ConfigError(f"cannot sign checkpoints: {exc}") from exc
        unsigned = cls(
            origin,
            size,
            root,
            now or datetime.now(UTC),
            signer.name,
            b"",
            hashed,
            accounts=accounts,
        )
        return replace(unsigned, signature=signer.sign(unsigned.signed_message))

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
        verifies). The log's line is the one `for_keyring` picks."""
        chosen = self.for_keyring(keyring)
        if chosen is not self:
            return chosen.key_record(keyring)
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

    def for_keyring(self, keyring: Keyring) -> Checkpoint:
        """This checkpoint read with the log's line being the first that names a
        checkpoint key of `keyring` (C2SP signed notes: lines may come in any
        order); itself when none does (its first note signature line)."""
        if self._named_record(self.own_line, keyring) is not None:
            return self
        lines = self.lines
        for index, line in enumerate(lines):
            if index == self.log_line or len(line.blob) != KEY_HASH_SIZE + _SIGNATURE_SIZE:
                continue
            record = self._named_record(line, keyring)
            if record is not None and record.role is Role.CHECKPOINT:
                others = tuple(other for i, other in enumerate(lines) if i != index)
                hashed, signature = line.blob[:KEY_HASH_SIZE], line.blob[KEY_HASH_SIZE:]
                return replace(
                    self,
                    key_name=line.name,
                    key_hash=hashed,
                    signature=signature,
                    others=others,
                    log_line=index,
                )
        return self

    @staticmethod
    def _named_record(line: SignatureLine, keyring: Keyring) -> PublicKeyRecord | None:
        if len(line.blob) == _SIGNATURE_SIZE:  # the old form: named by key id
            return keyring.get(line.name)
        hashed = line.blob[:KEY_HASH_SIZE]
        named = [r for r in keyring if r.name == line.name and _hash_of(r) == hashed]
        return named[0] if named else None

    def verify(self, keyring: Keyring, *, origin: str | None = None) -> None:
        """Check the log's signature with a checkpoint key from `keyring`, else raise.

        Other signature lines (a witness's cosignature) are ignored when their
        key is unknown (C2SP signed notes); one that claims the log key's name
        or key hash, or names another checkpoint key of `keyring`, must verify."""
        chosen = self.for_keyring(keyring)
        if chosen is not self:
            chosen.verify(keyring, origin=origin)
            return
        label = f"checkpoint of size {self.size}"
        record = self.key_record(keyring)
        if record is None:
            raise VerificationError(self._unknown_key(keyring), where=label)
        if record.role is not Role.CHECKPOINT:
            raise VerificationError(f"signed by {with_article(record.role.value)} key", where=label)
        if not verify_signature(record.public_key, self.signed_message, self.signature):
            raise VerificationError("bad signature", where=label)
        # A checkpoint vouches for its own time: it is judged as covered by itself.
        issued = to_micros(self.issued_at)
        problem = key_problem(record, issued, issued, self.size)
        if problem is not None:
            if record.revoked_at is not None and self.issued_at >= record.revoked_at:
                problem = (
                    f"signed at {self.issued_at.isoformat()} by a checkpoint key revoked at "
                    f"{record.revoked_at.isoformat()}"
                )
            raise VerificationError(problem, where=label)
        if origin is not None and self.origin != origin:
            raise VerificationError(f"origin is {self.origin!r}, expected {origin!r}", where=label)
        self._check_other_lines(record, keyring, label)

    def _check_other_lines(self, record: PublicKeyRecord, keyring: Keyring, label: str) -> None:
        own_hash = _hash_of(record)
        checkpoint_keys = {(r.name, _hash_of(r)): r for r in keyring.with_role(Role.CHECKPOINT)}
        for line in self.others:
            hashed, signature = line.blob[:KEY_HASH_SIZE], line.blob[KEY_HASH_SIZE:]
            claimed = (
                record
                if line.name == record.name or hashed == own_hash
                else checkpoint_keys.get((line.name, hashed))
            )
            if claimed is None:
                continue  # another key's line: not ours to judge (C2SP)
            if len(line.blob) != KEY_HASH_SIZE + _SIGNATURE_SIZE or not verify_signature(
                claimed.public_key, self.text.encode(), signature
            ):
                raise VerificationError(
                    f"a second signature line {line.name}+{hashed.hex()} claims checkpoint "
                    f"key {claimed.name} and does not verify",
                    where=label,
                )

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
    """Both forms: the text's lines, then the signature lines; the log's is the
    first Ed25519 note signature (a 4-byte key hash and 64 bytes, or the old
    form's bare 64), the others are kept as they are (`Checkpoint.others`)."""
    text, signatures = split_note(note)
    for number, line in enumerate(signatures, start=1):
        if line in signatures[: number - 1]:
            raise NoteError(f"signature line {number} repeats an earlier one")
    sizes = (KEY_HASH_SIZE + _SIGNATURE_SIZE, _SIGNATURE_SIZE)
    index = next((i for i, line in enumerate(signatures) if len(line.blob) in sizes), 0)
    line = signatures[index]
    others = tuple(other for i, other in enumerate(signatures) if i != index)
    lines = text.split("\n")[:-1]
    if len(lines) not in (4, 5):
        raise NoteError(
            f"the text has {len(lines)} lines, not 4 or 5 "
            "(origin, tree size, root hash, time, and the accounts root)"
        )
    origin, size_text, root_text, time_line = lines[:4]
    accounts = _accounts_root(lines[4]) if len(lines) == 5 else None
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
    if hashed is None and (others or accounts is not None):
        raise NoteError("an old-form checkpoint carries exactly one signature line and 4 lines")
    return Checkpoint(
        origin,
        int(size_text),
        root,
        issued_at,
        line.name,
        signature,
        hashed,
        others,
        index,
        accounts,
    )


def _accounts_root(line: str) -> bytes:
    if not line.startswith(_ACCOUNTS):
        raise NoteError("the fifth line is not the 'accounts' extension line")
    root = strict_b64decode(line.removeprefix(_ACCOUNTS), "the accounts root")
    if len(root) != 32:
        raise NoteError(f"the accounts root is {len(root)} bytes, not 32")
    return root


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
