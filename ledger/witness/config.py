"""A witness's directory: `witness.json` (its name and the logs it follows),
`keys/` (its own `witness` key, made by `ledger witness init` or `ledger keys
create --role witness`) and `state.db` (what it cosigned, `state.py`).

`witness.json`:

    {"name": "witness.example/w1", "key": "witness",
     "logs": {"casino-ledger": ["checkpoint+1a2b3c4d+AbC..."]}}

a log being its origin and the note verifier keys (type 0x01) it signs with.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ledger.crypto.cosignature import cosigner_verifier_key
from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.note import NoteError, check_key_name, parse_verifier_key
from ledger.crypto.signing import InMemorySigner
from ledger.errors import ConfigError

CONFIG_FILE = "witness.json"
STATE_FILE = "state.db"
KEY_NAME = "witness"


@dataclass
class WitnessConfig:
    directory: Path
    name: str
    key: str = KEY_NAME
    logs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def keys(self) -> KeyDirectory:
        return KeyDirectory(self.directory / "keys")

    @property
    def state_path(self) -> Path:
        return self.directory / STATE_FILE

    @classmethod
    def init(cls, directory: Path, name: str, passphrase: bytes | None) -> WitnessConfig:
        """A new witness: its directory, key and (empty) list of logs."""
        try:
            check_key_name(name)
        except NoteError as exc:
            raise ConfigError(f"witness name: {exc}") from None
        if (directory / CONFIG_FILE).exists():
            raise ConfigError(
                f"{directory / CONFIG_FILE} already exists: a witness is set up there"
            )
        config = cls(directory, name)
        config.keys.create(KEY_NAME, Role.WITNESS, passphrase)
        config.save()
        return config

    @classmethod
    def load(cls, directory: Path) -> WitnessConfig:
        path = directory / CONFIG_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(
                f"no {CONFIG_FILE} in {directory}: set a witness up with `ledger witness init`"
            ) from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        logs = data.get("logs") if isinstance(data, dict) else None
        if (
            not isinstance(data.get("name"), str)
            or not isinstance(data.get("key", KEY_NAME), str)
            or not isinstance(logs, dict)
            or not all(
                isinstance(keys, list) and all(isinstance(k, str) for k in keys)
                for keys in logs.values()
            )
        ):
            raise ConfigError(f"{path} is not a witness configuration (name, key, logs)")
        return cls(directory, data["name"], data.get("key", KEY_NAME), logs)

    def save(self) -> None:
        path = self.directory / CONFIG_FILE
        tmp = path.with_suffix(".tmp")
        data = {"name": self.name, "key": self.key, "logs": self.logs}
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)

    def add_log(self, origin: str, verifier_key: str) -> None:
        if not origin or "\n" in origin:
            raise ConfigError("a log's origin is one non-empty line")
        try:
            parse_verifier_key(verifier_key)
        except NoteError as exc:
            raise ConfigError(f"log key: {exc}") from None
        keys = self.logs.setdefault(origin, [])
        if verifier_key not in keys:
            keys.append(verifier_key)
        self.save()

    def log_keys(self) -> dict[str, list[tuple[str, bytes]]]:
        try:
            return {o: [parse_verifier_key(k) for k in keys] for o, keys in self.logs.items()}
        except NoteError as exc:
            raise ConfigError(f"{self.directory / CONFIG_FILE}: a log key: {exc}") from None

    def signer(self, passphrase: bytes | None) -> InMemorySigner:
        """The witness's key: a `witness` key, nothing else."""
        return self.keys.signer(Role.WITNESS, passphrase, self.key)

    def verifier_key(self) -> str:
        record = self.keys.choose(Role.WITNESS, self.key)
        return cosigner_verifier_key(self.name, record.public_key)
