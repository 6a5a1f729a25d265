"""Private PostgreSQL clusters for the fault tests: made in a temporary
directory on a loopback port of this worker's range, killed and removed
afterwards, so a test may stop, kill, fill or promote them. The shared server
on 5432 (the rest of the suite's) is never touched.

Made with the server's own tools (`initdb`, `pg_ctl`, `pg_basebackup`) run as
the `postgres` user when the tests run as root (the server refuses to run as
root). Under CI=true a missing tool fails the test; elsewhere it skips it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.ports import free_port

DEBIAN_BINARIES = Path("/usr/lib/postgresql")


def binaries() -> Path:
    """The newest server's binary directory (Debian's layout, or `pg_ctl` on PATH)."""
    found = sorted(
        (p / "bin" for p in DEBIAN_BINARIES.glob("*") if (p / "bin" / "initdb").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    on_path = shutil.which("pg_ctl")
    if on_path and (Path(on_path).parent / "initdb").exists():
        return Path(on_path).parent
    message = "the PostgreSQL server tools (initdb, pg_ctl) are not installed"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _as_server_user() -> dict[str, Any]:
    """subprocess arguments that run a server tool as `postgres` when we are root."""
    if os.geteuid() != 0:
        return {}
    return {"user": "postgres", "group": "postgres", "extra_groups": []}


def _server_owned(path: Path) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


class Cluster:
    """One PostgreSQL cluster: `data` under `root`, listening on 127.0.0.1:`port`."""

    def __init__(self, root: Path, name: str, port: int | None = None) -> None:
        self.root = root
        self.name = name
        self.data = root / name
        self.port = port or free_port()
        self.log = root / f"{name}.log"
        self.bin = binaries()

    def run(self, tool: str, *args: str, timeout: float = 120) -> str:
        done = subprocess.run(
            [str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            **_as_server_user(),
        )
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")
        return done.stdout

    def init(self, **settings: str) -> None:
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        self.configure(wal_level="replica", max_wal_senders="4", **settings)
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.write("host replication all 127.0.0.1/32 trust\n")

    def configure(self, **settings: str) -> None:
        base = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            "max_connections": "40",
            "shared_buffers": "16MB",
            "log_min_messages": "warning",
        }
        with open(self.data / "postgresql.auto.conf", "a") as conf:
            for key, value in (base | settings).items():
                conf.write(f"{key} = {value}\n")

    def standby_of(self, primary: Cluster) -> None:
        """A streaming standby of `primary` (pg_basebackup -R writes its primary_conninfo)."""
        self.run(
            "pg_basebackup", "-D", str(self.data), "-h", "127.0.0.1", "-p", str(primary.port),
            "-U", "postgres", "-X", "stream", "-R", "-c", "fast", "--no-sync",
        )  # fmt: skip
        # Its own port (the copy has the primary's settings), and no synchronous
        # standby of its own: once promoted it has none, and every commit would
        # wait for one forever (a failover tool reconfigures it the same way).
        self.configure(synchronous_standby_names="''")

    def start(self) -> None:
        self.run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log))

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", str(self.data))

    def restart(self, mode: str = "fast") -> None:
        self.run(
            "pg_ctl", "restart", "-w", "-t", "60", "-m", mode, "-D", str(self.data),
            "-l", str(self.log),
        )  # fmt: skip

    def promote(self) -> None:
        self.run("pg_ctl", "promote", "-w", "-t", "60", "-D", str(self.data))

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def url(self, schema: str = "ledger") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?schema={schema}"

    def execute(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(statement, params)
            return list(cursor.fetchall()) if cursor.description else []

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


@contextmanager
def cluster_root() -> Iterator[Path]:
    """A directory the server user may write, removed with every cluster in it
    (each stopped `immediate` first), however the test ended."""
    root = Path(tempfile.mkdtemp(prefix="ledger-pg-"))
    _server_owned(root)
    try:
        yield root
    finally:
        for pid_file in root.glob("*/postmaster.pid"):
            subprocess.run(
                [str(binaries() / "pg_ctl"), "stop", "-m", "immediate", "-D", str(pid_file.parent)],
                capture_output=True,
                timeout=60,
                **_as_server_user(),
            )
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def single() -> Iterator[Cluster]:
    """One private cluster, started."""
    with cluster_root() as root:
        node = Cluster(root, "main")
        node.init()
        node.start()
        yield node


@contextmanager
def replicated() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary and its synchronous standby (every commit waits for the standby)."""
    with cluster_root() as root:
        primary = Cluster(root, "primary")
        primary.init(synchronous_standby_names="'*'", synchronous_commit="on")
        primary.start()
        standby = Cluster(root, "standby")
        standby.standby_of(primary)
        standby.start()
        deadline = time.monotonic() + 30
        while primary.execute("SELECT sync_state FROM pg_stat_replication") != [("sync",)]:
            assert time.monotonic() < deadline, "the standby never became synchronous"
            time.sleep(0.1)
        yield primary, standby
