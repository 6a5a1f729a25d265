"""`ledger migrate [--dry-run]`: end every round still open under settlement
API 1 (release 0.2 and before) after an upgrade, so the write path has one
generation: a round with its outcome recorded is settled on it, any other is
voided (every stake back), signed by an operator key. One commit for all;
nothing recorded on a refusal; run again, it finds nothing to do
(`ledger.casino.migrate`)."""

from __future__ import annotations

import argparse
import json
from functools import partial
from typing import TYPE_CHECKING, Any

from ledger.cli.common import WithLedger, loaded_plugins
from ledger.cli.passphrase import read_passphrase
from ledger.cli.rounds import operator_signer
from ledger.domain.currency import format_major
from ledger.domain.names import MAX_TEXT, check_name

if TYPE_CHECKING:
    from ledger.casino.migrate import Migration
    from ledger.casino.opened import Ledger


def cmd_migrate(args: argparse.Namespace) -> WithLedger:
    from ledger.casino.migrate import REASON

    reason = check_name(
        REASON if args.reason is None else args.reason, "--reason", limit=MAX_TEXT, param="reason"
    )
    plugins = loaded_plugins()  # a broken plugin fails before a passphrase is asked for
    if args.dry_run:
        return WithLedger(_dry_run, plugins=plugins)
    passphrase = read_passphrase()
    return WithLedger(
        partial(_migrate, args, reason, passphrase),
        writable=True,
        passphrase=passphrase,
        plugins=plugins,
    )


def _dry_run(ledger: Ledger) -> int:
    found = ledger.casino.rounds_to_migrate()
    for migration in found:
        print(_line(migration, dry=True))
    print(f"dry run: {_summary(found, 'to settle', 'to void')}; nothing recorded")
    return 0


def _migrate(args: argparse.Namespace, reason: str, passphrase: bytes, ledger: Ledger) -> int:
    from ledger.casino.migrate import VOID
    from ledger.crypto.keystore import keys_dir

    casino = ledger.casino
    found = casino.rounds_to_migrate()
    operator = (
        operator_signer(keys_dir(args.keys), args.operator_key, passphrase)
        if any(m.action == VOID for m in found)
        else None
    )
    done = casino.migrate(reason=reason, operator=operator) if found else []
    signed = f", signed by operator key {operator.key_id[:16]}" if operator else ""
    for migration in done:
        print(_line(migration, dry=False) + (signed if migration.action == VOID else ""))
    if done:
        print(f"migrated {_summary(done, 'settled', 'voided')}: none is left open under it")
    else:
        print(f"{_summary(done, 'settled', 'voided')}: nothing to migrate")
    return 0


def _line(m: Migration, dry: bool) -> str:
    money = f"{format_major(m.returned, m.currency)} {m.currency}"
    bets = f"{m.bets} bet{'s' * (m.bets != 1)}"
    if m.action == "settle":
        verb = "would settle" if dry else "settled"
        outcome = json.dumps(m.outcome, sort_keys=True)
        return (
            f"{verb} round {m.round_id} ({m.game}) on its recorded outcome {outcome}: "
            f"{bets}, {money} returned"
        )
    verb = "would void" if dry else "voided"
    faults = f", {m.faults} faulty draw{'s' * (m.faults != 1)}" if m.faults else ""
    return (
        f"{verb} round {m.round_id} ({m.game}, {m.status}{faults}): {bets}, "
        f"{money} in stakes returned"
    )


def _summary(found: list[Migration], settled: str, voided: str) -> str:
    if not found:
        return "no round is open under settlement API 1"
    settles = sum(m.action == "settle" for m in found)
    count = f"{len(found)} round{'s' * (len(found) != 1)} open under settlement API 1"
    return f"{count} ({settles} {settled}, {len(found) - settles} {voided})"


def add_migrate_command(commands: Any) -> None:
    parser = commands.add_parser(
        "migrate",
        help="after an upgrade: settle or void every round still open under settlement API 1",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="list what it would do; record nothing"
    )
    parser.add_argument(
        "--reason",
        help="why the rounds without an outcome are voided (signed and recorded; "
        "default: settlement API 1 retired by ledger migrate)",
    )
    parser.add_argument(
        "--operator-key",
        metavar="NAME",
        help="the operator key signing the voids (default: the only one held)",
    )
    parser.set_defaults(handler=cmd_migrate)
