"""The keys directory: `keyring.json` (public keys) beside `<name>.pem` files."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.crypto.keys import (
    KEYRING_FILE,
    Keyring,
    PublicKeyRecord,
    Role,
    read_private_key,
    write_private_key,
)
from ledger.crypto.signing import InMemorySigner
from ledger.errors import KeyStoreError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

# The keys a ledger node needs to record and checkpoint; the set-up makes them.
NODE_KEY_NAMES = {Role.LEDGER_NODE: "ledger-node", Role.CHECKPOINT: "checkpoint"}


class KeyDirectory:
    """One directory holding the keyring and the private key files."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def keyring_path(self) -> Path:
        return self.path / KEYRING_FILE

    def private_key_path(self, name: str) -> Path:
        return self.path / f"{name}.pem"

    def keyring(self) -> Keyring:
        if not self.keyring_path.exists():
            raise KeyStoreError(
                f"no keyring in {self.path}: create keys with `ledger keys create` "
                "(or run `ledger simulate`, which creates them on first use)"
            )
        return Keyring.load(self.keyring_path)

    def has_node_keys(self) -> bool:
        if not self.keyring_path.exists():
            return False
        keyring = self.keyring()
        return all(keyring.with_role(role) for role in NODE_KEY_NAMES)

    def create(
        self,
        name: str,
        role: Role,
        passphrase: bytes | None,
        *,
        valid_days: int | None = None,
        now: datetime | None = None,
    ) -> PublicKeyRecord:
        """Make a key pair: the encrypted private key file, then its keyring entry."""
        if not _NAME.match(name):
            raise KeyStoreError(f"key name {name!r}: use letters, digits, '.', '_' or '-'")
        self.path.mkdir(parents=True, exist_ok=True)
        keyring = Keyring.load(self.keyring_path) if self.keyring_path.exists() else Keyring()
        if any(record.name == name for record in keyring):
            raise KeyStoreError(f"a key named {name!r} already exists in {self.path}")
        pem_path = self.private_key_path(name)
        if pem_path.exists():
            raise KeyStoreError(f"{pem_path} already exists")
        private_key = Ed25519PrivateKey.generate()
        start = now or datetime.now(UTC)
        record = PublicKeyRecord(
            name=name,
            role=role,
            public_key=private_key.public_key().public_bytes(
                serialization.Encoding.Raw, serialization.PublicFormat.Raw
            ),
            not_before=start,
            not_after=start + timedelta(days=valid_days) if valid_days else None,
        )
        write_private_key(pem_path, private_key, passphrase)
        try:
            keyring.add(record)
            keyring.save(self.keyring_path)
        except OSError:
            pem_path.unlink(missing_ok=True)  # nothing half-made
            raise
        return record

    def create_node_keys(self, passphrase: bytes | None) -> list[PublicKeyRecord]:
        """Create whichever of the node's own keys (ledger node, checkpoint) are missing."""
        existing = Keyring.load(self.keyring_path) if self.keyring_path.exists() else Keyring()
        return [
            self.create(name, role, passphrase)
            for role, name in NODE_KEY_NAMES.items()
            if not existing.with_role(role)
        ]

    def signer(self, role: Role, passphrase: bytes | None) -> InMemorySigner:
        """A signer for the newest currently valid key of `role` we hold privately."""
        now = datetime.now(UTC)
        candidates = sorted(
            (
                r
                for r in self.keyring().with_role(role)
                if r.valid_at(now) and self.private_key_path(r.name).exists()
            ),
            key=lambda r: r.not_before,
            reverse=True,
        )
        if not candidates:
            raise KeyStoreError(f"no valid {role.value} private key in {self.path}")
        record = candidates[0]
        private_key = read_private_key(self.private_key_path(record.name), passphrase)
        signer = InMemorySigner(private_key, role)
        if signer.key_id != record.key_id:
            raise KeyStoreError(f"{record.name}.pem does not match its keyring entry")
        return signer
