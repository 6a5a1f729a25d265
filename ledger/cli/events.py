"""`ledger events --significant [--since T] [--json]`: the significant events
(voids, corrections, interrupted rounds, keys, rules changes, verification
runs), streamed from the log in log order (see ledger.audit.significant)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from ledger.cli.common import open_from_args
from ledger.cli.progress import progress_bar


def since_time(text: str) -> datetime:
    """An ISO 8601 date or time; without a zone it is UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 date or time (e.g. 2026-11-30 or 2026-11-30T20:00:00Z)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def cmd_events(args: argparse.Namespace) -> int:
    from ledger.audit.significant import scan_significant

    node = open_from_args(args, writable=False)
    try:
        shown = 0
        with progress_bar("reading the log") as (advance, set_total):
            set_total(node.app.tables.event_count()[0])
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
    finally:
        node.close()
    if not args.json:
        print(
            f"{shown} significant event{'s' * (shown != 1)}; checked: every row against its "
            "signed header, each one shown's envelope signature; not checked: chains, "
            "checkpoints, actor signatures (use `ledger verify`)"
        )
    return 0


def add_events_command(commands: Any) -> None:
    events = commands.add_parser(
        "events", help="significant events: voids, corrections, keys, rules changes, verifications"
    )
    events.add_argument(
        "--significant",
        action="store_true",
        help="the significant events (what `events` lists; the flag may be left out)",
    )
    events.add_argument(
        "--since", type=since_time, metavar="T", help="only those signed at or after T (ISO 8601)"
    )
    events.add_argument("--json", action="store_true", help="one JSON object per line")
    events.set_defaults(handler=cmd_events)
