"""Where a key passphrase comes from: the environment, else a prompt."""

from __future__ import annotations

import getpass
import os
import sys

from ledger.errors import KeyStoreError
from ledger.node import PASSPHRASE_ENV


def read_passphrase(*, confirm: bool = False) -> bytes:
    value = os.environ.get(PASSPHRASE_ENV)
    if value:
        return value.encode()
    if not sys.stdin.isatty():
        raise KeyStoreError(
            f"a key passphrase is needed: set {PASSPHRASE_ENV} or run on a terminal"
        )
    first = getpass.getpass("Key passphrase: ")
    if not first:
        raise KeyStoreError("an empty passphrase is not allowed (see --unencrypted)")
    if confirm and getpass.getpass("Again: ") != first:
        raise KeyStoreError("the two passphrases differ")
    return first.encode()
