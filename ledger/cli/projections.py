"""`ledger projections rebuild|update`, `ledger balances`, `ledger rounds`.

None of these signs anything, so all open the node read-only (no signing key,
no passphrase, nothing created in the event store): `projections` writes only
its own proj_ tables; `balances` and `rounds` only read them, and say on
stderr when they are behind the log.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any
from uuid import UUID

from ledger.cli.progress import progress_bar
from ledger.domain.money import in_play, wallet
from ledger.errors import NotFoundError
from ledger.node import Node
from ledger.projections import ProjectionRunner, queries

Opener = Callable[..., Node]


def add_projection_commands(commands: Any, opener: Opener) -> None:
    """Add the subcommands to `ledger`'s subparsers; `opener` is main's `_open`."""
    projections = commands.add_parser(
        "projections", help="read models rebuilt from the log"
    ).add_subparsers(dest="projections_command", required=True)
    rebuild = projections.add_parser("rebuild", help="drop the projections, rebuild from the log")
    rebuild.add_argument("--batch-size", type=int, default=500, help=argparse.SUPPRESS)
    rebuild.set_defaults(handler=partial(cmd_projections_rebuild, opener))
    update = projections.add_parser("update", help="apply the events recorded since last time")
    update.add_argument("--follow", action="store_true", help="keep following the log")
    update.add_argument("--batch-size", type=int, default=500, help=argparse.SUPPRESS)
    update.set_defaults(handler=partial(cmd_projections_update, opener))

    balances = commands.add_parser("balances", help="balances from the postings (projection)")
    balances.add_argument(
        "account", nargs="?", help="an account id, or a ledger account name (cashier:EUR)"
    )
    balances.set_defaults(handler=partial(cmd_balances, opener))

    rounds = commands.add_parser("rounds", help="round summaries (projection)")
    rounds.add_argument(
        "--open", action="store_true", help="only rounds neither settled nor voided"
    )
    rounds.set_defaults(handler=partial(cmd_rounds, opener))


def cmd_projections_rebuild(opener: Opener, args: argparse.Namespace) -> int:
    node = opener(args, writable=False)
    try:
        runner = ProjectionRunner(node.app, batch_size=args.batch_size)
        count, _ = node.app.tables.event_count()
        started = time.perf_counter()
        with progress_bar("projecting") as (advance, set_total):
            set_total(count)
            read = runner.rebuild(progress=advance)
        elapsed = time.perf_counter() - started
        names = ", ".join(p.name for p in runner.projections)
        rate = read / elapsed if elapsed > 0 else 0.0
        print(f"rebuilt {names} from {read} events in {elapsed:.2f} s ({rate:,.0f} events/s)")
    finally:
        node.close()
    return 0


def cmd_projections_update(opener: Opener, args: argparse.Namespace) -> int:
    node = opener(args, writable=False)
    try:
        runner = ProjectionRunner(node.app, batch_size=args.batch_size)
        if args.follow:
            print("following the log (Ctrl-C to stop)", file=sys.stderr)
            with contextlib.suppress(KeyboardInterrupt):
                runner.follow()
        with progress_bar("projecting") as (advance, _):
            read = runner.catch_up(progress=advance)
        position = min(runner.positions().values(), default=0)
        print(f"projections up to date at notification {position} ({read} new events)")
    finally:
        node.close()
    return 0


def _reader(opener: Opener, args: argparse.Namespace) -> Node:
    node = opener(args, writable=False)
    try:
        runner = ProjectionRunner(node.app)
        runner.require_built()
        status = runner.status()
    except BaseException:
        node.close()
        raise
    if status.behind:
        at = min(status.positions.values(), default=0)
        print(
            f"ledger: note: projections at notification {at}, the log at {status.log_end}: "
            "run `ledger projections update`",
            file=sys.stderr,
        )
    return node


def cmd_balances(opener: Opener, args: argparse.Namespace) -> int:
    node = _reader(opener, args)
    try:
        if args.account is None:
            _print_balances(queries.balances(node.app))
            for currency, total in queries.currency_totals(node.app).items():
                print(f"total {currency}: {total}")
            return 0
        _print_account(node, args.account)
    finally:
        node.close()
    return 0


def _print_account(node: Node, name: str) -> None:
    """One account: a ledger account name as is, else an account id (or a round's)."""
    rows = queries.balances(node.app, name)
    if rows:
        _print_balances(rows)
        return
    try:
        account_id = str(UUID(name))
    except ValueError:
        raise NotFoundError(f"no ledger account {name!r}") from None
    found = queries.accounts(node.app, account_id)
    if not found:
        rows = queries.balances(node.app, in_play(account_id))
        if not rows:
            raise NotFoundError(f"no account or round {account_id} in the projections")
        _print_balances(rows)
        return
    totals = found[0]
    balance = sum(r.balance for r in queries.balances(node.app, wallet(account_id)))
    print(f"account      {totals.account_id}")
    print(f"kind         {totals.kind}")
    print(f"owner        {totals.owner}")
    print(f"status       {totals.status}")
    print(f"currency     {totals.currency}")
    print(f"balance      {balance}")
    print(f"deposits     {totals.deposits}")
    print(f"withdrawals  {totals.withdrawals}")
    print(f"staked       {totals.staked}")
    print(f"returned     {totals.returned}")


def _print_balances(rows: list[queries.Balance]) -> None:
    print(f"{'ACCOUNT':<48} {'CURRENCY':<8} {'BALANCE':>16} {'POSTINGS':>9}")
    for row in rows:
        print(f"{row.account:<48} {row.currency:<8} {row.balance:>16} {row.postings:>9}")


def cmd_rounds(opener: Opener, args: argparse.Namespace) -> int:
    node = _reader(opener, args)
    try:
        found = queries.rounds(node.app, open_only=args.open)
    finally:
        node.close()
    print(
        f"{'ROUND':<36} {'STATUS':<8} {'TABLE':<12} {'VARIANT':<10} {'BETS':>5} "
        f"{'STAKES':>12} {'RETURNED':>12} {'CUR':<3} OPENED"
    )
    for r in found:
        table = r.table_name or r.table_id[:8]
        print(
            f"{r.round_id:<36} {r.status:<8} {table:<12} {r.variant:<10} {r.bets:>5} "
            f"{r.stakes:>12} {r.returned:>12} {r.currency:<3} {r.opened_at}"
        )
    if not found:
        print("no open rounds" if args.open else "no rounds", file=sys.stderr)
    return 0
