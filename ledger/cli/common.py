"""What every `ledger` command shares: opening the node, reading a passphrase."""

from __future__ import annotations

import argparse

from ledger.cli.passphrase import read_passphrase
from ledger.errors import ConfigError
from ledger.node import Node, keys_dir, open_node


def check_keys_path(given: str | None) -> None:
    """The keys directory may be missing (simulate creates it), never a file."""
    path = keys_dir(given).path
    if path.exists() and not path.is_dir():
        raise ConfigError(f"keys directory {path} is a file, not a directory")


def passphrase_for(args: argparse.Namespace, *, confirm: bool = False) -> bytes | None:
    return None if getattr(args, "unencrypted", False) else read_passphrase(confirm=confirm)


def open_from_args(
    args: argparse.Namespace, *, writable: bool, passphrase: bytes | None = None
) -> Node:
    directory = keys_dir(args.keys)
    directory.keyring()  # fail on missing keys before asking for a passphrase
    if writable and passphrase is None:
        passphrase = read_passphrase()
    return open_node(args.store, args.keys, passphrase=passphrase, writable=writable)
