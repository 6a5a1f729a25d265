"""`ledger erase SUBJECT --reason TEXT`: erase a data subject's personal data
(docs/privacy.md): an operator-signed event naming the subject, then its key
destroyed. Every proof stays valid; the subject's values read as [erased].
`ledger privacy report`: the personal values the log holds in clear (recorded
before sealing), which cannot be erased."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.cli.common import WithLedger
from ledger.cli.passphrase import read_passphrase
from ledger.cli.rounds import operator_signer
from ledger.domain.names import MAX_TEXT, check_name
from ledger.errors import NotFoundError

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger


def subject_named(given: str) -> str:
    """A subject id as given, or an account id (its owner's subject)."""
    from ledger.privacy.subject_keys import account_subject, check_subject

    try:
        return account_subject(str(UUID(given)))
    except ValueError:
        return check_subject(given)


def cmd_erase(args: argparse.Namespace) -> WithLedger:
    from ledger.crypto.keystore import keys_dir

    if (args.subject is None) == (args.dealer is None):
        raise NotFoundError("name one data subject: SUBJECT (or an account id), or --dealer NAME")
    subject = None if args.subject is None else subject_named(args.subject)
    reason = check_name(args.reason, "--reason", limit=MAX_TEXT, param="reason")
    passphrase = read_passphrase()
    # The operator key first: a wrong key or passphrase fails before the store opens.
    operator = operator_signer(keys_dir(args.keys), args.operator_key, passphrase)
    run = partial(_erase, subject, args.dealer, reason, operator)
    return WithLedger(run, writable=True, passphrase=passphrase)


def _erase(
    subject: str | None, dealer: str | None, reason: str, operator: Any, ledger: Ledger
) -> int:
    from ledger.erasure import erase_subject

    app = ledger.node.app
    assert app.personal is not None  # every opened node has its key store
    if subject is None:
        assert dealer is not None
        subject = app.personal.dealer_subject(dealer)
        if subject is None:
            raise NotFoundError(f"no dealer {dealer!r} on this node")
    erased = erase_subject(app, app.personal, subject, reason, operator)
    print(
        f"erased data subject {erased.subject}: the erasure recorded, signed by operator key "
        f"{erased.operator_key[:16]}; "
        + ("its key destroyed" if erased.key_destroyed else "no key for it was left here")
        + "; its values now read as [erased], every signature and proof unchanged"
    )
    return 0


def cmd_privacy_report(args: argparse.Namespace) -> WithLedger:
    def run(ledger: Ledger) -> int:
        from ledger.audit.clear_values import clear_values

        found = list(clear_values(ledger.node.app))
        for value in found:
            if args.json:
                print(json.dumps(dataclasses.asdict(value)))
            else:
                print(
                    f"{value.position:>9}  {value.event:<15} {value.field:<7} {value.stream}  "
                    "in clear: cannot be erased"
                )
        print(
            f"{len(found)} personal value{'s' * (len(found) != 1)} recorded in clear (before "
            "sealing): they cannot be erased without breaking every proof above them; every "
            "other owner and dealer is sealed and can be erased (ledger erase)"
            if found
            else "no personal value is recorded in clear: every owner and dealer is sealed "
            "and can be erased (ledger erase)",
            file=sys.stderr if args.json else sys.stdout,
        )
        return 0

    return WithLedger(run)


def add_erase_command(commands: Any) -> None:
    parser = commands.add_parser(
        "erase",
        help="erase a data subject's personal data: an operator-signed event, its key destroyed",
    )
    parser.add_argument(
        "subject",
        nargs="?",
        metavar="SUBJECT",
        help="the data subject: account-<id> (or the account id), or dealer-<id>",
    )
    parser.add_argument(
        "--dealer", metavar="NAME", help="the dealer called NAME, instead of SUBJECT"
    )
    parser.add_argument(
        "--reason", required=True, help="why (signed and recorded; no personal data)"
    )
    parser.add_argument(
        "--operator-key",
        metavar="NAME",
        help="the operator key signing it (default: the only one held)",
    )
    parser.set_defaults(handler=cmd_erase)
    privacy = commands.add_parser("privacy", help="personal data in the log (docs/privacy.md)")
    report = privacy.add_subparsers(dest="privacy_command", required=True).add_parser(
        "report", help="the personal values recorded in clear, before sealing: not erasable"
    )
    report.add_argument("--json", action="store_true", help="one JSON object a line")
    report.set_defaults(handler=cmd_privacy_report)
