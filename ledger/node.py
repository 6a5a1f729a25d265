"""The Python API underneath the CLI: open a ledger node from its settings."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.keystore import KeyDirectory
from ledger.store.application import LedgerApplication
from ledger.store.checkpointer import DEFAULT_ORIGIN, Checkpointer
from ledger.store.config import store_url

KEYS_ENV = "LEDGER_KEYS"
DEFAULT_KEYS = "keys"
PASSPHRASE_ENV = "LEDGER_PASSPHRASE"
ORIGIN_ENV = "LEDGER_ORIGIN"


def keys_dir(given: str | None = None) -> KeyDirectory:
    return KeyDirectory(Path(given or os.environ.get(KEYS_ENV) or DEFAULT_KEYS))


def origin() -> str:
    return os.environ.get(ORIGIN_ENV) or DEFAULT_ORIGIN


@dataclass
class Node:
    """An open ledger: the sealed application, its keys, and a checkpointer."""

    app: LedgerApplication
    keys: KeyDirectory
    keyring: Keyring
    passphrase: bytes | None

    def checkpointer(self, batch_size: int = 1000) -> Checkpointer:
        return Checkpointer(
            self.app.tables,
            signer=self.keys.signer(Role.CHECKPOINT, self.passphrase),
            signer_check=SignerCheck(self.keyring),
            origin=origin(),
            batch_size=batch_size,
        )

    def close(self) -> None:
        self.app.close()


def open_node(
    store: str | None = None,
    keys: str | None = None,
    *,
    passphrase: bytes | None = None,
    writable: bool = True,
) -> Node:
    """Open the store; with `writable`, load the ledger-node signing key first
    (so a wrong passphrase fails before anything touches the store)."""
    directory = keys_dir(keys)
    keyring = directory.keyring()
    signer = directory.signer(Role.LEDGER_NODE, passphrase) if writable else None
    app = LedgerApplication(
        store_url(store),
        keyring=keyring,
        signer=signer,
        create=writable,
        keyring_source=directory.keyring,
    )
    return Node(app, directory, keyring, passphrase)
