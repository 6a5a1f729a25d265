"""The faults of issue 22 as scenarios: each sets up its servers and stores,
runs a burst of bets, injects its fault, waits for the service to recover by
itself, and checks what every fault must leave behind (tests.fault_support).

The tests run each once; `tools/faults.py` runs them N times and tabulates
the `Outcome`s. A scenario appends its outcomes to `record` as soon as they are
measured, then asserts: a run that fails still says what it saw.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.fault_support import Burst, Server, Service, check_burst, service_env, set_up_casino
from tests.pg_cluster import Cluster, replicated, single
from tests.small_disk import fill, small_filesystem
from tests.test_http_serve import ledger

SCHEMA = "ledger"
BEFORE = 80  # bets acknowledged before a fault
AFTER = 50  # and after recovery
RECOVERY_LIMIT = 60.0  # seconds a service may take to recover by itself


@dataclass
class Outcome:
    """One fault injected once: what the clients saw and what the log holds."""

    fault: str
    acknowledged: int = 0  # bets acknowledged in the whole run
    lost: int | None = None  # acknowledged bets not in the log exactly once (None: not checked)
    recovery: float | None = None  # seconds from the fault to the first new bet acknowledged
    retried: int = 0  # answers asking for a retry (503) and connections that failed
    statuses: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def multi_host_url(*clusters: Cluster) -> str:
    """A store URL naming every cluster, for whichever one takes writes."""
    hosts = ",".join(f"127.0.0.1:{c.port}" for c in clusters)
    return f"postgresql://postgres@{hosts}/postgres?schema={SCHEMA}&target_session_attrs=read-write"


def _recovered(burst: Burst, fault: float, done: float) -> float:
    """Seconds from the fault (injected from `fault` to `done`) until a request
    sent after it was acknowledged: how long the clients saw no bet taken."""
    deadline = time.monotonic() + RECOVERY_LIMIT
    while (answered := burst.acknowledged_after(done)) is None:
        assert time.monotonic() < deadline, (
            f"no bet acknowledged {RECOVERY_LIMIT:.0f} s after the fault: {dict(burst.statuses)}"
        )
        time.sleep(0.02)
    return answered - fault


def _retries(statuses: dict[str, int]) -> int:
    return sum(count for what, count in statuses.items() if what not in ("201",))


def checkpoint_rows(cluster: Cluster) -> set[tuple[int, bytes, str]]:
    rows = cluster.execute(f"SELECT tree_size, root, note FROM {SCHEMA}.ledger_checkpoints")
    return {(int(size), bytes(root), str(note)) for size, root, note in rows}


def event_count(cluster: Cluster) -> int:
    return int(cluster.execute(f"SELECT count(*) FROM {SCHEMA}.ledger_events")[0][0])


def wait_until_checkpointed(cluster: Cluster, timeout: float = 30) -> set[tuple[int, bytes, str]]:
    """The checkpoint rows once one covers every event stored when called (the
    service signs them; under a burst, more keep arriving)."""
    deadline = time.monotonic() + timeout
    events = event_count(cluster)
    while True:
        rows = checkpoint_rows(cluster)
        if rows and max(size for size, _, _ in rows) >= events:
            return rows
        assert time.monotonic() < deadline, f"no checkpoint covers the {events} events"
        time.sleep(0.2)


def _verified(cwd: Path, store: str) -> None:
    verified = ledger(cwd, "--store", store, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def failover(cwd: Path, record: list[Outcome] | None = None) -> Outcome:
    """Kill the primary mid-burst, promote its synchronous standby."""
    record = [] if record is None else record
    outcome = Outcome("PostgreSQL failover (primary killed, standby promoted)")
    with replicated() as (primary, standby):
        url = multi_host_url(primary, standby)
        # The server does not anchor: `checkpoint --follow` is the checkpointer.
        server = Server(cwd, url, LEDGER_SERVE_ANCHOR="0")
        services: list[Service] = [server]
        try:
            casino = set_up_casino(cwd, server.base)
            checkpointer = Service(
                cwd, "checkpointer", ["--store", url, "checkpoint", "--follow"], service_env()
            )
            services.append(checkpointer)
            burst = Burst(server.base, casino).start()
            try:
                burst.wait_for(BEFORE)
                signed_before = wait_until_checkpointed(primary)
                fault = time.monotonic()
                primary.stop("immediate")
                killed = time.monotonic()
                standby.promote()  # what a failover manager does; timed with the recovery
                outcome.recovery = _recovered(burst, fault, killed)
                burst.wait_for(len(burst.acked) + AFTER)
            finally:
                burst.stop()
            outcome.statuses = dict(burst.statuses)
            outcome.retried = _retries(outcome.statuses)
            outcome.acknowledged = len(burst.acked)
            record.append(outcome)
            outcome.lost = check_burst(cwd, url, server.base, burst)
            assert server.alive(), "the server did not survive the failover"
            signed_after = wait_until_checkpointed(standby)
            assert checkpointer.alive(), f"the checkpointer stopped: {checkpointer.text()}"
            missing = signed_before - signed_after
            assert not missing, f"checkpoints signed before the failover are gone: {missing}"
            assert max(s for s, _, _ in signed_after) > max(s for s, _, _ in signed_before)
        finally:
            for service in services:
                service.stop()
        _verified(cwd, url)
    return outcome


RESTARTS = ("fast", "immediate", "terminate")
RESTART_NAMES = {
    "fast": "PostgreSQL restart (-m fast)",
    "immediate": "PostgreSQL restart (-m immediate)",
    "terminate": "backends terminated (pg_terminate_backend)",
}


def inject(cluster: Cluster, fault: str) -> None:
    if fault == "terminate":
        ended = cluster.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )
        assert ended and all(ok for (ok,) in ended), "no server connection was terminated"
    else:
        cluster.restart(fault)


def restarts(
    cwd: Path, faults: tuple[str, ...] = RESTARTS, record: list[Outcome] | None = None
) -> list[Outcome]:
    """One server under one burst through each fault in turn, on a private cluster."""
    record = [] if record is None else record
    outcomes = [Outcome(RESTART_NAMES[f]) for f in faults]
    with single() as cluster:
        url = cluster.url(SCHEMA)
        server = Server(cwd, url)  # one worker: it anchors its own writes
        try:
            casino = set_up_casino(cwd, server.base)
            burst = Burst(server.base, casino).start()
            try:
                burst.wait_for(BEFORE)
                for fault, outcome in zip(faults, outcomes, strict=True):
                    before = dict(burst.statuses)
                    at = time.monotonic()
                    inject(cluster, fault)
                    outcome.recovery = _recovered(burst, at, time.monotonic())
                    burst.wait_for(len(burst.acked) + AFTER)
                    outcome.statuses = {k: v - before.get(k, 0) for k, v in burst.statuses.items()}
                    outcome.retried = _retries(outcome.statuses)
            finally:
                burst.stop()
            for outcome in outcomes:
                outcome.acknowledged = len(burst.acked)
            record.extend(outcomes)
            lost = check_burst(cwd, url, server.base, burst)
            for outcome in outcomes:
                outcome.lost = lost
            assert server.alive(), "the server did not survive"
        finally:
            server.stop()
        _verified(cwd, url)
    return outcomes


HEADROOM_KIB = 256  # what the filler leaves free: a few batches' worth


def disk_full(cwd: Path, backend: str, record: list[Outcome] | None = None) -> Outcome:
    """The store's filesystem fills up under a burst, then space is freed.

    SQLite: the database file on a small tmpfs. PostgreSQL: a private cluster
    whose tables are in a tablespace on a small tmpfs (its WAL stays on the
    big disk: a server whose WAL cannot be written stops, which is another
    fault). While full, every bet is answered 503 naming the full disk; once
    the filler is removed the same server takes bets again. Then `ledger
    simulate` meets the full disk: one line naming it, exit 2, and the store
    verifies and takes writes once space is freed."""
    record = [] if record is None else record
    outcome = Outcome(f"{'SQLite' if backend == 'sqlite' else 'PostgreSQL'} disk full")
    with contextlib.ExitStack() as stack:
        if backend == "sqlite":
            small = stack.enter_context(small_filesystem(8 * 1024))
            url = f"sqlite:///{small / 'ledger.db'}"
        else:
            small = stack.enter_context(small_filesystem(8 * 1024, owner="postgres"))
            cluster = stack.enter_context(single())
            (small / "tablespace").mkdir()
            shutil.chown(small / "tablespace", "postgres", "postgres")
            cluster.execute(f"CREATE TABLESPACE small LOCATION '{small / 'tablespace'}'")
            cluster.execute("ALTER DATABASE postgres SET default_tablespace = small")
            url = cluster.url(SCHEMA)
        server = Server(cwd, url)
        try:
            casino = set_up_casino(cwd, server.base)
            burst = Burst(server.base, casino).start()
            try:
                burst.wait_for(BEFORE)
                filler = fill(small, HEADROOM_KIB)
                deadline = time.monotonic() + RECOVERY_LIMIT
                while not burst.unavailable:
                    assert time.monotonic() < deadline, f"the disk never filled: {burst.statuses}"
                    time.sleep(0.05)
                full = time.monotonic()
                filler.unlink()  # the operator frees space
                outcome.recovery = _recovered(burst, full, time.monotonic())
                burst.wait_for(len(burst.acked) + AFTER)
            finally:
                burst.stop()
            outcome.statuses = dict(burst.statuses)
            outcome.retried = _retries(outcome.statuses)
            outcome.acknowledged = len(burst.acked)
            record.append(outcome)
            details = set(burst.unavailable)
            assert details == {
                "store unavailable (its disk is full), retry with the same Idempotency-Key"
            }, details
            outcome.lost = check_burst(cwd, url, server.base, burst)
            assert server.alive(), "the server did not survive the full disk"
        finally:
            server.stop()
        # A session of the CLI meets the full disk: one line, exit 2, nothing half-written.
        filler = fill(small, HEADROOM_KIB)
        session = ledger(cwd, "--store", url, "simulate", "--rounds", "400", "--players", "4")
        lines = session.stderr.strip().splitlines()
        assert session.returncode == 2, session.stdout + session.stderr
        assert lines[-1].startswith("ledger: error: store unavailable: its disk is full ("), lines
        assert lines[-1].endswith(": free space, then run the command again"), lines
        assert "Traceback" not in session.stderr
        _verified(cwd, url)
        filler.unlink()
        again = ledger(cwd, "--store", url, "simulate", "--rounds", "2", "--players", "2")
        assert again.returncode == 0, again.stderr
        _verified(cwd, url)
    return outcome
