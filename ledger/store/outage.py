"""A store that went away for a while: which failures those are, and the
loop the following services (`checkpoint --follow`, `projections update
--follow`) keep running through them.

A restart, a failover or a dropped connection fails the statement in flight
with an `OperationalError` (or the pool's timeout while no server takes
connections). What was in flight is a whole transaction or nothing: the
service rolls nothing forward by hand, it simply starts its next step from
what the store holds, once the store answers again."""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable

from eventsourcing.persistence import InterfaceError, OperationalError

from ledger.store.drivers import first_line, loaded_errors

log = logging.getLogger(__name__)

# Failures that a later attempt may not meet: the server restarting, failing
# over, dropping the connection, or (SQLite) locked or out of space.
_TRANSIENT: tuple[type[BaseException], ...] = (
    OperationalError,
    InterfaceError,
    sqlite3.OperationalError,
)
_DISK_FULL = ("database or disk is full", "No space left on device")
MAX_PAUSE = 5.0  # seconds between attempts at most, however long the outage


def transient_errors() -> tuple[type[BaseException], ...]:
    """The transient failures, the PostgreSQL driver's among them once it is imported."""
    return _TRANSIENT + loaded_errors(
        "psycopg:OperationalError", "psycopg:InterfaceError", "psycopg_pool:PoolTimeout"
    )


def follow_through_outages(
    step: Callable[[], bool],
    stop: Callable[[], bool],
    poll_seconds: float,
    what: str,
    after_outage: Callable[[], None] = lambda: None,
) -> None:
    """Run `step` (True: it did something, go on at once) until `stop()`;
    between attempts that meet a transient failure, wait longer each time (up
    to `MAX_PAUSE`), saying once that the store is unavailable and once that
    it is back. `after_outage` runs before the first step after one (forget
    what was known of a server that may be another now)."""
    pause = 0.0
    while not stop():
        try:
            if pause:
                after_outage()
            worked = step()
        except transient_errors() as exc:
            if not pause:
                log.warning("%s: store unavailable, retrying: %s", what, first_line(exc))
            pause = min(MAX_PAUSE, max(0.2, pause * 2))
            time.sleep(pause)
            continue
        if pause:
            log.warning("%s: store available again", what)
            pause = 0.0
        if not worked:
            time.sleep(poll_seconds)


def disk_full(exc: BaseException) -> bool:
    """The store failed because its disk is full (SQLite's SQLITE_FULL, the
    server's DiskFull, or the system's ENOSPC underneath either)."""
    server_disk_full = loaded_errors("psycopg.errors:DiskFull")
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, server_disk_full) or any(words in str(seen) for words in _DISK_FULL):
            return True
        seen = seen.__cause__
    return False


def describe_outage(exc: BaseException) -> str:
    """One line for a store failure: its cause named first when it is a full disk."""
    line = first_line(exc)
    return f"its disk is full ({line})" if disk_full(exc) else line
