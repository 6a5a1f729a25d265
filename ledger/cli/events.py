"""`ledger events [--significant] [--since T] [--json]`: the log's events in
log order, as their signed envelopes name them (ledger.audit.log_listing); with
`--significant`, only the significant ones (voids, corrections, interrupted
rounds, keys, rules changes, verification runs: ledger.audit.significant)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ledger.cli.common import WithLedger
from ledger.cli.progress import progress_bar

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.node import Node


def since_time(text: str) -> datetime:
    """An ISO 8601 date or time; without a zone it is UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 date or time (e.g. 2026-11-30 or 2026-11-30T20:00:00Z)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def cmd_events(args: argparse.Namespace) -> WithLedger:
    def run(ledger: Ledger) -> int:
        node = ledger.node
        with progress_bar("reading the log") as (advance, set_total):
            set_total(node.app.tables.event_count()[0])
            shown = (_significant if args.significant else _every)(node, args, advance)
        if not args.json:
            print(_footer(shown, significant=args.significant))
        return 0

    return WithLedger(run)


def _every(node: Node, args: argparse.Namespace, advance: Callable[[int], None]) -> int:
    from ledger.audit.log_listing import scan_log

    shown = 0
    for found in scan_log(node.app, since=args.since, progress=advance):
        shown += 1
        if args.json:
            print(json.dumps(found.to_json(), sort_keys=True))
        else:
            print(
                f"{found.position:>9}  {found.at.isoformat(timespec='seconds')}  "
                f"{found.type:<30} {found.stream} v{found.version}"
            )
    return shown


def _significant(node: Node, args: argparse.Namespace, advance: Callable[[int], None]) -> int:
    from ledger.audit.significant import scan_significant

    shown = 0
    for found in scan_significant(node.app, since=args.since, progress=advance):
        shown += 1
        if args.json:
            print(json.dumps(found.to_json(), sort_keys=True), flush=True)
        else:
            print(
                f"{found.position:>9}  {found.at.isoformat(timespec='seconds')}  "
                f"{found.kind:<25} {found.summary}",
                flush=True,
            )
    return shown


def _footer(shown: int, *, significant: bool) -> str:
    if significant:
        return (
            f"{shown} significant event{'s' * (shown != 1)}; checked: every row against its "
            "signed header, each one shown's envelope signature; not checked: chains, "
            "checkpoints, actor signatures (use `ledger verify`)"
        )
    return (
        f"{shown} event{'s' * (shown != 1)}; checked: every row against its signed header "
        "and its envelope signature; not checked: chains, checkpoints, actor signatures "
        "(use `ledger verify`); `--significant` for voids, corrections, keys, rules changes "
        "and verification runs only"
    )


def add_events_command(commands: Any) -> None:
    events = commands.add_parser(
        "events", help="the log's events; --significant: voids, corrections, keys, rules changes"
    )
    events.add_argument(
        "--significant",
        action="store_true",
        help="only the significant events: voids, corrections, interrupted rounds, keys, "
        "rules changes, verification runs",
    )
    events.add_argument(
        "--since", type=since_time, metavar="T", help="only those signed at or after T (ISO 8601)"
    )
    events.add_argument("--json", action="store_true", help="one JSON object per line")
    events.set_defaults(handler=cmd_events)
