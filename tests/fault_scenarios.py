"""The faults of issue 22 as scenarios: each sets up its servers and stores,
runs a burst of bets, injects its fault, waits for the service to recover by
itself, and checks what every fault must leave behind (tests.fault_support).

The tests run each once; `tools/faults.py` runs them N times and tabulates
the `Outcome`s. A scenario appends its outcomes to `record` as soon as they are
measured, then asserts: a run that fails still says what it saw.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from tests.conftest import PG_DSN, PG_URL, drop_pg_schema, new_pg_schema, require_postgres
from tests.fault_support import Burst, Server, Service, check_burst, service_env, set_up_casino
from tests.http_api.test_http_serve import ledger
from tests.pg_cluster import Cluster, replicated, single
from tests.small_disk import fill, small_filesystem

SCHEMA = "ledger"
BEFORE = 80  # bets acknowledged before a fault
AFTER = 50  # and after recovery
RECOVERY_LIMIT = 60.0  # seconds a service may take to recover by itself
FAILOVER_NAME = "PostgreSQL failover (primary killed, standby promoted)"
DISK_NAMES = {"sqlite": "SQLite disk full", "postgres": "PostgreSQL disk full"}


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
    outcome = Outcome(FAILOVER_NAME)
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
            assert standby.execute("SELECT pg_is_in_recovery()") == [(False,)]
            assert not primary.running(), "the old primary came back"
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
    verifies (the server above showed that it takes writes once space is freed)."""
    record = [] if record is None else record
    outcome = Outcome(DISK_NAMES[backend])
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
        _verified(cwd, url)  # what the session committed before the disk filled
        filler.unlink()
    return outcome


# Seconds: `checkpoint --follow` polls every 0.5 s and signs in well under a
# second here; the rest is slack for a loaded machine (and, after a restart,
# the process's own start).
ANCHOR_BOUND = 10.0
RESTART_BOUND = 20.0
SERVICE_NAMES = {
    "checkpointer": "checkpointer killed (kill -9) and restarted",
    "projections": "projection follower killed (kill -9) and restarted",
    "http-worker": "HTTP worker killed (kill -9), restarted by serve",
}


class SharedSchema:
    """A schema of its own on the suite's PostgreSQL server, read directly."""

    def __init__(self) -> None:
        require_postgres()
        self.name = new_pg_schema()
        self.url = f"{PG_URL}?schema={self.name}"

    def rows(self, statement: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            return list(conn.execute(statement.format(schema=self.name)).fetchall())

    def drop(self) -> None:
        drop_pg_schema(self.name)

    def newest_checkpoint(self) -> tuple[int, datetime] | None:
        rows = self.rows("SELECT tree_size, note FROM {schema}.ledger_checkpoints")
        if not rows:
            return None
        size, note = max(rows)
        issued = next(line for line in str(note).splitlines() if line.startswith("time "))
        return int(size), datetime.fromisoformat(issued.removeprefix("time "))

    def events(self) -> tuple[int, int]:
        """(how many, the highest notification id)."""
        count, top = self.rows("SELECT count(*), max(notification_id) FROM {schema}.ledger_events")[
            0
        ]
        return int(count), int(top or 0)

    def positions(self) -> dict[str, int]:
        """Each projection's position; none before the follower has made its table
        (the test polls from the moment the follower is started)."""
        if self.rows("SELECT to_regclass('{schema}.proj_tracking')")[0][0] is None:
            return {}
        return dict(self.rows("SELECT projection, last_id FROM {schema}.proj_tracking"))


def _until(condition: Any, what: str, timeout: float = RECOVERY_LIMIT) -> float:
    """Wait for `condition()`; the seconds it took."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"{what} did not happen in {timeout:.0f} s"
        time.sleep(0.05)
    return time.monotonic() - start


def http_workers(pid: int) -> set[int]:
    """The HTTP workers `ledger serve` (process `pid`) runs: its children that
    uvicorn spawned (multiprocessing's spawn_main), not its writer, anchor or
    multiprocessing's resource tracker. (The highest process ids are not
    always the workers': the ids wrap, at 32768 on many machines.)"""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid and b"spawn_main" in command:
            found.add(int(stat.parent.name))
    return found


def killed_services(cwd: Path, record: list[Outcome] | None = None) -> list[Outcome]:
    """`serve --workers 2`, `checkpoint --follow` and `projections update
    --follow` on one store under a burst; each service is killed with
    SIGKILL in turn and restarted (the HTTP worker by `serve` itself)."""
    record = [] if record is None else record
    outcomes = {name: Outcome(title) for name, title in SERVICE_NAMES.items()}
    store = SharedSchema()
    url = store.url
    checkpoint_args = ["--store", url, "checkpoint", "--follow"]
    project_args = ["--store", url, "projections", "update", "--follow"]
    services: list[Service] = []
    try:
        server = Server(cwd, url, workers=2)
        services.append(server)
        casino = set_up_casino(cwd, server.base)
        checkpointer = Service(cwd, "checkpointer", checkpoint_args, service_env())
        projector = Service(cwd, "projections", project_args, service_env())
        services += [checkpointer, projector]
        burst = Burst(server.base, casino).start()
        try:
            burst.wait_for(BEFORE)
            # The checkpointer: the window it left is within its bound, and a
            # restarted one anchors everything again within the bound.
            _until(lambda: store.newest_checkpoint() is not None, "a first checkpoint")
            checkpointer.crash()
            newest = store.newest_checkpoint()
            assert newest is not None
            age = (datetime.now(UTC) - newest[1]).total_seconds()
            assert age < ANCHOR_BOUND, f"the newest checkpoint was {age:.1f} s old at the kill"
            burst.wait_for(len(burst.acked) + AFTER // 2)  # writes go on, unanchored
            checkpointer = Service(cwd, "checkpointer", checkpoint_args, service_env())
            services.append(checkpointer)
            count, _ = store.events()
            took = _until(
                lambda: (store.newest_checkpoint() or (0, None))[0] >= count,
                "a checkpoint over the events stored at the restart",
            )
            outcomes["checkpointer"].recovery = took
            assert took < RESTART_BOUND, f"the restarted checkpointer took {took:.1f} s"
            # The projection follower: it resumes from the positions it stored.
            _until(lambda: min(store.positions().values(), default=0) > 0, "a first projection")
            projector.crash()
            stopped = store.positions()
            burst.wait_for(len(burst.acked) + AFTER // 2)
            assert store.positions() == stopped, "a killed follower moved its positions"
            projector = Service(cwd, "projections", project_args, service_env())
            services.append(projector)
            _, top = store.events()
            outcomes["projections"].recovery = _until(
                lambda: min(store.positions().values()) >= top, "the projections catching up"
            )
            # An HTTP worker: serve starts another; the clients' retries go on.
            workers = http_workers(server.process.pid)
            assert len(workers) == 2, f"serve --workers 2 runs {workers}"
            victim = max(workers)
            fault = time.monotonic()
            os.kill(victim, signal.SIGKILL)
            outcomes["http-worker"].recovery = _recovered(burst, fault, time.monotonic())
            _until(
                lambda: len(http_workers(server.process.pid) - {victim}) >= len(workers),
                "serve restarting its worker",
            )
            burst.wait_for(len(burst.acked) + AFTER)
        finally:
            burst.stop()
        for outcome in outcomes.values():
            outcome.acknowledged = len(burst.acked)
            outcome.statuses = dict(burst.statuses)
            outcome.retried = _retries(outcome.statuses)
        record.extend(outcomes.values())
        lost = check_burst(cwd, url, server.base, burst)
        for outcome in outcomes.values():
            outcome.lost = lost
        for service in (server, checkpointer, projector):  # each still running, or its log
            assert service.alive(), f"{service.log_path.name} ended:\n{service.text()[-3000:]}"
        _, top = store.events()
        _until(lambda: min(store.positions().values()) >= top, "the projections catching up")
        for service in services:
            service.stop()
        # Every event applied exactly once: the stored read models are what a
        # rebuild from the log makes, and the checkpoints extend each other.
        verified = ledger(cwd, "--store", url, "verify", "--projections")
        assert verified.returncode == 0, verified.stdout + verified.stderr
    finally:
        for service in services:
            if service.alive():
                service.crash()
        store.drop()
    return list(outcomes.values())
