"""`ledger retention plan|apply --policy FILE`: retention as policy (docs/retention.md).
`plan` lists what the policy makes due and why (`--at DATE`: as of another
day); `apply` erases the personal data due, each erasure operator-signed and
recorded as a significant event. Exit 0 done, 2 bad input (a malformed or
self-contradicting policy, a date that is not one): nothing erased."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.cli.common import WithLedger
from ledger.cli.passphrase import read_passphrase
from ledger.cli.rounds import operator_signer
from ledger.errors import ConfigError
from ledger.inputs import parse_moment

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.retention.plan import RetentionPlan
    from ledger.retention.policy import Policy


def _at(text: str | None) -> datetime:
    return datetime.now(UTC) if text is None else parse_moment(text, "--at")


def render(plan: RetentionPlan) -> str:
    lines = [f"policy: {plan.policy.describe()}", f"as of {plan.at.isoformat()}:"]
    for due in plan.due:
        lines.append(
            f"  erase {due.subject}: {due.ended} {due.ended_at.date().isoformat()}, "
            f"due {due.due_at.date().isoformat()}"
        )
    if not plan.due:
        lines.append("  no personal data is due for erasure")
    if plan.later:
        first = plan.later[0]
        lines.append(
            f"  not yet due: {len(plan.later)} subject(s), the next {first.subject} on "
            f"{first.due_at.date().isoformat()}"
        )
    lines.append(
        f"  relationships going on (open accounts): {plan.ongoing}; erased already: {plan.erased}"
    )
    lines.append(
        f"  game records: {plan.rounds_past_keep} round(s) kept as long as the policy asks, "
        f"{plan.rounds_kept} still within it"
    )
    if plan.archive_before is None:
        lines.append("  archive: the policy archives nothing (no [archive] table)")
    else:
        lines.append(
            f"  archive: {plan.rounds_to_archive} finished round(s) last written before "
            f"{plan.archive_before.isoformat(timespec='seconds')} leave the live store for an "
            "archive on apply (--archive-to DIR; docs/archive.md)"
        )
    return "\n".join(lines)


def _load(args: argparse.Namespace) -> Policy:
    from ledger.retention.policy import load_policy

    return load_policy(Path(args.policy))


def cmd_plan(args: argparse.Namespace) -> WithLedger:
    policy, at = _load(args), _at(args.at)

    def run(ledger: Ledger) -> int:
        from ledger.retention.plan import plan_retention

        plan = plan_retention(ledger.node.app, policy, at)
        print(json.dumps(plan.to_json(), indent=2) if args.json else render(plan))
        return 0

    return WithLedger(run)


def cmd_apply(args: argparse.Namespace) -> WithLedger:
    from ledger.crypto.keystore import keys_dir

    policy = _load(args)
    if policy.archive_after_days is not None and args.archive_to is None:
        raise ConfigError(
            f"the policy archives finished rounds after {policy.archive_after_days} days: "
            "give --archive-to DIR (a new or empty directory)"
        )
    passphrase = read_passphrase()
    operator = operator_signer(keys_dir(args.keys), args.operator_key, passphrase)
    archive_to = None if args.archive_to is None else Path(args.archive_to)
    run = partial(_apply, policy, operator, archive_to)
    return WithLedger(run, writable=True, passphrase=passphrase)


def _apply(policy: Policy, operator: Any, archive_to: Path | None, ledger: Ledger) -> int:
    from ledger.retention.apply import apply_retention
    from ledger.retention.plan import plan_retention

    app = ledger.node.app
    assert app.personal is not None  # every opened node has its key store
    plan = plan_retention(app, policy, datetime.now(UTC))
    applied = apply_retention(app, app.personal, plan, operator)
    for erased in applied.erased:
        print(
            f"erased {erased.subject}: signed by operator key {erased.operator_key[:16]}, "
            "recorded in the log, its key destroyed"
        )
    for due in applied.not_held:
        print(f"not erased here: {due.subject} (no key for it on this node: erase it where it is)")
    print(
        f"{len(applied.erased)} subject(s) erased under {policy.jurisdiction}'s policy; "
        f"{len(plan.later)} not yet due"
    )
    if plan.archive_before is not None and archive_to is not None:
        from ledger.archive.run import archive_rounds

        done = archive_rounds(ledger.node, plan.archive_before, archive_to)
        if done.archive is None:
            print(f"archive: no finished round last written before {plan.archive_before}")
        else:
            print(
                f"archived {done.events} events of {done.rounds} finished rounds into "
                f"{done.directory} (archive {done.archive}, recorded in the archive register)"
            )
    return 0


def add_retention_commands(commands: Any) -> None:
    retention = commands.add_parser(
        "retention", help="retention as policy: what is due, and the erasures it makes"
    )
    actions = retention.add_subparsers(dest="retention_command", required=True)
    plan = actions.add_parser("plan", help="list what the policy makes due, and why")
    plan.add_argument("--policy", required=True, metavar="FILE", help="the policy (TOML)")
    plan.add_argument("--at", metavar="DATE", help="as of DATE (default: now)")
    plan.add_argument("--json", action="store_true", help="JSON")
    plan.set_defaults(handler=cmd_plan)
    apply = actions.add_parser("apply", help="erase the personal data due, each erasure signed")
    apply.add_argument("--policy", required=True, metavar="FILE", help="the policy (TOML)")
    apply.add_argument(
        "--operator-key", metavar="NAME", help="the operator key signing (default: the only one)"
    )
    apply.add_argument(
        "--archive-to",
        metavar="DIR",
        help="where the rounds the policy's [archive] makes due go (a new or empty directory)",
    )
    apply.set_defaults(handler=cmd_apply)
