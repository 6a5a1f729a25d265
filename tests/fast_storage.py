"""Where the suite keeps its stores: storage that does not wait for the disk.

Most of the suite's tests write a store and commit after every command, and
every commit waits for the disk to confirm it: on this project's machines
(a virtual disk) about 5.8 ms a PostgreSQL commit against 0.22 ms without the
wait, and as much for each SQLite commit's fsync. No test crashes the machine
or the machine's PostgreSQL server: the ones that kill a server run clusters
of their own (tests/pg_cluster.py), with their own settings, and a killed
`ledger` process loses nothing either way (what it committed is in the
server's memory or the file's pages, which a process kill does not lose). So
the waits buy the tests nothing, and the suite:

- puts its temporary files (every SQLite store, key directory and export)
  on the machine's shared-memory file system when it has one with room
  (`/dev/shm`, tmpfs: an fsync there returns at once): TMPDIR, for this
  process and every one it starts;
- makes a PostgreSQL database of its own, `ledger_suite`, on the machine's
  server, whose commits do not wait for the disk (`synchronous_commit=off`,
  set on that database only: the server's other databases, `test` included,
  keep their settings).

Each is left alone when the user chose otherwise (TMPDIR, or
LEDGER_TEST_PG_DSN / LEDGER_TEST_PG_URL set), and leaves things as they are
when it cannot apply (no /dev/shm, the server unreachable: the PostgreSQL
tests then fail, naming the server, as they always did).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import psycopg
from psycopg import sql

SHARED_MEMORY = Path("/dev/shm")
ROOM_NEEDED = 4 << 30  # bytes free on it: a whole run writes well under a gigabyte
SUITE_DATABASE = "ledger_suite"
SERVER_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"


def use_memory_temp() -> None:
    """TMPDIR on /dev/shm, for this process and every one it starts (module doc)."""
    if os.environ.get("TMPDIR") or not SHARED_MEMORY.is_dir():
        return
    try:
        room = shutil.disk_usage(SHARED_MEMORY).free
        directory = SHARED_MEMORY / f"ledger-tests-{os.getuid()}"
        directory.mkdir(exist_ok=True)
        directory.chmod(0o711)  # others may pass, as the private clusters' `postgres` must
    except OSError:
        return
    if room < ROOM_NEEDED or not os.access(directory, os.W_OK | os.X_OK):
        return
    os.environ["TMPDIR"] = str(directory)
    tempfile.tempdir = str(directory)  # gettempdir() may have cached /tmp already


def suite_database(dsn: str = SERVER_DSN) -> str | None:
    """The suite's own database on the machine's server, made if missing, with
    its commits not waiting for the disk; None when the server cannot be reached."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=3) as admin:
            found = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (SUITE_DATABASE,)
            ).fetchone()
            name = sql.Identifier(SUITE_DATABASE)
            if found is None:
                admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
            admin.execute(sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(name))
    except psycopg.Error:
        return None
    return SUITE_DATABASE
