"""Opening a PostgreSQL store makes one connection, not two: the probe that
names what is wrong with the store at once is the pool's first connection
(ledger.store.pg_probe, ledger.store.pg_factory). Every refusal leaves no
connection open and nothing created."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger.casino import Casino
from ledger.crypto.keystore import KeyDirectory
from ledger.errors import ConfigError, StoreUnavailableError
from ledger.node import open_node
from ledger.store.application import probe_store
from tests.coin_game import COIN_GAMES
from tests.conftest import PASSPHRASE, PG_URL, drop_pg_schema, new_pg_schema
from tests.ports import free_port

pytestmark = pytest.mark.postgres


class Connections:
    """Every connection psycopg made in this process while counting, the pool's included."""

    def __init__(self) -> None:
        self.made: list[psycopg.Connection[Any]] = []

    @property
    def open(self) -> list[psycopg.Connection[Any]]:
        return [connection for connection in self.made if not connection.closed]


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> Connections:
    counted = Connections()
    connect = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

    def counting(cls: type[psycopg.Connection[Any]], *args: Any, **kwargs: Any) -> Any:
        connection = connect(cls, *args, **kwargs)
        counted.made.append(connection)
        return connection

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(counting))
    monkeypatch.setattr(psycopg, "connect", psycopg.Connection.connect)  # its alias too
    return counted


@pytest.fixture
def schema() -> Iterator[str]:
    name = new_pg_schema()
    try:
        yield name
    finally:
        drop_pg_schema(name)


def test_opening_a_store_makes_one_connection_and_the_pool_uses_it(
    connections: Connections, schema: str, keys: KeyDirectory
) -> None:
    connections.made.clear()  # the suite's own, making the schema
    node = open_node(
        f"{PG_URL}?schema={schema}",
        str(keys.path),
        passphrase=PASSPHRASE,
        anchor_seconds=0,
        anchor_events=0,
    )
    try:
        (first,) = connections.made  # the probe's, the one the open made
        pool = node.app.factory.datastore.pool  # type: ignore[attr-defined]
        assert pool.get_stats()["pool_size"] == 1
        casino = Casino(node.app, COIN_GAMES)
        wallet = casino.open_account(request_id="alice", owner="alice", currency="VND")
        casino.deposit(request_id="d1", account_id=wallet, amount=1_000)
        # The pool kept it and served with it (a broken or closed one is "lost").
        assert not first.closed and pool.get_stats().get("connections_lost", 0) == 0
        assert casino.account(wallet).balance == 1_000
    finally:
        node.close()
    assert connections.open == []


def test_a_reader_on_a_missing_schema_is_refused_and_leaves_nothing_open(
    connections: Connections, keys: KeyDirectory
) -> None:
    missing = f"{PG_URL}?schema=t_never_made_{free_port()}"
    connections.made.clear()
    with pytest.raises(ConfigError, match="does not exist in store"):
        open_node(missing, str(keys.path), writable=False)
    assert len(connections.made) == 1 and connections.open == []
    name = missing.rpartition("=")[2]
    with psycopg.connect(PG_URL) as admin:  # nothing was created for it
        found = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,))
        assert found.fetchone() is None


def test_an_unreachable_server_is_one_line_at_once(
    connections: Connections, tmp_path: Path
) -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    with pytest.raises(StoreUnavailableError, match=r"cannot open store .*refused"):
        probe_store(url)
    keys = KeyDirectory(tmp_path / "keys")
    keys.create_node_keys(PASSPHRASE)
    with pytest.raises(StoreUnavailableError, match=r"cannot open store .*refused"):
        open_node(url, str(keys.path), passphrase=PASSPHRASE)
    assert connections.open == []
