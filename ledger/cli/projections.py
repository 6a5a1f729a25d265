"""`ledger projections rebuild|update`, `ledger balances`, `ledger rounds`.

None of these signs anything, so all open the node read-only (no signing key,
no passphrase, nothing created in the event store): they write only the proj_
tables, and `balances` and `rounds` bring those up to date before reading them.
(`ledger rounds void|resume` sign and record: see ledger/cli/rounds.py.)
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from functools import partial
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.cli.common import WithLedger, add_reveal_option, revealer
from ledger.cli.progress import progress_bar
from ledger.cli.rounds import add_round_actions
from ledger.domain.currency import format_major, minor_unit_exponent
from ledger.errors import NotFoundError

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.node import Node
    from ledger.projections import queries


def add_projection_commands(commands: Any) -> None:
    """Add the subcommands to `ledger`'s subparsers."""
    projections = commands.add_parser(
        "projections", help="read models rebuilt from the log"
    ).add_subparsers(dest="projections_command", required=True)
    rebuild = projections.add_parser("rebuild", help="drop the projections, rebuild from the log")
    rebuild.add_argument("--batch-size", type=int, default=500, help=argparse.SUPPRESS)
    rebuild.set_defaults(handler=cmd_projections_rebuild)
    update = projections.add_parser("update", help="apply the events recorded since last time")
    update.add_argument("--follow", action="store_true", help="keep following the log")
    update.add_argument("--batch-size", type=int, default=500, help=argparse.SUPPRESS)
    update.set_defaults(handler=cmd_projections_update)

    balances = commands.add_parser("balances", help="balances from the postings (projection)")
    balances.add_argument(
        "account", nargs="?", help="an account id, or a ledger account name (cashier:EUR)"
    )
    balances.add_argument(
        "--json", action="store_true", help="JSON with raw integer minor units (for programs)"
    )
    add_reveal_option(balances, "owners")
    balances.set_defaults(handler=cmd_balances)

    rounds = commands.add_parser("rounds", help="round summaries (projection)")
    rounds.add_argument(
        "--open", action="store_true", help="only rounds neither settled nor voided"
    )
    rounds.set_defaults(handler=cmd_rounds)
    add_round_actions(rounds)


def cmd_projections_rebuild(args: argparse.Namespace) -> WithLedger:
    def run(ledger: Ledger) -> int:
        from ledger.projections import ProjectionRunner

        app = ledger.node.app
        runner = ProjectionRunner(app, batch_size=args.batch_size)
        count, _ = app.tables.event_count()
        started = time.perf_counter()
        with progress_bar("projecting") as (advance, set_total):
            set_total(count)
            read = runner.rebuild(progress=advance)
        elapsed = time.perf_counter() - started
        names = ", ".join(p.name for p in runner.projections)
        rate = read / elapsed if elapsed > 0 else 0.0
        print(f"rebuilt {names} from {read} events in {elapsed:.2f} s ({rate:,.0f} events/s)")
        return 0

    return WithLedger(run)


def cmd_projections_update(args: argparse.Namespace) -> WithLedger:
    def run(ledger: Ledger) -> int:
        from ledger.projections import ProjectionRunner

        runner = ProjectionRunner(ledger.node.app, batch_size=args.batch_size)
        if args.follow:
            print("following the log (Ctrl-C to stop)", file=sys.stderr)
            with contextlib.suppress(KeyboardInterrupt):
                runner.follow()
        with progress_bar("projecting") as (advance, _):
            read = runner.catch_up(progress=advance)
        position = min(runner.positions().values(), default=0)
        print(f"projections up to date at notification {position} ({read} new events)")
        return 0

    return WithLedger(run)


def _caught_up(ledger: Ledger) -> Node:
    """The node, its projections brought up to date first, so a listing right
    after a crash shows the rounds it interrupted. Catching up writes only the
    proj_ tables (never an event), and only when the log moved on."""
    from ledger.cli.catch_up import catch_up

    catch_up(ledger.node)
    return ledger.node


def cmd_balances(args: argparse.Namespace) -> WithLedger:
    def run(ledger: Ledger) -> int:
        from ledger.domain.money import wallet
        from ledger.projections import queries

        node = _caught_up(ledger)
        shown = revealer(args, node.keys.path)
        owners = {wallet(a.account_id): shown("owner", a.owner) for a in queries.accounts(node.app)}
        if args.account is not None:
            _print_account(node, args.account, owners, as_json=args.json)
            return 0
        rows = queries.balances(node.app)
        totals = queries.currency_totals(node.app)
        if args.json:
            _print_json(rows, owners, totals)
            return 0
        _print_balances(rows, owners)
        for currency, total in totals.items():
            print(f"total {currency}: {format_major(total, currency)} (zero when balanced)")
        return 0

    return WithLedger(run)


def _print_account(node: Node, name: str, owners: dict[str, str], *, as_json: bool) -> None:
    """One account: a ledger account name as is, else an account id (or a round's)."""
    from ledger.domain.money import in_play, wallet
    from ledger.projections import queries

    rows = queries.balances(node.app, name)
    if rows:
        _print_json(rows, owners) if as_json else _print_balances(rows, owners)
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
        _print_json(rows, owners) if as_json else _print_balances(rows, owners)
        return
    totals = found[0]
    balance = sum(r.balance for r in queries.balances(node.app, wallet(account_id)))
    if as_json:
        document = {**dataclasses.asdict(totals), "owner": owners.get(wallet(account_id))}
        print(json.dumps({**document, "balance": balance}, indent=2))
        return
    money = partial(format_major, currency=totals.currency)
    print(f"account      {totals.account_id}")
    print(f"kind         {totals.kind}")
    print(f"owner        {owners.get(wallet(account_id), '')}")
    print(f"status       {totals.status}")
    print(f"currency     {totals.currency}")
    print(f"balance      {money(balance)}")
    print(f"deposits     {money(totals.deposits)}")
    print(f"withdrawals  {money(totals.withdrawals)}")
    print(f"staked       {money(totals.staked)}")
    print(f"returned     {money(totals.returned)}")


def _print_balances(rows: list[queries.Balance], owners: dict[str, str]) -> None:
    """Major units with the currency's ISO 4217 exponent (2 for EUR, 0 for VND)."""
    print(f"{'ACCOUNT':<48} {'OWNER':<24} {'CUR':<3} {'BALANCE':>20} {'POSTINGS':>8}")
    for row in rows:
        owner = owners.get(row.account, "")
        owner = owner if len(owner) <= 24 else owner[:23] + "…"
        amount = format_major(row.balance, row.currency)
        print(f"{row.account:<48} {owner:<24} {row.currency:<3} {amount:>20} {row.postings:>8}")


def _print_json(
    rows: list[queries.Balance], owners: dict[str, str], totals: dict[str, int] | None = None
) -> None:
    """Raw integer minor units, the exponent beside them: nothing rounded, nothing parsed."""
    document: dict[str, Any] = {
        "balances": [
            {
                "account": row.account,
                "owner": owners.get(row.account),
                "currency": row.currency,
                "minor_unit_exponent": minor_unit_exponent(row.currency),
                "balance": row.balance,
                "postings": row.postings,
            }
            for row in rows
        ]
    }
    if totals is not None:
        document["totals"] = totals
    print(json.dumps(document, indent=2))


def cmd_rounds(args: argparse.Namespace) -> WithLedger:
    """Stakes and returns in major units, as `balances` shows them."""

    def run(ledger: Ledger) -> int:
        from ledger.projections import queries

        found = queries.rounds(_caught_up(ledger).app, open_only=args.open)
        _print_rounds(found, open_only=args.open)
        return 0

    return WithLedger(run)


def _print_rounds(found: list[queries.RoundSummary], *, open_only: bool) -> None:
    print(
        f"{'ROUND':<36} {'STATUS':<8} {'TABLE':<12} {'GAME':<10} {'BETS':>5} "
        f"{'STAKES':>14} {'RETURNED':>14} {'CUR':<3} OPENED"
    )
    for r in found:
        table = r.table_name or r.table_id[:8]
        stakes, returned = (format_major(amount, r.currency) for amount in (r.stakes, r.returned))
        print(
            f"{r.round_id:<36} {r.status:<8} {table:<12} {r.game:<10} {r.bets:>5} "
            f"{stakes:>14} {returned:>14} {r.currency:<3} {r.opened_at}"
        )
    if not found:
        print("no open rounds" if open_only else "no rounds", file=sys.stderr)
