"""`ledger serve`'s anchor in a process of its own.

In the serving process the anchor is a thread, and under a burst its
checkpointing (reading the new rows, checking and hashing them into the tree,
signing) took about a third of the one core the process's GIL allows,
beside the writer. It runs here instead, on the other core: the same
`Checkpointer.follow` that `ledger checkpoint --follow` runs, polling at
least twice within the anchor window, with the node's keys, store and origin
from the environment `ledger serve` set. (On SQLite this pays since the
checkpointer works on a read snapshot and holds the one write lock only to
store a batch.)

It ends when `ledger serve` does (the kernel sends it SIGTERM when its parent
dies, however the parent ended); asked to stop (SIGTERM or SIGINT), it
finishes the checkpoint under way and anchors what is left before it exits.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from ledger.errors import LedgerError
from ledger.http.side_process import SideProcess, end_with, say_ready, stop_signals
from ledger.store.sealed_rows import SEALED_ENV

log = logging.getLogger("ledger.anchor")
POLL_SECONDS = 0.25  # well within the default anchor window (1 s)


READY = b"anchoring\n"  # said once its stop signals are its own


def start(env: dict[str, str] | None = None) -> SideProcess:
    """The anchor process for the serving process that calls this."""
    return SideProcess("ledger.http.anchor_process", env=env)


def main(argv: list[str]) -> int:
    from ledger.casino.opened import open_ledger
    from ledger.http.serve_settings import passphrase
    from ledger.store.anchor import AnchorSettings

    end_with(int(argv[0]))
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    stopped = stop_signals()
    say_ready(READY)
    settings = AnchorSettings.resolve(None, None)
    poll = min(POLL_SECONDS, settings.seconds / 2) if settings.seconds else POLL_SECONDS
    node = open_ledger(
        os.environ.get("LEDGER_STORE") or None,
        os.environ.get("LEDGER_KEYS"),
        passphrase=passphrase(),
        anchor_seconds=0,
        anchor_events=0,
        writable=False,
    ).node
    told = os.environ.get(SEALED_ENV)
    # The rows the node's other processes seal, so as not to verify them again.
    listening = node.listen_for_sealed_rows(Path(told)) if told else None
    try:
        checkpointer = node.checkpointer()
        checkpointer.follow(poll_seconds=poll, stop=stopped.is_set)
        checkpointer.catch_up()  # what was written before the server stopped
    except LedgerError as exc:
        log.error("anchoring stopped: %s", exc)
        return exc.exit_code
    finally:
        if listening is not None:
            listening.close()
        node.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
