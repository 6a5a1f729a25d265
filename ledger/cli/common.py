"""What every `ledger` command shares: the one opened ledger it is handed,
the installed games, a passphrase.

A command that works on the ledger checks its input first (bad input fails
before a passphrase is asked for or the store is touched), then answers
`WithLedger`: what to run on the ledger and how to open it. `ledger.cli.main`
opens that one ledger (`run_with_ledger`), hands it to the command and closes
it, whatever happens. Commands that read a store as an auditor (`verify`,
`report`, `mirror`) open no node: only the public keyring they are given is
trusted.

Imported by the commands' parsers: the node and the ledger are imported when
a command opens them, never to build the parser (ledger.cli.main).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ledger.cli.passphrase import read_passphrase
from ledger.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledger.audit.level import Level
    from ledger.casino.opened import Ledger
    from ledger.plugins.manager import Plugins
    from ledger.plugins.registry import LoadedGame


def check_keys_path(given: str | None) -> None:
    """The keys directory may be missing (simulate creates it), never a file."""
    from ledger.crypto.keystore import keys_dir

    path = keys_dir(given).path
    if path.exists() and not path.is_dir():
        raise ConfigError(f"keys directory {path} is a file, not a directory")


def passphrase_for(args: argparse.Namespace, *, confirm: bool = False) -> bytes | None:
    return None if getattr(args, "unencrypted", False) else read_passphrase(confirm=confirm)


def add_reveal_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--reveal",
        action="store_true",
        help=f"show {what} in clear (personal data, sealed in the log: asks for the key "
        "passphrase); without it they show as [sealed]",
    )


def revealer(args: argparse.Namespace, keys_path: Path) -> Callable[[str, object], str]:
    """How a command shows a personal value: in clear with `--reveal` (the
    vault opened with the passphrase), else `[sealed]` (docs/privacy.md)."""
    from ledger.privacy.personal import PersonalData, shown

    if not getattr(args, "reveal", False):
        return lambda _field, value: shown(value)
    return PersonalData(keys_path, read_passphrase()).reveal


@dataclass(frozen=True)
class WithLedger:
    """What a command runs on the ledger once `main` has opened it for it:
    read-only unless `writable` (then signed with the node key `passphrase`
    unlocks, read now when None), with the installed games a command loaded
    first (`loaded_plugins`) when it needs them."""

    run: Callable[[Ledger], int]
    writable: bool = False
    passphrase: bytes | None = None
    plugins: Plugins | None = None


def run_with_ledger(args: argparse.Namespace, command: WithLedger) -> int:
    """Open the one ledger `command` runs on, run it, close the ledger."""
    with open_ledger_from_args(
        args,
        writable=command.writable,
        passphrase=command.passphrase,
        plugins=command.plugins,
    ) as ledger:
        return command.run(ledger)


def open_ledger_from_args(
    args: argparse.Namespace,
    *,
    writable: bool,
    passphrase: bytes | None = None,
    plugins: Plugins | None = None,
) -> Ledger:
    """The ledger `--store`/`--keys` (or their settings) name, by `open_ledger`."""
    from ledger.casino.opened import open_ledger
    from ledger.crypto.keystore import keys_dir

    directory = keys_dir(args.keys)
    directory.keyring()  # fail on missing keys before asking for a passphrase
    if writable and passphrase is None:
        passphrase = read_passphrase()
    return open_ledger(
        args.store, args.keys, passphrase=passphrase, writable=writable, plugins=plugins
    )


def loaded_plugins() -> Plugins:
    """The installed plugins, their games built now, so that a broken plugin
    fails (one line) before a passphrase is asked for or a store is opened: the
    one place the commands load plugins (an opened ledger is handed these)."""
    from ledger.plugins.manager import get_plugin_manager

    plugins = get_plugin_manager()
    plugins.games()
    return plugins


def games_at(level: Level) -> Mapping[str, LoadedGame] | None:
    """The games `verify` re-derives rounds with: at level settlement, else none."""
    from ledger.audit.level import Level

    return loaded_plugins().games() if level is Level.SETTLEMENT else None
