"""`ledger publish --to nats://HOST:4222 [--stream NAME] [--prefix SUBJECTS]
[--follow]`: every event of the log, in log order, published to a NATS
JetStream stream at least once, each message keyed by its log position; it
goes on from the stream's last message, so a restart (kill -9 included) or
a broker restart leaves no gap (docs/publish.md). Exit 0 when caught up (or,
with --follow, interrupted: 130), 2 for bad input or a broker that does not
answer or refuses the credentials; nothing published then."""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from ledger.cli.common import WithLedger
from ledger.cli.progress import progress_bar

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.publish.jetstream import Target


def cmd_publish(args: argparse.Namespace) -> WithLedger:
    from ledger.publish.jetstream import Target, check_target

    target = Target(args.to, args.stream, args.prefix)
    check_target(target)
    return WithLedger(partial(_publish, target, args.follow))


def _publish(target: Target, follow: bool, ledger: Ledger) -> int:
    import asyncio  # (here: every other command would pay its import, about 20 ms)

    from ledger.publish.jetstream import publish_log, rate_line

    def say(line: str) -> None:
        print(f"ledger: {line}", file=sys.stderr, flush=True)

    started = time.monotonic()
    with progress_bar("publishing") as (advance, _):
        published = asyncio.run(
            publish_log(ledger.node.app.tables, target, follow=follow, say=say, advance=advance)
        )
    print(
        f"{rate_line(published, started)} to stream {target.stream} ({target.prefix}.<type>) "
        f"at {target.url.split('@')[-1]}; the stream now ends at the log's end"
    )
    return 0


def add_publish_command(commands: Any) -> None:
    publish = commands.add_parser(
        "publish", help="publish every event, in log order, to a NATS JetStream stream"
    )
    publish.add_argument(
        "--to", required=True, metavar="URL", help="the broker: nats://[user:password@]host:port"
    )
    publish.add_argument(
        "--stream", default="LEDGER", metavar="NAME", help="JetStream stream (default LEDGER)"
    )
    publish.add_argument(
        "--prefix", default="ledger", metavar="SUBJECTS", help="subject prefix (default ledger)"
    )
    publish.add_argument(
        "--follow", action="store_true", help="go on publishing as the log grows (until Ctrl-C)"
    )
    publish.set_defaults(handler=cmd_publish)
