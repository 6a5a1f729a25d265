"""Shared fixtures: a store on each backend, keys, an open node.

PostgreSQL tests run against the server on this machine (and CI's); an
unreachable server fails them, it never skips them.
"""

from __future__ import annotations

import functools
import gc
import io
import os
import signal
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from psycopg.conninfo import conninfo_to_dict

from ledger.crypto.keystore import KeyDirectory
from ledger.node import Node, open_node
from tests.bytecode_cache import use_bytecode_cache
from tests.fast_storage import suite_database, use_memory_temp

# The suite's own database (tests/fast_storage.py), made by the first process
# (pytest's, before its workers start); "test" when the server is unreachable,
# where the PostgreSQL tests then fail naming it.
if "LEDGER_TEST_PG_DATABASE" not in os.environ:  # (set for the workers and subprocesses)
    chosen = os.environ.get("LEDGER_TEST_PG_DSN") is None and suite_database()
    os.environ["LEDGER_TEST_PG_DATABASE"] = chosen or "test"
_DATABASE = os.environ["LEDGER_TEST_PG_DATABASE"]
PG_DSN = os.environ.get(
    "LEDGER_TEST_PG_DSN", f"host=127.0.0.1 port=5432 user=postgres dbname={_DATABASE}"
)
PG_URL = os.environ.get("LEDGER_TEST_PG_URL", f"postgresql://postgres@127.0.0.1:5432/{_DATABASE}")
PASSPHRASE = b"correct horse battery staple"

# No progress lines on the captured stderr of a slow run (tests assert it is
# empty); tests/cli/test_cli_progress.py turns them on where it checks them.
os.environ.setdefault("LEDGER_PROGRESS_INTERVAL", "off")
use_bytecode_cache()  # before xdist starts its workers: they and every subprocess inherit it
use_memory_temp()  # (tests/fast_storage.py) the same

# Property tests draw the same examples every run (a failure in CI replays
# anywhere), and no example fails for taking long on a loaded machine: no
# per-example deadline, no health check on generation speed. A test's own
# @settings still decides how many examples it runs.
settings.register_profile(
    "ledger-suite", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ledger-suite")

# Tests stop the servers and writers they start with SIGINT, as a user's ^C
# would. A suite started in the background (nohup, `&` in a script) inherits
# SIGINT ignored, and so would every process it starts, which would then run
# on: a handler of our own is reset to the default in each child instead.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The files that take longest, longest first (their wall time summed over
# their tests, one run of the whole suite, 2026-12-06, AMD EPYC guest): each
# file runs on one pytest-xdist worker, and a long file started last leaves
# the other workers idle while it finishes (test_publish.py, left off the
# earlier list, ran alone for the last 28 s). pyproject's
# `--no-loadscope-reorder` keeps this order (xdist would otherwise hand out
# the files with the most tests first). The rest keep their order.
SLOW_FIRST = (
    "test_http_fuzz.py",  # Schemathesis over every operation, both stores
    "test_readme.py",  # every doc block, one after the other, in one test
    "test_mirror_cli.py",  # real servers and mirrors, killed and resumed
    "test_publish.py",  # NATS servers of its own, publishers killed
    "test_archive.py",
    "test_native_sanitized.py",  # the C fast path built again under ASan
    "test_anchor.py",
    "test_serve_writer_process.py",
    "test_rules_over_time.py",
    "test_tiles.py",
    "test_projections.py",
    "test_mirror.py",
    "test_report.py",
    "test_serve_anchor_process.py",
    "test_serve_self_verification.py",
    "test_http_contract.py",
    "test_serve_nodes.py",
    "test_http_sessions.py",
    "test_canonical.py",
    "test_http_new_user.py",
    "test_http_roles.py",
    "test_cli_pipes.py",
    "test_serve_kill.py",
    "test_money_properties.py",
    "test_export_independent.py",
    "test_faults_disk_full.py",
    "test_checkpoint_attacks.py",
    "test_significant.py",
    "test_simulation.py",
    "test_faults_killed_services.py",
    "test_tlog_http.py",
    "test_checkpoint_note_attacks.py",
    "test_faults_restarts.py",
)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject's addopts): one worker more than the usable cores.

    A good part of the suite waits rather than computes (servers and writers
    it starts, killed and restarted, subprocesses, PostgreSQL's replies), so
    with a worker per core a core idles while its worker waits. On this
    project's 2-core machine the whole suite took 534 s with 2 workers and
    429 s with 3 (two runs one after the other, 2026-12-04). With
    PYTEST_XDIST_AUTO_NUM_WORKERS set, xdist's own hook decides (None: the
    next implementation answers)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: number for number, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW_FIRST)))


# The garbage collector's work in a test process. Its full collections walk
# every object alive, and a worker's heap grew to over a million objects: the
# modules and collected tests (170,000 objects, alive to the end), and every
# FastAPI app a test had built, which FastAPI's caches of what each endpoint
# function is (fastapi.dependencies.models, up to 4,096 functions each) kept
# alive with their routes, models and service. So the collected tests are
# frozen once collected (gc.freeze: no collection walks them again), and those
# caches are emptied after each test (FastAPI fills them again as it needs).
# 399 HTTP tests in one process: 51.6 s of CPU before, 42.9 s after, 2.2 s of
# it in the collector in place of 6.4 s. No test's objects are frozen.


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()


def pytest_runtest_teardown(item: pytest.Item) -> None:
    models = sys.modules.get("fastapi.dependencies.models")
    for value in vars(models).values() if models is not None else ():
        if isinstance(value, functools._lru_cache_wrapper):
            value.cache_clear()


def require_postgres() -> None:
    """PostgreSQL is part of the suite everywhere: unreachable means failed, never skipped.

    (Start it with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`.)
    """
    try:  # on the test process's one admin connection: a new one a test was a server process each
        _admin_execute("SELECT 1")
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL unreachable at {PG_DSN}: {exc}")


# One connection per test process for making and dropping schemas: two new
# server processes for every PostgreSQL test's store were a good part of its set-up.
_admin: psycopg.Connection[tuple[object, ...]] | None = None


def _admin_execute(statement: str) -> None:
    global _admin
    for attempt in range(2):
        if _admin is None or _admin.closed:
            _admin = psycopg.connect(PG_DSN, autocommit=True, connect_timeout=3)
        try:
            _admin.execute(statement)
            return
        except psycopg.OperationalError:  # the server restarted since: once more, anew
            _admin.close()
            _admin = None
            if attempt:
                raise


def pg_params() -> dict[str, str]:
    """The suite's server as eventsourcing's `PostgresDatastore` takes it (from PG_DSN)."""
    given = conninfo_to_dict(PG_DSN)
    return {
        "dbname": str(given.get("dbname", "test")),
        "host": str(given.get("host", "127.0.0.1")),
        "port": str(given.get("port", "5432")),
        "user": str(given.get("user", "postgres")),
        "password": str(given.get("password", "")),
    }


def new_pg_schema() -> str:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    _admin_execute(f'CREATE SCHEMA "{schema}"')
    return schema


def drop_pg_schema(schema: str) -> None:
    _admin_execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def new_store(kind: str, directory: Path) -> Iterator[str]:
    """A fresh, empty store URL of this kind ("sqlite": a file in `directory`;
    "postgres": a schema of its own, dropped afterwards), for a module's world."""
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'ledger.db'}"
        return
    require_postgres()
    schema = new_pg_schema()
    try:
        yield f"{PG_URL}?schema={schema}"
    finally:
        drop_pg_schema(schema)


@contextmanager
def ledger_cli(store: str, keys: Path) -> Iterator[Callable[..., int]]:
    """`ledger --store STORE --keys KEYS ARGS...` run in this process, as a user
    with the tests' passphrase and nothing on standard input: its exit code."""
    from ledger.cli.main import main

    patch = pytest.MonkeyPatch()
    patch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    patch.setattr(sys, "stdin", io.StringIO(""))
    try:
        yield lambda *args: main(["--store", store, "--keys", str(keys), *map(str, args)])
    finally:
        patch.undo()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store URL on each backend."""
    with new_store(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def keys(tmp_path: Path) -> KeyDirectory:
    directory = KeyDirectory(tmp_path / "keys")
    directory.create_node_keys(PASSPHRASE)
    return directory


@pytest.fixture
def node(store_url: str, keys: KeyDirectory) -> Iterator[Node]:
    # No background anchor: tests checkpoint explicitly (tests/store/test_anchor.py runs it).
    opened = open_node(
        store_url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
    )
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="session")
def tlogcheck(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiles' and tlog-proofs' checker on Go's x/mod (tests/go_tlog.py)."""
    from tests.go_tlog import build_tlogcheck

    return build_tlogcheck(tmp_path_factory.mktemp("tlogcheck"))
