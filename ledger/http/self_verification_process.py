"""The node's scheduled self-verification in a process of its own
(`ledger serve` starts one, whatever its number of workers, and so does
`ledger checkpoint --follow`): `ledger.audit.self_verification` on the
schedule, at a lower CPU priority than the serving processes, so a run never
holds up a bet (it reads the store as any reader does, and writes one event
a run).

It starts light and opens the node (with the ledger-node key, to record its
runs) only when the first run is due; its saved state lives in a private
directory of its own, removed when it ends, so a node's first run after it
starts verifies everything. It ends when the process that started it does
(SIGTERM when its parent dies, kill -9 included); asked to stop, it ends at
once, in the middle of a run too (a run's record is one transaction: rolled
back, nothing recorded for it), so a server never waits on a long run to stop.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ledger.http.side_process import SideProcess, end_with, say_ready

if TYPE_CHECKING:
    from ledger.audit.self_verification import SelfRun, SelfVerifier
    from ledger.casino.opened import Ledger

READY = b"self-verifying\n"
NICENESS = 10  # below the serving processes: bets first


def start(every: int, status: Path | None, env: dict[str, str] | None = None) -> SideProcess:
    """The self-verification process for the process that calls this: a run
    every `every` seconds, each outcome written to `status` (None: no file)."""
    return SideProcess(
        "ledger.http.self_verification_process",
        str(every),
        str(status) if status is not None else "",
        env=env,
    )


def _stop_at_once(state_dir: Path) -> None:
    """SIGTERM and SIGINT end the process there and then. Not by raising
    SystemExit: a signal handler runs wherever the main thread is, a weakref
    callback or a destructor included, and an exception raised there is
    printed and dropped, so the process would verify on. The handler runs on
    the main thread, so nothing writes to the state directory while it is
    removed; a run's open transaction dies with the connection (rolled back,
    as after kill -9)."""

    def end(*_: Any) -> NoReturn:
        shutil.rmtree(state_dir, ignore_errors=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGINT, end)


def main(argv: list[str]) -> int:
    end_with(int(argv[0]))
    every, status_path = int(argv[1]), argv[2]
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    state_dir = Path(tempfile.mkdtemp(prefix="ledger-self-verification-"))  # mode 0700
    _stop_at_once(state_dir)
    try:
        say_ready(READY)
    except BrokenPipeError:  # the process that started it is gone already
        shutil.rmtree(state_dir, ignore_errors=True)
        return 0
    os.nice(NICENESS)
    from ledger.audit.games.recorded_games import games_of_store
    from ledger.audit.self_status import SelfStatus
    from ledger.audit.self_verification import SelfVerifier, follow_schedule

    status = SelfStatus(Path(status_path), every) if status_path else None
    opened: list[tuple[Ledger, SelfVerifier]] = []

    def run_once() -> SelfRun:
        if not opened:  # the node opened when the first run is due
            ledger = _open()
            app = ledger.node.app  # each round with the rules it pinned, an old release's too
            games = games_of_store(app, ledger.games, ledger.plugins.game_from_rules)
            opened.append((ledger, SelfVerifier(app, games, state_dir)))
        return opened[0][1].run_once()

    try:
        follow_schedule(run_once, every, lambda: False, status)
    finally:
        for ledger, _ in opened:
            ledger.node.close()
        shutil.rmtree(state_dir, ignore_errors=True)
    return 0


def _open() -> Ledger:
    from ledger.casino.opened import open_ledger
    from ledger.http.serve_settings import passphrase

    return open_ledger(
        os.environ.get("LEDGER_STORE") or None,
        os.environ.get("LEDGER_KEYS"),
        passphrase=passphrase(),
        anchor_seconds=0,  # the node's anchor, or `checkpoint --follow`, anchors
        anchor_events=0,
        writable=True,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
