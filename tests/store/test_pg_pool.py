"""A PostgreSQL store keeps one connection open and opens more only when
concurrent work asks for them (ledger.store.config): a command or a verify
worker is one server process, not five, and `ledger serve` still grows its
pool under load."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.crypto.keys import Keyring
from ledger.store.application import LedgerApplication
from tests.conftest import new_store

pytestmark = pytest.mark.postgres


@pytest.fixture
def app(tmp_path: Path) -> Iterator[LedgerApplication]:
    with new_store("postgres", tmp_path) as url:
        opened = LedgerApplication(url, keyring=Keyring())
        try:
            yield opened
        finally:
            opened.close()


def pool_of(app: LedgerApplication) -> Any:
    return app.recorder.datastore.pool  # type: ignore[attr-defined]


def test_an_open_store_holds_one_connection(app: LedgerApplication) -> None:
    app.tables.tail()  # a read: the pool is open and has served
    stats = pool_of(app).get_stats()
    assert (stats["pool_min"], stats["pool_max"]) == (1, 15)
    assert stats["pool_size"] == 1
    assert stats["connections_num"] == 1  # made, in all: a server process forked for each


def test_concurrent_work_grows_the_pool_up_to_what_it_asks(app: LedgerApplication) -> None:
    app.tables.tail()
    held = threading.Barrier(4, timeout=30)
    seen: list[int] = []

    def hold() -> None:
        with app.recorder.datastore.get_connection() as conn:  # type: ignore[attr-defined]
            seen.append(conn.info.backend_pid)
            held.wait()  # all three at once: the pool had to make two more
            held.wait()

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for thread in threads:
        thread.start()
    held.wait()
    assert len(set(seen)) == 3
    assert pool_of(app).get_stats()["pool_size"] >= 3
    held.wait()
    for thread in threads:
        thread.join()
