"""`ledger rounds void|resume ROUND --reason TEXT`: an operator ends or resumes
an interrupted round from the command line.

Both go through `Casino.void_round` / `Casino.resume_round`, so the checks are
the API's: the key must be an operator key of the keyring, valid now; the round
must be in a state the variant allows; the reason is signed with the operator's
own key, and nothing is recorded when any check fails.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from ledger.cli.args import uuid_text
from ledger.cli.common import open_from_args
from ledger.cli.passphrase import read_passphrase
from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.signing import InMemorySigner
from ledger.domain.currency import format_major
from ledger.domain.names import MAX_TEXT, check_name
from ledger.node import keys_dir


def operator_signer(directory: KeyDirectory, name: str | None, passphrase: bytes) -> InMemorySigner:
    """The operator key named `name`, else the one valid operator key held here
    (a revoked or expired key signs nothing, so it is no choice)."""
    return directory.signer(Role.OPERATOR, passphrase, name)


def cmd_round_action(args: argparse.Namespace) -> int:
    from ledger.casino import Casino
    from ledger.plugins.manager import get_plugin_manager

    reason = check_name(args.reason, "--reason", limit=MAX_TEXT)
    variants = get_plugin_manager().variants()
    passphrase = read_passphrase()
    # The operator key first: a wrong key or passphrase fails before the store opens.
    operator = operator_signer(keys_dir(args.keys), args.operator_key, passphrase)
    node = open_from_args(args, writable=True)
    try:
        casino = Casino(node.app, variants)
        request_id = args.request_id or f"cli-{args.action}-{uuid.uuid4()}"
        if args.action == "void":
            returns = casino.void_round(
                request_id=request_id, round_id=args.round, reason=reason, operator=operator
            )
            staked = sum(r["stake"] for r in returns)
            currency = casino.round(args.round).currency
            print(
                f"voided round {args.round}: {len(returns)} stake{'s' * (len(returns) != 1)} "
                f"returned ({format_major(staked, currency)} {currency}), "
                f"signed by operator key {operator.key_id[:16]}"
            )
        else:
            casino.resume_round(
                request_id=request_id, round_id=args.round, reason=reason, operator=operator
            )
            print(f"resumed round {args.round}, signed by operator key {operator.key_id[:16]}")
    finally:
        node.close()
    return 0


def add_round_actions(rounds: argparse.ArgumentParser) -> None:
    """`void` and `resume` under `ledger rounds` (which keeps its own --open listing)."""
    actions: Any = rounds.add_subparsers(dest="action", metavar="{void,resume}")
    for action, text in (
        ("void", "void an interrupted round: every stake back to its wallet"),
        ("resume", "resume an interrupted round where it stopped"),
    ):
        parser = actions.add_parser(action, help=text)
        parser.add_argument(
            "round", type=uuid_text, help="the round id (see `ledger rounds --open`)"
        )
        parser.add_argument(
            "--reason", required=True, help="why (signed, recorded, shown to auditors)"
        )
        parser.add_argument(
            "--operator-key", metavar="NAME", help="the operator key (default: the only one held)"
        )
        parser.add_argument("--request-id", help="idempotency key (default: a new one)")
        parser.set_defaults(handler=cmd_round_action)
