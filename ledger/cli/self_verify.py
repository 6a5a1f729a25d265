"""`--self-verify-every DURATION`: the scheduled self-verification that a running
node (`ledger serve`, `ledger checkpoint --follow`) starts in a process of its
own (`ledger.http.self_verification_process`; docs/operations.md)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ledger.cli.args import SELF_VERIFY_DEFAULT, duration_or_off
from ledger.crypto.roles import Role
from ledger.errors import ConfigError

if TYPE_CHECKING:
    from ledger.http.side_process import SideProcess
    from ledger.node import Node


def add_self_verify_option(parser: argparse.ArgumentParser, who: str) -> None:
    """`--self-verify-every`, as `serve` and `checkpoint --follow` take it (0: off)."""
    parser.add_argument(
        "--self-verify-every",
        type=duration_or_off,
        metavar="DURATION",
        help=f"{who} verifies what is new in the log this often and records each run "
        "(30s, 15m, 24h, 1d; off; default 24h; docs/operations.md)",
    )


def announce(every: int) -> None:
    print(
        f"self-verifying the log every {said(every)} (each run recorded in the log: "
        "ledger events --significant)",
        file=sys.stderr,
    )


def said(seconds: int) -> str:
    """A period as `--self-verify-every` takes it: 86400 -> "1d", 90 -> "90s"."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def refuse_without_follow(args: argparse.Namespace) -> None:
    """Bad input, said before anything is opened: a schedule only runs beside --follow."""
    if args.self_verify_every is not None and not args.follow:
        raise ConfigError("--self-verify-every runs beside --follow: give both, or neither")


def plan_beside_follow(
    args: argparse.Namespace, node: Node
) -> tuple[int, Callable[[], SideProcess]] | None:
    """`checkpoint --follow`'s self-verification, checked now (before it says it
    follows): its period and what starts its process, or None (off). Its runs are sealed by
    the ledger-node key: asked for with no such key here, refused; by default,
    off and said in one line (a checkpointing service beside writers may hold
    the checkpoint key alone)."""
    from ledger.cli.passphrase import read_passphrase
    from ledger.http import self_verification_process
    from ledger.node import PASSPHRASE_ENV, holds_private_key
    from ledger.store.config import store_url

    given = args.self_verify_every
    if not args.follow or given == 0:
        return None
    if not holds_private_key(node.keys, node.keyring, Role.LEDGER_NODE):
        if given is not None:
            raise ConfigError(
                "--self-verify-every records each run sealed by the ledger-node key, "
                f"and {node.keys.path} holds none"
            )
        print(
            "self-verification is off: this keys directory holds no ledger-node key "
            "to record its runs with (run it on a node: ledger serve)",
            file=sys.stderr,
        )
        return None
    every = SELF_VERIFY_DEFAULT if given is None else int(given)
    env = {**os.environ, "LEDGER_STORE": store_url(args.store), "LEDGER_KEYS": str(node.keys.path)}
    if node.keys.encrypted(Role.LEDGER_NODE):
        passphrase = node.passphrase if node.passphrase is not None else read_passphrase()
        node.keys.signer(Role.LEDGER_NODE, passphrase)  # a wrong passphrase: one line, now
        env[PASSPHRASE_ENV] = passphrase.decode()

    def start() -> SideProcess:
        return self_verification_process.start(every, None, env)

    return every, start
