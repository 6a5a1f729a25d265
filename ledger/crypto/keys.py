"""Ed25519 keys: ids, roles, the keyring of public keys, and key files.

A key id is the SHA-256 of the raw 32-byte public key (hex). Public keys are
kept forever in a keyring file with their role, validity and (once revoked)
revocation time and reason; private keys live in encrypted PKCS#8 PEM files
outside the store.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.crypto.canonical import canonical
from ledger.crypto.roles import Role as Role  # where the rest of the ledger imports it from
from ledger.errors import KeyStoreError
from ledger.inputs import read_json_object

if TYPE_CHECKING:
    # pyca/cryptography only reads and writes private key files: a process that
    # never opens one (verify, the read-only commands) never loads its 10 MB
    # library (40 ms of a command's start).
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

KEYRING_FILE = "keyring.json"
KEYRING_FORMAT = "casino-ledger/keyring/v1"


def key_id_of(raw_public_key: bytes) -> str:
    """Key id: hex SHA-256 of the raw public key."""
    return hashlib.sha256(raw_public_key).hexdigest()


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
NEVER: int = 1 << 63  # "no end" as a microsecond time: later than any signing time


def to_micros(moment: datetime) -> int:
    """Integer microseconds since the Unix epoch (the envelope's `signed_at` unit), exact."""
    return (moment - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    return _EPOCH + micros * _MICROSECOND


def _parse_time(text: str | None) -> datetime | None:
    if text is None:
        return None
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class PublicKeyRecord:
    """One verifying key with its role and validity period."""

    name: str
    role: Role
    public_key: bytes
    not_before: datetime
    not_after: datetime | None = None
    revoked_at: datetime | None = None
    revocation_reason: str | None = None

    @property
    def key_id(self) -> str:
        return key_id_of(self.public_key)

    def window_micros(self) -> tuple[int, int, int]:
        """(not_before, not_after, revoked_at) in microseconds; `NEVER` for none.
        Whether the key may sign at a moment is `ledger.crypto.validity`'s to say."""
        return (
            to_micros(self.not_before),
            to_micros(self.not_after) if self.not_after else NEVER,
            to_micros(self.revoked_at) if self.revoked_at else NEVER,
        )

    def to_json(self) -> dict[str, str | None]:
        data = {
            "key_id": self.key_id,
            "name": self.name,
            "role": self.role.value,
            "public_key": base64.b64encode(self.public_key).decode(),
            "not_before": self.not_before.isoformat(),
            "not_after": self.not_after.isoformat() if self.not_after else None,
        }
        if self.revoked_at is not None:  # absent, not null, so older keyrings keep their form
            data["revoked_at"] = self.revoked_at.isoformat()
            data["revocation_reason"] = self.revocation_reason or ""
        return data

    @classmethod
    def from_json(cls, data: dict[str, str | None]) -> PublicKeyRecord:
        try:
            raw = base64.b64decode(str(data["public_key"]), validate=True)
            record = cls(
                name=str(data["name"]),
                role=Role(str(data["role"])),
                public_key=raw,
                not_before=_parse_time(str(data["not_before"])) or datetime.now(UTC),
                not_after=_parse_time(data.get("not_after")),
                revoked_at=_parse_time(data.get("revoked_at")),
                revocation_reason=data.get("revocation_reason"),
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise KeyStoreError(f"malformed keyring entry: {exc}") from exc
        if len(raw) != 32:
            raise KeyStoreError(f"keyring entry {record.name!r}: public key is not 32 bytes")
        if data.get("key_id") not in (None, record.key_id):
            raise KeyStoreError(f"keyring entry {record.name!r}: key id does not match its key")
        return record


class Keyring:
    """The verifying keys an auditor trusts, by key id."""

    def __init__(self, records: list[PublicKeyRecord] | None = None) -> None:
        self._by_id: dict[str, PublicKeyRecord] = {}
        for record in records or []:
            self.add(record)

    def add(self, record: PublicKeyRecord) -> None:
        self._by_id[record.key_id] = record

    def get(self, key_id: str) -> PublicKeyRecord | None:
        return self._by_id.get(key_id)

    def __iter__(self) -> Iterator[PublicKeyRecord]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def with_revocations(self, revoked: dict[str, int]) -> Keyring:
        """This keyring with each key's revocation the earlier of its own and
        `revoked`'s (key id -> revocation time in µs, e.g. the log's)."""
        records = []
        for record in self._by_id.values():
            at = revoked.get(record.key_id)
            if at is not None and (record.revoked_at is None or at < to_micros(record.revoked_at)):
                record = replace(
                    record,
                    revoked_at=from_micros(at),
                    revocation_reason=record.revocation_reason or "revoked in the log",
                )
            records.append(record)
        return Keyring(records)

    def with_role(self, role: Role) -> list[PublicKeyRecord]:
        return [r for r in self._by_id.values() if r.role is role]

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the RFC 8785 form of every record, in key id order:
        the keyring an auditor trusted, in one line they can compare."""
        records = [r.to_json() for r in sorted(self._by_id.values(), key=lambda r: r.key_id)]
        return hashlib.sha256(canonical({"format": KEYRING_FORMAT, "keys": records})).hexdigest()

    def to_json(self) -> str:
        keys = [r.to_json() for r in sorted(self._by_id.values(), key=lambda r: r.name)]
        return json.dumps({"format": KEYRING_FORMAT, "keys": keys}, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Keyring:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise KeyStoreError(f"keyring is not valid JSON: {exc}") from exc
        return cls.from_object(data)

    @classmethod
    def from_object(cls, data: object) -> Keyring:
        """The keyring a parsed JSON document holds."""
        if not isinstance(data, dict) or data.get("format") != KEYRING_FORMAT:
            raise KeyStoreError(f"keyring format is not {KEYRING_FORMAT}")
        entries = data.get("keys", [])
        if not isinstance(entries, list):
            raise KeyStoreError("keyring 'keys' is not a list")
        return cls([PublicKeyRecord.from_json(entry) for entry in entries])

    @classmethod
    def load(cls, path: Path) -> Keyring:
        """The keyring file `path` (one a user names too): every refusal names it."""
        data = read_json_object(path, "keyring", KeyStoreError)
        try:
            return cls.from_object(data)
        except KeyStoreError as exc:
            raise KeyStoreError(f"{path}: {exc}") from None

    def save(self, path: Path) -> None:
        # Write then rename: a crash never leaves half a keyring.
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)


def write_private_key(path: Path, private_key: Ed25519PrivateKey, passphrase: bytes | None) -> None:
    """Write PKCS#8 PEM, encrypted unless `passphrase` is None (asked for explicitly)."""
    from cryptography.hazmat.primitives import serialization

    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)


def _intact_pem_container(pem: bytes) -> bool:
    """One PEM block whose base64 holds exactly one whole DER SEQUENCE: the
    outer EncryptedPrivateKeyInfo, whatever it encrypts, is not cut or garbled."""
    lines = pem.strip().splitlines()
    if (
        len(lines) < 3
        or not lines[0].startswith(b"-----BEGIN ")
        or not lines[-1].startswith(b"-----END ")
    ):
        return False
    try:
        der = base64.b64decode(b"".join(lines[1:-1]), validate=True)
    except ValueError:
        return False
    if len(der) < 2 or der[0] != 0x30:
        return False
    size, header = der[1], 2
    if size & 0x80:  # long form: the next (size & 0x7F) bytes hold the length
        count = size & 0x7F
        if not 1 <= count <= 4 or len(der) < 2 + count:
            return False
        size, header = int.from_bytes(der[2 : 2 + count], "big"), 2 + count
    return header + size == len(der)


def read_private_key(path: Path, passphrase: bytes | None) -> Ed25519PrivateKey:
    """Load an Ed25519 private key; one clear error for every way this fails."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        pem = path.read_bytes()
    except FileNotFoundError as exc:
        raise KeyStoreError(f"no private key file at {path}") from exc
    except OSError as exc:
        raise KeyStoreError(f"cannot read {path}: {exc.strerror}") from exc
    encrypted = b"ENCRYPTED PRIVATE KEY" in pem
    if encrypted and not passphrase:
        raise KeyStoreError(f"{path} is encrypted: a passphrase is needed")
    try:
        key = serialization.load_pem_private_key(pem, passphrase if encrypted else None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        # A wrong passphrase is a failure to open an intact container. OpenSSL
        # says "incorrect password" only when the decrypted padding is bad; about
        # one wrong passphrase in 256 decrypts to valid padding and fails later,
        # as a parse error. A cut or garbled file is a broken container.
        wrong = encrypted and (
            "incorrect password" in str(exc).lower() or _intact_pem_container(pem)
        )
        reason = "wrong passphrase" if wrong else "malformed key file (corrupt or truncated)"
        raise KeyStoreError(f"cannot read {path}: {reason}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyStoreError(f"{path} does not hold an Ed25519 key")
    return key
