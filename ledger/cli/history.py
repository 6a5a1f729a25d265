"""`ledger history ACCOUNT [--last N | --since DATE]`: an account's rounds in a
span, proven complete against a signed checkpoint; `--out FILE` writes the
proof; `ledger history --check FILE` checks one with the public keyring alone
(docs/history.md). Exit 0 when the proof checks, 1 when it does not, 2 for bad
input (an unknown account, a span that is not a date, a file that is not a proof)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.cli.args import uuid_text
from ledger.cli.common import WithLedger
from ledger.domain.asked_by import describe_asked
from ledger.errors import ConfigError

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.history.check import CheckedHistory

CHECKED = (
    "the checkpoint's signature, by the log's checkpoint key",
    "the account's head: in the account heads map the checkpoint signs (not a stale one)",
    "every event from the head back: the one its successor's prev hash names, of this "
    "account, its payload the one its header signs, signed by a ledger-node key",
    "the span: every event up to its boundary, or to the account's first event",
    "who asked: each request record shown, signed by a ledger-node key and recording the "
    "movement's request (a deposit's, a withdrawal's, a stake's bet)",
)
NOT_CHECKED = (
    "the keys' validity windows and revocations (`ledger verify` judges them)",
    "the rounds' own events and payouts (`ledger recall ROUND` replays one)",
)


def render(checked: CheckedHistory, proof: dict[str, Any]) -> str:
    checkpoint = checked.checkpoint
    extent = "the account's whole history" if checked.whole else "to the span's boundary"
    lines = [
        f"account {checked.account}: {checked.span.describe()}, {len(checked.rounds)} "
        f"round(s), proven complete ({extent}) against the checkpoint of size "
        f"{checkpoint.size} issued {checkpoint.issued_at.isoformat()}",
        "",
        f"{'round':<38}{'debited':>16}{'credited':>16}   (minor units)",
    ]
    for entry in checked.rounds:
        lines.append(f"{entry['round']:<38}{entry['debited']:>16}{entry['credited']:>16}")
    lines += ["", f"{len(checked.movements)} movement(s):"]
    for movement in checked.movements:
        amount = "" if movement.amount is None else f" {movement.amount}"
        about = f" round {movement.round}" if movement.round else ""
        if movement.version in checked.asked:
            about += f", asked {describe_asked(checked.asked[movement.version])}"
        lines.append(
            f"  v{movement.version:<5} {movement.at.isoformat(timespec='seconds')}  "
            f"{movement.type}{amount}{about}"
        )
    lines += ["", "CHECKED"] + [f"  {line}" for line in CHECKED]
    lines += ["NOT CHECKED HERE"] + [f"  {line}" for line in NOT_CHECKED]
    return "\n".join(lines)


def _show(checked: CheckedHistory, proof: dict[str, Any], as_json: bool) -> int:
    print(json.dumps(proof, indent=2) if as_json else render(checked, proof))
    return 0


def cmd_history(args: argparse.Namespace) -> WithLedger | int:
    if args.check is not None:
        if args.account is not None or args.last is not None or args.since is not None:
            raise ConfigError("--check FILE checks a proof: give no account, --last or --since")
        return _check_file(args)
    if args.account is None:
        raise ConfigError("name the account (or --check FILE)")
    from ledger.history.span import Span

    span = Span.of(args.last, args.since)  # bad input fails before the store is opened
    out = Path(args.out) if args.out else None
    if out is not None and out.exists():
        raise ConfigError(f"{out} exists: give a new file")

    def run(ledger: Ledger) -> int:
        from ledger.history.check import check_history
        from ledger.history.proof import history_proof

        node = ledger.node
        proof = history_proof(node.app, node.keyring, args.account, span)
        if out is not None:
            with out.open("x") as file:  # whole or not at all: a new file
                json.dump(proof, file, indent=1)
        return _show(check_history(proof, node.keyring), proof, args.json)

    return WithLedger(run)


def _check_file(args: argparse.Namespace) -> int:
    from ledger.crypto.keys import Keyring
    from ledger.crypto.keystore import keys_dir
    from ledger.history.check import check_history

    path = Path(args.check)
    try:
        proof = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path} is not a history proof: {exc}") from None
    keyring = Keyring.load(Path(args.keyring)) if args.keyring else keys_dir(args.keys).keyring()
    try:
        checked = check_history(proof, keyring)
    except ValueError as exc:
        raise ConfigError(f"{path} is not a history proof: {exc}") from None
    return _show(checked, proof, args.json)


def add_history_command(commands: Any) -> None:
    history = commands.add_parser(
        "history", help="an account's rounds in a span, proven complete (docs/history.md)"
    )
    history.add_argument("account", nargs="?", type=uuid_text, help="the account id")
    history.add_argument("--last", type=int, metavar="N", help="the last N rounds (default 10)")
    history.add_argument(
        "--since", metavar="DATE", help="every round since DATE (YYYY-MM-DD, UTC, or ISO 8601)"
    )
    history.add_argument("--out", metavar="FILE", help="also write the proof to FILE (new)")
    history.add_argument("--json", action="store_true", help="print the proof (JSON)")
    history.add_argument("--check", metavar="FILE", help="check a proof file instead")
    history.add_argument(
        "--keyring", metavar="FILE", help="with --check: your copy of the public keyring"
    )
    history.set_defaults(handler=cmd_history)
