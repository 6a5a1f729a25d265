"""The keys directory: `keyring.json` (public keys) beside `<name>.pem` files,
and `signing.json`: which key signs now for each role (`ledger keys use`).

A node never switches keys on its own: it signs with the key configured for
the role (``LEDGER_<ROLE>_KEY`` overrides `signing.json`), or with the only
usable key of the role it holds, and refuses when the choice is ambiguous.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ledger.crypto.keys import (
    KEYRING_FILE,
    Keyring,
    PublicKeyRecord,
    Role,
    read_private_key,
    to_micros,
    write_private_key,
)
from ledger.crypto.signing import InMemorySigner
from ledger.crypto.validity import key_problem
from ledger.errors import KeyStoreError, with_article

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

# The keys a ledger node needs to record and checkpoint; the set-up makes them.
NODE_KEY_NAMES = {Role.LEDGER_NODE: "ledger-node", Role.CHECKPOINT: "checkpoint"}
SIGNING_FILE = "signing.json"
KEYS_ENV = "LEDGER_KEYS"
DEFAULT_KEYS = "keys"


def key_env(role: Role) -> str:
    """The environment variable naming the key that signs for `role`, e.g. LEDGER_NODE_KEY."""
    name = "NODE" if role is Role.LEDGER_NODE else role.value.upper().replace("-", "_")
    return f"LEDGER_{name}_KEY"


def keys_dir(given: str | None = None) -> KeyDirectory:
    """The keys directory `given`, else $LEDGER_KEYS, else ./keys (read by
    every command, the auditor's too: no node is imported to find it)."""
    return KeyDirectory(Path(given or os.environ.get(KEYS_ENV) or DEFAULT_KEYS))


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
        if passphrase:
            self._check_shared_passphrase(keyring, passphrase)
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

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

    @property
    def signing_path(self) -> Path:
        return self.path / SIGNING_FILE

    def configured(self) -> dict[str, str]:
        """Role -> key name set with `ledger keys use` (empty when none)."""
        if not self.signing_path.exists():
            return {}
        try:
            data = json.loads(self.signing_path.read_text())
        except (OSError, ValueError) as exc:
            raise KeyStoreError(f"cannot read {self.signing_path}: {exc}") from exc
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise KeyStoreError(f"{self.signing_path} is not a map of role to key name")
        return data

    def use(self, name: str) -> PublicKeyRecord:
        """Make key `name` the one that signs for its role from now on."""
        record = self._by_name(name)
        if not self.private_key_path(name).exists():
            raise KeyStoreError(f"no private key file for {name!r} in {self.path}")
        self._check_usable(record, datetime.now(UTC))
        settings = self.configured() | {record.role.value: name}
        tmp = self.signing_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.signing_path)
        return record

    def _by_name(self, name: str) -> PublicKeyRecord:
        for record in self.keyring():
            if record.name == name:
                return record
        raise KeyStoreError(f"no key named {name!r} in {self.keyring_path}")

    @staticmethod
    def _check_usable(record: PublicKeyRecord, now: datetime) -> None:
        if record.revoked_at is not None and record.revoked_at <= now:
            raise KeyStoreError(
                f"key {record.name!r} was revoked at {record.revoked_at.isoformat()}: "
                f"configure another {record.role.value} key with `ledger keys use NAME`"
            )
        if key_problem(record, to_micros(now)) is not None:
            raise KeyStoreError(
                f"key {record.name!r} may not sign now (outside its validity period, or "
                f"revoked): configure another {record.role.value} key with `ledger keys use NAME`"
            )

    def _check_shared_passphrase(self, keyring: Keyring, passphrase: bytes) -> None:
        """A directory's keys share one passphrase: a new key under another one
        would be a key nobody can use beside the rest (the first encrypted key
        held here is tried)."""
        for record in keyring:
            path = self.private_key_path(record.name)
            if path.is_file() and b"ENCRYPTED PRIVATE KEY" in path.read_bytes():
                try:
                    read_private_key(path, passphrase)
                except KeyStoreError as exc:
                    if "wrong passphrase" in str(exc):
                        raise KeyStoreError(
                            f"this passphrase (LEDGER_PASSPHRASE or the one typed) does not "
                            f"open the keys already in {self.path} ({path.name}): its keys "
                            "share one passphrase; no key created"
                        ) from None
                    # Unopened, the passphrase is unconfirmed: never create on a guess.
                    raise KeyStoreError(f"{exc}; no key created") from None
                return

    def choose(self, role: Role, name: str | None = None) -> PublicKeyRecord:
        """The key that signs for `role` now: `name`, else the configured one
        (environment, then `signing.json`), else the only usable one held."""
        now = datetime.now(UTC)
        name = name or os.environ.get(key_env(role)) or self.configured().get(role.value)
        if name:
            record = self._by_name(name)
            if record.role is not role:
                raise KeyStoreError(
                    f"key {name!r} is {with_article(record.role.value)} key, not {role.value}"
                )
            self._check_usable(record, now)
            return record
        candidates = [
            r
            for r in self.keyring().with_role(role)
            if key_problem(r, to_micros(now)) is None and self.private_key_path(r.name).exists()
        ]
        if not candidates:
            held = [
                r.name + (" revoked" if r.revoked_at and r.revoked_at <= now else " expired")
                for r in self.keyring().with_role(role)
                if self.private_key_path(r.name).exists()
            ]
            unusable = f" ({', '.join(held)})" if held else ""
            raise KeyStoreError(f"no valid {role.value} private key in {self.path}{unusable}")
        if len(candidates) > 1:
            names = ", ".join(sorted(r.name for r in candidates))
            raise KeyStoreError(
                f"{len(candidates)} valid {role.value} keys in {self.path} ({names}): "
                f"choose one with `ledger keys use NAME` or {key_env(role)}"
            )
        return candidates[0]

    def encrypted(self, role: Role) -> bool:
        """Whether the key that signs for `role` now is kept under a passphrase
        (a key that cannot be read is taken as encrypted: opening it says why)."""
        try:
            pem = self.private_key_path(self.choose(role).name).read_bytes()
        except (KeyStoreError, OSError):
            return True
        return b"ENCRYPTED PRIVATE KEY" in pem

    def signer(
        self, role: Role, passphrase: bytes | None, name: str | None = None
    ) -> InMemorySigner:
        """A signer for the key `choose(role, name)` picks."""
        record = self.choose(role, name)
        private_key = read_private_key(self.private_key_path(record.name), passphrase)
        signer = InMemorySigner(private_key, role, record.name)
        if signer.key_id != record.key_id:
            raise KeyStoreError(f"{record.name}.pem does not match its keyring entry")
        return signer

    def mark_revoked(self, key_id: str, revoked_at: datetime, reason: str) -> PublicKeyRecord:
        """Write a revocation into the keyring entry (public copies then carry it)."""
        keyring = self.keyring()
        record = keyring.get(key_id)
        if record is None:
            raise KeyStoreError(f"no key {key_id} in {self.keyring_path}")
        if record.revoked_at is not None and record.revoked_at <= revoked_at:
            return record  # the earlier revocation stands
        revoked = replace(record, revoked_at=revoked_at, revocation_reason=reason)
        keyring.add(revoked)
        keyring.save(self.keyring_path)
        return revoked
