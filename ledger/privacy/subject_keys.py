"""Each data subject's key, kept outside the event store (docs/privacy.md).

A subject is a person the ledger records a personal value of: a player (by
account) or a dealer. Its key is 32 random bytes in a file of its own under
`<keys>/subjects/`, wrapped (AES-256-GCM) under the vault key. The vault key
is derived (HKDF-SHA256) from a private key kept exactly as the signing keys
are, a PKCS#8 file encrypted with the node's passphrase (`vault.pem`): the
same protection, written and read by the same code. Erasing a subject
deletes its key file (and, for a dealer, the index entry that finds it by
name): nothing left on disk opens its values, and no name leads to it.

A dealer's subject is found by name through `by-name/<HMAC of the name>`;
the HMAC's key is the vault key, so the index confirms no guess to someone
without it, and after an erasure there is nothing left to confirm.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ledger.errors import KeyStoreError, NotFoundError
from ledger.inputs import sync_path

SUBJECTS: Final = "subjects"
VAULT_FILE: Final = "vault.pem"
KEY_BYTES: Final = 32
_SUBJECT = re.compile(
    r"^(account|dealer)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)
_WRAP_AAD: Final = b"casino-ledger subject key v1\x00"
_VAULT_INFO: Final = b"casino-ledger vault key v1"


def account_subject(account_id: str) -> str:
    """The subject of an account's owner: the account's id is already a pseudonym."""
    return f"account-{account_id}"


def check_subject(subject: str) -> str:
    """A subject id as the ledger writes them, else one clear error."""
    if not _SUBJECT.match(subject):
        raise NotFoundError(
            f"{subject!r} is not a data subject id (account-<account id> or dealer-<id>)"
        )
    return subject


@dataclass(frozen=True)
class Vault:
    """The vault key: wraps each subject's key and keys the dealers' name index."""

    key: bytes

    @classmethod
    def open(cls, keys_dir: Path, passphrase: bytes | None, *, create: bool) -> Vault:
        """The vault key of `keys_dir` (made when `create` and missing)."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        from ledger.crypto.keys import read_private_key, write_private_key

        path = keys_dir / VAULT_FILE
        if not path.exists():
            if not create:
                raise KeyStoreError(f"no vault key at {path}: no personal data was sealed here")
            keys_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Written whole under a temporary name, then linked: two processes
            # sealing their first value at once (serve's workers) share the
            # vault the first of them made.
            temporary = keys_dir / f".{VAULT_FILE}.{secrets.token_hex(8)}.tmp"
            write_private_key(temporary, Ed25519PrivateKey.generate(), passphrase)
            try:
                _sync_file(temporary)
                with contextlib.suppress(FileExistsError):
                    os.link(temporary, path)
            finally:
                temporary.unlink(missing_ok=True)
            _sync_directory(keys_dir)
        return cls(_derive(read_private_key(path, passphrase)))

    def wrap(self, subject: str, key: bytes) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(12)
        return nonce + AESGCM(self.key).encrypt(nonce, key, _WRAP_AAD + subject.encode())

    def unwrap(self, subject: str, wrapped: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        aad = _WRAP_AAD + subject.encode()
        try:
            return AESGCM(self.key).decrypt(wrapped[:12], wrapped[12:], aad)
        except (InvalidTag, ValueError):
            raise KeyStoreError(f"the key of subject {subject} does not open: altered") from None

    def name_tag(self, kind: str, name: str) -> str:
        return hmac.new(self.key, f"{kind}\x00{name}".encode(), hashlib.sha256).hexdigest()


class SubjectKeys:
    """The subjects' keys of one keys directory."""

    def __init__(self, keys_dir: Path, vault: Vault) -> None:
        self.path = keys_dir / SUBJECTS
        self.vault = vault

    def key_of(self, subject: str, *, create: bool = False) -> bytes | None:
        """`subject`'s key; None once erased (or never made, unless `create`)."""
        path = self.path / f"{check_subject(subject)}.key"
        if path.exists():
            return self.vault.unwrap(subject, path.read_bytes())
        if not create:
            return None
        key = secrets.token_bytes(KEY_BYTES)
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        if _write_new(path, self.vault.wrap(subject, key)):
            return key
        return self.vault.unwrap(subject, path.read_bytes())  # another process's, made first

    def dealer(self, name: str, *, create: bool = False) -> str | None:
        """The subject of the dealer called `name` (made when `create`)."""
        index = self.path / "by-name" / self.vault.name_tag("dealer", name)
        if index.exists():
            return index.read_text(encoding="ascii").strip()
        if not create:
            return None
        subject = f"dealer-{uuid.uuid4()}"  # ids in one form: a UUID, hyphenated
        self.key_of(subject, create=True)
        index.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if _write_new(index, subject.encode("ascii")):
            return subject
        # Another process named this dealer first (serve's workers): theirs stands.
        (self.path / f"{subject}.key").unlink(missing_ok=True)
        return index.read_text(encoding="ascii").strip()

    def erase(self, subject: str) -> bool:
        """Destroy `subject`'s key and any name that finds it; whether a key was there."""
        path = self.path / f"{check_subject(subject)}.key"
        names = self.path / "by-name"
        if names.is_dir():
            for entry in names.iterdir():
                if entry.name.startswith("."):
                    continue  # another process's file still being written
                with contextlib.suppress(FileNotFoundError):
                    if entry.read_text(encoding="ascii").strip() == subject:
                        entry.unlink()
        existed = path.exists()
        path.unlink(missing_ok=True)
        _sync_directory(self.path)
        return existed


def _derive(private_key: Any) -> bytes:
    """The vault key: HKDF-SHA256 of the vault file's private key bytes."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    raw = private_key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return HKDF(hashes.SHA256(), KEY_BYTES, salt=None, info=_VAULT_INFO).derive(raw)


def _write_new(path: Path, data: bytes) -> bool:
    """Write a new file readable by its owner alone, durably and whole: written
    and synced under a temporary name, then linked to `path` (a crash leaves
    no half-written file there). False when another process made `path` first:
    its file stands, this one is dropped."""
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
    finally:
        temporary.unlink(missing_ok=True)
    _sync_directory(path.parent)
    return True


def _sync_file(path: Path) -> None:
    sync_path(path)


def _sync_directory(path: Path) -> None:
    if path.is_dir():
        sync_path(path)
