"""Each data subject's key, kept outside the event store (docs/privacy.md).

A subject is a person the ledger records a personal value of: a player (by
account) or a dealer. Its key is 32 random bytes in a file of its own under
`<keys>/subjects/`, wrapped (AES-256-GCM) under the vault key; the vault key
is encrypted with the node's passphrase, as the signing keys are
(`vault.key`). Erasing a subject deletes its key file (and, for a dealer,
the index entry that finds it by name): nothing left on disk opens its
values, and no name leads to it.

A dealer's subject is found by name through `by-name/<HMAC of the name>`;
the HMAC's key is the vault key, so the index confirms no guess to someone
without it, and after an erasure there is nothing left to confirm.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ledger.errors import KeyStoreError, NotFoundError

SUBJECTS: Final = "subjects"
VAULT_FILE: Final = "vault.key"
KEY_BYTES: Final = 32
_SUBJECT = re.compile(r"^(account|dealer)-[0-9a-f-]{32,36}$")
_WRAP_AAD: Final = b"casino-ledger subject key v1\x00"
_VAULT_AAD: Final = b"casino-ledger vault key v1"
# scrypt's cost for the vault key: as slow to guess as the signing keys' own
# PKCS#8 encryption is meant to be, paid once when a node opens.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**15, 8, 1


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
        path = keys_dir / VAULT_FILE
        if not path.exists():
            if not create:
                raise KeyStoreError(f"no vault key at {path}: no personal data was sealed here")
            vault = cls(secrets.token_bytes(KEY_BYTES))
            _write_new(path, _lock(vault.key, passphrase))
            return vault
        return cls(_unlock(path.read_bytes(), passphrase, path))

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
        _write_new(path, self.vault.wrap(subject, key))
        return key

    def dealer(self, name: str, *, create: bool = False) -> str | None:
        """The subject of the dealer called `name` (made when `create`)."""
        index = self.path / "by-name" / self.vault.name_tag("dealer", name)
        if index.exists():
            return index.read_text(encoding="ascii").strip()
        if not create:
            return None
        subject = f"dealer-{secrets.token_hex(16)}"
        self.key_of(subject, create=True)
        index.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_new(index, subject.encode("ascii"))
        return subject

    def erase(self, subject: str) -> bool:
        """Destroy `subject`'s key and any name that finds it; whether a key was there."""
        path = self.path / f"{check_subject(subject)}.key"
        names = self.path / "by-name"
        if names.is_dir():
            for entry in names.iterdir():
                if entry.read_text(encoding="ascii").strip() == subject:
                    entry.unlink()
        existed = path.exists()
        path.unlink(missing_ok=True)
        _sync_directory(self.path)
        return existed


def _lock(key: bytes, passphrase: bytes | None) -> bytes:
    """The vault key as stored: scrypt(passphrase) wraps it; clear only when the
    node's keys are kept unencrypted too (no passphrase)."""
    if not passphrase:
        return b"clear\x00" + key
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    salt, nonce = secrets.token_bytes(16), secrets.token_bytes(12)
    kek = Scrypt(salt=salt, length=32, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P).derive(passphrase)
    return b"scrypt\x00" + salt + nonce + AESGCM(kek).encrypt(nonce, key, _VAULT_AAD)


def _unlock(stored: bytes, passphrase: bytes | None, path: Path) -> bytes:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    kind, _, body = stored.partition(b"\x00")
    if kind == b"clear" and len(body) == KEY_BYTES:
        return body
    if kind != b"scrypt" or len(body) != 16 + 12 + KEY_BYTES + 16:
        raise KeyStoreError(f"{path} is not a vault key")
    if not passphrase:
        raise KeyStoreError(f"{path} is encrypted: a passphrase is needed")
    salt, nonce, sealed = body[:16], body[16:28], body[28:]
    kek = Scrypt(salt=salt, length=32, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P).derive(passphrase)
    try:
        return AESGCM(kek).decrypt(nonce, sealed, _VAULT_AAD)
    except InvalidTag:
        raise KeyStoreError(f"wrong passphrase for {path} (or the file was altered)") from None


def _write_new(path: Path, data: bytes) -> None:
    """Write a new file readable by its owner alone, durably."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    _sync_directory(path.parent)


def _sync_directory(path: Path) -> None:
    if path.is_dir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
