"""A witness's directory: `witness.json` (its name and the logs it follows),
`keys/` (its own `witness` key, made by `ledger witness init` or `ledger keys
create --role witness`) and `state.db` (what it cosigned, `state.py`).

`witness.json`:

    {"name": "witness.example/w1", "key": "witness",
     "logs": {"casino-ledger": ["checkpoint+1a2b3c4d+AbC..."]}}

a log being its origin and the note verifier keys (type 0x01) it signs with.

`ledger witness init` makes all three: a witness always has a state from
its first day, so a directory with `witness.json` and no `state.db` is a
witness that lost what it cosigned (`ledger witness serve` refuses it).
Every file here is read as the user's input (`ledger.inputs`): a path under
a file, a JSON file of the wrong shape or a field of the wrong type is one
line, and reading creates nothing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.crypto.cosignature import cosigner_verifier_key
from ledger.crypto.keys import KEYRING_FILE, Role
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.note import NoteError, check_key_name, parse_verifier_key
from ledger.crypto.signing import InMemorySigner
from ledger.errors import ConfigError
from ledger.inputs import existing_directory, json_kind, output_directory, read_json_object

CONFIG_FILE = "witness.json"
STATE_FILE = "state.db"
KEY_NAME = "witness"
KEYS_DIRECTORY = "keys"


@dataclass
class WitnessConfig:
    directory: Path
    name: str
    key: str = KEY_NAME
    logs: dict[str, list[str]] = field(default_factory=dict)

    @property
    def keys(self) -> KeyDirectory:
        return KeyDirectory(self.directory / KEYS_DIRECTORY)

    @property
    def state_path(self) -> Path:
        return self.directory / STATE_FILE

    @staticmethod
    def check_new(directory: Path, name: str) -> None:
        """`directory` can take a new witness named `name`: refused in one line,
        creating nothing, before any passphrase is asked."""
        try:
            check_key_name(name)
        except NoteError as exc:
            raise ConfigError(f"witness name: {exc}") from None
        output_directory(directory, "set a witness up in")
        if (directory / CONFIG_FILE).exists():
            raise ConfigError(
                f"{directory / CONFIG_FILE} already exists: a witness is set up there"
            )
        if (directory / STATE_FILE).exists():
            raise ConfigError(
                f"{directory / STATE_FILE} already exists: another witness's state is there"
            )
        if directory.exists():
            output_directory(directory / KEYS_DIRECTORY, "make the witness's keys in")

    @classmethod
    def init(cls, directory: Path, name: str, passphrase: bytes | None) -> WitnessConfig:
        """A new witness: its directory, key, (empty) list of logs and its state."""
        from ledger.witness.state import WitnessState

        cls.check_new(directory, name)
        config = cls(directory, name)
        config.keys.create(KEY_NAME, Role.WITNESS, passphrase)
        config.save()
        WitnessState(config.state_path).close()
        return config

    @classmethod
    def load(cls, directory: Path) -> WitnessConfig:
        path = directory / CONFIG_FILE
        never_made = not directory.exists() and directory.parent.is_dir()
        if never_made or (directory.is_dir() and not path.exists()):
            raise ConfigError(
                f"no {CONFIG_FILE} in {directory}: set a witness up with `ledger witness init`"
            )
        existing_directory(directory, "witness directory")
        data = read_json_object(path, "witness configuration")
        where = f"witness configuration {path}"
        return cls(
            directory,
            _key_name(data, "name", where),
            _key_name(data, "key", where, default=KEY_NAME),
            _logs(data, where),
        )

    def save(self) -> None:
        path = self.directory / CONFIG_FILE
        tmp = path.with_suffix(".tmp")
        data = {"name": self.name, "key": self.key, "logs": self.logs}
        try:
            tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp, path)
        except OSError as exc:
            raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None

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
        return self._witness_keys().signer(Role.WITNESS, passphrase, self.key)

    def verifier_key(self) -> str:
        record = self._witness_keys().choose(Role.WITNESS, self.key)
        return cosigner_verifier_key(self.name, record.public_key)

    def _witness_keys(self) -> KeyDirectory:
        """Its keys directory, refused in one line when it is not there."""
        keys = self.keys
        existing_directory(keys.path, "the witness's keys directory")
        if not keys.keyring_path.is_file():
            raise ConfigError(
                f"no {KEYRING_FILE} in the witness's keys directory {keys.path}: its key is "
                f"made by `ledger witness init` (or `ledger --keys {keys.path} keys create "
                "--role witness`)"
            )
        return keys


def _key_name(data: dict[str, Any], field: str, where: str, default: str | None = None) -> str:
    """A name in `witness.json` that goes into a key or a cosignature line."""
    value = data.get(field, default)
    if type(value) is not str:
        raise ConfigError(f"{where}: {field!r} must be a string, not {json_kind(value)}")
    try:
        return check_key_name(value)
    except NoteError as exc:
        raise ConfigError(f"{where}: {field!r}: {exc}") from None


def _logs(data: dict[str, Any], where: str) -> dict[str, list[str]]:
    logs = data.get("logs")
    if type(logs) is not dict:
        raise ConfigError(
            f"{where}: 'logs' must be an object (origin: [keys]), not {json_kind(logs)}"
        )
    for origin, keys in logs.items():
        if type(keys) is not list or not all(type(k) is str for k in keys):
            raise ConfigError(f"{where}: the keys of log {origin!r} must be a list of strings")
    return logs
