"""API tokens: who may call the HTTP API, kept only as SHA-256 hashes.

Tokens are access control, not ledger facts, so they live beside the keys
(`<keys>/tokens.json`), not in the event store: a database attacker must not
be able to mint themselves a token by inserting a row, and revoking a token
is a change of configuration, not a fact to keep forever. The file is
rewritten atomically (write, fsync, rename) and reread whenever it changes,
so a revocation reaches every worker process on the host at its next request.

A token is `<id>.<secret>`: the id finds the entry, the secret is 256 random
bits. SHA-256 (no salt, no stretching) is right for a high-entropy secret:
nobody can guess 2**256 values, stretched or not. Comparison is constant time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from ledger.domain.api_roles import ApiRole as ApiRole  # where the routes import it from
from ledger.errors import ConfigError, InvalidCommandError, NotFoundError

TOKENS_FILE = "tokens.json"


@dataclass(frozen=True)
class Token:
    token_id: str
    role: ApiRole
    table: str | None  # a table-device token's own table
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    sha256: str  # of the whole token text

    def usable_at(self, now: datetime) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or now < datetime.fromisoformat(self.expires_at)

    def asked_by(self) -> dict[str, str]:
        """Who asked, as the ledger records it for a command this token sent
        (`ledger.domain.asked_by`; `Casino.asked_by`)."""
        return {"token": self.token_id, "role": self.role.value}

    def public(self) -> dict[str, Any]:
        """What a listing shows: everything but the hash."""
        shown = asdict(self)
        del shown["sha256"]
        return shown


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class TokenStore:
    """The tokens file of a keys directory."""

    def __init__(self, keys_path: Path) -> None:
        self.path = keys_path / TOKENS_FILE
        self._cache: tuple[tuple[int, int], dict[str, Token]] | None = None

    def _read(self) -> dict[str, Token]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return {}
        stamp = (stat.st_mtime_ns, stat.st_size)
        if self._cache is not None and self._cache[0] == stamp:
            return self._cache[1]
        try:
            rows = json.loads(self.path.read_text())["tokens"]
            tokens = {
                row["token_id"]: Token(**{**row, "role": ApiRole(row["role"])}) for row in rows
            }
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{self.path} is not a tokens file: {type(exc).__name__}") from None
        self._cache = (stamp, tokens)
        return tokens

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Token]]:
        """Read, change and rewrite under an exclusive lock (two CLIs at once lose nothing)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._cache = None
            tokens = dict(self._read())
            yield tokens
            temporary = self.path.with_suffix(".tmp")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as handle:
                json.dump({"tokens": [asdict(t) for t in tokens.values()]}, handle, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)

    def create(
        self, role: ApiRole, *, table: str | None = None, expires_at: datetime | None = None
    ) -> tuple[str, Token]:
        """A new token: (its text, shown once and never stored; its entry)."""
        if (role is ApiRole.TABLE_DEVICE) != (table is not None):
            raise InvalidCommandError(
                "a table-device token needs --table, and only it takes one",
                code="invalid_value",
                param="table",
            )
        if table is not None:
            try:
                table = str(UUID(table))
            except ValueError:
                raise InvalidCommandError(
                    f"--table {table!r} is not a table id (a UUID)",
                    code="invalid_value",
                    param="table",
                ) from None
        now = datetime.now(UTC)
        if expires_at is not None:
            if expires_at.tzinfo is None:
                raise InvalidCommandError(
                    "--expires needs a time zone (e.g. 2027-01-01T00:00Z)",
                    code="invalid_value",
                    param="expires",
                )
            if expires_at <= now:
                raise InvalidCommandError(
                    "--expires is in the past", code="invalid_value", param="expires"
                )
        token_id = secrets.token_hex(8)
        text = f"{token_id}.{secrets.token_urlsafe(32)}"
        entry = Token(
            token_id=token_id,
            role=role,
            table=table,
            created_at=now.isoformat(),
            expires_at=None if expires_at is None else expires_at.astimezone(UTC).isoformat(),
            revoked_at=None,
            sha256=_digest(text),
        )
        with self._locked() as tokens:
            tokens[token_id] = entry
        return text, entry

    def revoke(self, token_id: str) -> Token:
        # (The id only in the message: a token's text holds its secret after the dot.)
        unknown = NotFoundError(f"no token {token_id.partition('.')[0]!r}")
        if token_id not in self._read():  # before the lock: a mistake writes nothing
            raise unknown
        with self._locked() as tokens:
            entry = tokens.get(token_id)
            if entry is None:
                raise unknown
            if entry.revoked_at is None:
                entry = Token(**{**asdict(entry), "revoked_at": datetime.now(UTC).isoformat()})
                tokens[token_id] = entry
        return entry

    def list(self) -> list[Token]:
        return sorted(self._read().values(), key=lambda t: t.created_at)

    def authenticate(self, text: str, now: datetime | None = None) -> Token | None:
        """The usable token whose text this is, else None (unknown, wrong, revoked, expired)."""
        token_id, _, secret = text.partition(".")
        entry = self._read().get(token_id) if secret else None
        # Hash and compare even for an unknown id, so timing says nothing about ids.
        expected = entry.sha256 if entry is not None else "0" * 64
        matches = hmac.compare_digest(_digest(text), expected)
        if entry is None or not matches:
            return None
        return entry if entry.usable_at(now or datetime.now(UTC)) else None
