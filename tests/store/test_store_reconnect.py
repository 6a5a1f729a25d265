"""Multi-host store URLs and the node's retry of a commit whose answer was
lost (issue 22).

A URL may name a primary and its standbys; libpq keeps the first server that
takes writes. A commit whose answer is lost (the connection dropped after the
server committed) is sent again by the recorder; the same sealed rows
conflict with themselves on the events table's unique (stream, version), and
the command runner then answers the command from its stored request record:
one event per write, the first result, never a duplicate."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from eventsourcing.persistence import OperationalError

from ledger.casino import Casino
from ledger.crypto.keystore import KeyDirectory
from ledger.errors import ConfigError
from ledger.node import open_node
from ledger.store.config import environment_for
from tests.casino_support import event_count, notifications
from tests.coin_game import COIN_GAMES
from tests.conftest import PASSPHRASE, PG_URL, drop_pg_schema, new_pg_schema, require_postgres
from tests.ports import free_port


def test_a_url_names_several_hosts_for_libpq() -> None:
    env = environment_for("postgresql://u:pw@a.example:5433,[::1],b:7/db?schema=s")
    assert env["POSTGRES_HOST"] == "a.example,::1,b"
    assert env["POSTGRES_PORT"] == "5433,5432,7"
    assert (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"]) == ("u", "pw")
    assert env["POSTGRES_TARGET_SESSION_ATTRS"] == "read-write"  # several hosts: the primary
    one = environment_for("postgresql://u@a/db")
    assert (one["POSTGRES_HOST"], one["POSTGRES_PORT"]) == ("a", "5432")
    assert one["POSTGRES_TARGET_SESSION_ATTRS"] == "any"
    given = environment_for("postgresql://u@a,b/db?target_session_attrs=primary")
    assert given["POSTGRES_TARGET_SESSION_ATTRS"] == "primary"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql://u@a,,b/db", "bad host ''"),
        ("postgresql://u@a:99999/db", "bad host 'a:99999'"),
        ("postgresql://u@a:x/db", "bad host 'a:x'"),
        ("postgresql://u@a/db?target_session_attrs=writer", "bad target_session_attrs 'writer'"),
        ("postgresql://u@a/db?sslmode=disable", "unknown store URL option 'sslmode'"),
        ("postgresql://u@/db", "bad store URL"),
        ("postgresql://u:secret@a,b:0/db", "bad host 'b:0'"),
    ],
)
def test_a_bad_host_list_is_one_clear_line(url: str, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        environment_for(url)
    assert says in str(raised.value) and "secret" not in str(raised.value)


@contextmanager
def pg_schema() -> Iterator[str]:
    require_postgres()
    schema = new_pg_schema()
    try:
        yield schema
    finally:
        drop_pg_schema(schema)


def _shared_host() -> str:
    return PG_URL.split("@", 1)[1].split("/", 1)[0]


@pytest.mark.postgres
def test_a_host_that_does_not_answer_is_passed_over(keys: KeyDirectory) -> None:
    with pg_schema() as schema:
        user = PG_URL.split("://", 1)[1].split("@", 1)[0]
        database = PG_URL.rsplit("/", 1)[1]
        nothing_there = f"127.0.0.1:{free_port()}"
        url = f"postgresql://{user}@{nothing_there},{_shared_host()}/{database}?schema={schema}"
        node = open_node(url, str(keys.path), passphrase=PASSPHRASE)
        try:
            casino = Casino(node.app, COIN_GAMES)
            account = casino.open_account(request_id="a", owner="p", currency="EUR")
            assert casino.deposit(request_id="d", account_id=account, amount=5) == 5
        finally:
            node.close()


class LoseTheFirstAnswer:
    """Around the recorder's insert: let the server commit, then fail as a
    dropped connection would before the answer arrives (once)."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.inserting = False
        self.lost = 0
        self._insert = recorder.insert_events
        self._connection = recorder.datastore.get_connection
        recorder.insert_events = self.insert_events
        recorder.datastore.get_connection = self.get_connection

    def insert_events(self, *args: Any, **kwargs: Any) -> Any:
        self.inserting = True
        try:
            return self._insert(*args, **kwargs)
        finally:
            self.inserting = False

    @contextmanager
    def get_connection(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with self._connection(*args, **kwargs) as connection:
            yield connection
        if self.inserting and not self.lost:  # committed: the answer is what is lost
            self.lost += 1
            raise OperationalError("server closed the connection unexpectedly")


@pytest.mark.postgres
def test_a_commit_whose_answer_was_lost_is_answered_once(keys: KeyDirectory) -> None:
    with pg_schema() as schema:
        url = f"{PG_URL}?schema={schema}"
        node = open_node(
            url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
        )
        try:
            casino = Casino(node.app, COIN_GAMES)
            account = casino.open_account(request_id="a", owner="p", currency="EUR")
            casino.deposit(request_id="d", account_id=account, amount=500)
            events = event_count(node.app)
            fault = LoseTheFirstAnswer(node.app.sealed_recorder)
            assert casino.deposit(request_id="d2", account_id=account, amount=70) == 570
            assert fault.lost == 1  # the fault happened: the commit's answer was lost once
            # One deposit's events (its credit and its request record), once.
            written = notifications(node.app)[events:]
            assert sorted(n.topic.rsplit(":", 1)[-1] for n in written) == [
                "Account.Deposited",
                "Request.Completed",
            ], [n.topic for n in written]
            # The client's own retry: the first result, nothing more written.
            assert casino.deposit(request_id="d2", account_id=account, amount=70) == 570
            assert event_count(node.app) == events + 2
        finally:
            node.close()
