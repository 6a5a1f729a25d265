"""Where a key passphrase comes from: the environment, else one prompt per run.

A command may need the passphrase more than once (make the node's keys, then
open them to sign): what was typed is kept for the rest of the process, so a
first run asks once, and twice ("Again:") only when a key is made with it.
"""

from __future__ import annotations

import getpass
import os
import sys

from ledger.errors import KeyStoreError

_typed: bytes | None = None  # this process's typed passphrase
_confirmed = False  # typed twice alike


def read_passphrase(*, confirm: bool = False) -> bytes:
    from ledger.node import PASSPHRASE_ENV  # (the node: imported when a command runs)

    global _typed, _confirmed
    value = os.environ.get(PASSPHRASE_ENV)
    if value:
        return value.encode()
    if _typed is not None and (_confirmed or not confirm):
        return _typed
    if not sys.stdin.isatty():
        raise KeyStoreError(
            f"a key passphrase is needed: set {PASSPHRASE_ENV} or run on a terminal"
        )
    first = _typed.decode() if _typed is not None else getpass.getpass("Key passphrase: ")
    if not first:
        raise KeyStoreError("an empty passphrase is not allowed (see --unencrypted)")
    if confirm and getpass.getpass("Again: ") != first:
        raise KeyStoreError("the two passphrases differ")
    _typed, _confirmed = first.encode(), _confirmed or confirm
    return _typed
