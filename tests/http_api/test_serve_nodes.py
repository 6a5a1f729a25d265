"""Nodes on one PostgreSQL store hand a round's bets to the one writer that
sequences it (issue 38, item 5; `ledger.casino.round_routes`): a bet taken
by another node is placed there and answered as the route answers; a row
an attacker pointed at a writer of their own gets it no bet; `kill -9` of
the round's writer in the middle of a burst loses and doubles nothing."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from ledger.casino.round_routes import ROUTE_SECONDS
from tests.conftest import PG_DSN, new_store
from tests.http_api.test_http_serve import call, token
from tests.http_api.test_serve_kill import Server, funded_round
from tests.http_api.test_serve_writer_process import (
    BetBurst,
    bet,
    checkpointed_and_verified,
    placed_while_stopped,
    round_bets,
    writer_of,
)

pytestmark = pytest.mark.postgres


@contextmanager
def two_nodes(tmp_path: Path) -> Iterator[tuple[str, Server, Server, str, str, list[str]]]:
    """Nodes A and B (`ledger serve`, default settings) on one schema, an
    operator's token, an open round and funded wallets; A has taken a bet, so
    A's writer sequences the round."""
    with new_store("postgres", tmp_path) as url:
        cashier, operator = token(tmp_path, "cashier"), token(tmp_path, "operator")
        a = Server(tmp_path, url, 1)
        b = Server(tmp_path, url, 1)
        try:
            round_id, wallets = funded_round(a.base, cashier, operator, 6)
            body = {"account_id": wallets[0], "bet": {"bet": "big"}, "stake": 10}
            first = bet(a.base, operator, round_id, body, "on-a")
            assert first.status_code == 201, first.text
            yield url, a, b, operator, round_id, wallets
        finally:
            stop_nodes(*(server for server in (a, b) if server.process.poll() is None))


def stop_nodes(*servers: Server) -> None:
    """Ctrl-C to every node, then the wait for each: a node stopped while
    another still runs waits for that node's link to its writer to hang up
    (the writer gives a connection HANG_UP_SECONDS, 30 s, after a stop)."""
    for server in servers:
        server.interrupt()
    for server in servers:
        server.wait()


def round_writer(url: str, round_id: str) -> str:
    schema = url.rpartition("schema=")[2]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        row = conn.execute(
            f'SELECT address FROM "{schema}".ledger_round_writers WHERE round_id = %s', (round_id,)
        ).fetchone()
    assert row is not None, "no writer claimed the round"
    return str(row[0])


def test_a_bet_taken_by_another_node_is_placed_by_the_round_s_writer(tmp_path: Path) -> None:
    """While A's writer is stopped (SIGSTOP), a bet sent to B is not answered:
    B hands it to A. Its answers are the route's (a retry, a reused request id,
    a batch with a refused bet)."""
    with two_nodes(tmp_path) as (url, a, b, operator, round_id, wallets):
        assert round_writer(url, round_id).startswith("127.0.0.1:")
        body = {"account_id": wallets[1], "bet": {"bet": "big"}, "stake": 10}
        # A's writer stopped, node B cannot answer: it handed the bet to A.
        first = placed_while_stopped(writer_of(a), b.base, operator, round_id, body, "on-b")
        again = bet(b.base, operator, round_id, body, "on-b")
        assert again.status_code == 201 and again.json() == first.json()
        reused = bet(b.base, operator, round_id, {**body, "stake": 11}, "on-b")
        assert reused.status_code == 409 and reused.json()["error"] == "RequestIdReusedError"
        batch = call(b.base, "POST", f"/v1/rounds/{round_id}/bets/batch", operator, {
            "bets": [
                {"request_id": "c1", **body},
                {"request_id": "c2", **body, "stake": 10**9},
                {"request_id": "on-a", **body, "account_id": wallets[0]},
            ]})  # fmt: skip
        assert batch.status_code == 200, batch.text
        c1, c2, on_a = batch.json()["bets"]
        assert c1["bet_id"] and c1["error"] is None
        assert c2["bet_id"] is None and c2["error"] == "InvalidCommandError"
        assert on_a["bet_id"] and on_a["error"] is None
        stop_nodes(a, b)
        assert round_bets(tmp_path, url) == Counter({"on-a": 1, "on-b": 1, "c1": 1})


def test_a_row_pointed_at_a_writer_without_the_key_gets_no_bet(tmp_path: Path) -> None:
    """An attacker with database rights points the round's row at a listener of
    their own: B finds it cannot prove the key, places the bet itself, and
    the listener is sent nothing but the handshake."""
    received: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def impostor() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.sendall(b"ledger-bets/1 " + b"00" * 16 + b"\n")
                connection.settimeout(2)
                try:
                    while chunk := connection.recv(65536):
                        received.append(chunk)
                    connection.sendall(b"11" * 32 + b"\n")  # a proof it cannot make
                except OSError:
                    pass

    accepting = threading.Thread(target=impostor, daemon=True)
    accepting.start()
    with two_nodes(tmp_path) as (url, a, b, operator, round_id, wallets):
        schema = url.rpartition("schema=")[2]
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(
                f'UPDATE "{schema}".ledger_round_writers SET address = %s WHERE round_id = %s',
                (f"127.0.0.1:{listener.getsockname()[1]}", round_id),
            )
        body = {"account_id": wallets[2], "bet": {"bet": "small"}, "stake": 10}
        placed = bet(b.base, operator, round_id, body, "past-the-impostor")
        assert placed.status_code == 201, placed.text
        stop_nodes(a, b)
        listener.shutdown(socket.SHUT_RDWR)  # (wakes the impostor; see test_peer_link's PeerWriter)
        accepting.join()
        listener.close()
        sent = b"".join(received)
        assert b"past-the-impostor" not in sent and b"small" not in sent
        assert round_bets(tmp_path, url) == Counter({"on-a": 1, "past-the-impostor": 1})


def test_kill_9_of_the_round_s_writer_loses_and_doubles_nothing(tmp_path: Path) -> None:
    """Clients bet through B while A's writer, which sequences the round, is
    killed: B places the bets A took and never answered (those A committed
    are found by request id) and claims the round. Every request is answered
    201, a retry gets its first bet, the round holds one bet per request id,
    and verify passes."""
    with two_nodes(tmp_path) as (url, a, b, operator, round_id, wallets):
        writer_a = writer_of(a)
        sequenced_by_a = round_writer(url, round_id)
        burst = BetBurst(b.base, operator, round_id, wallets)
        burst.wait_for(150)
        os.kill(writer_a, signal.SIGKILL)
        before = len(burst.acked)
        burst.wait_for(before + 150)
        burst.stop()
        assert len(burst.acked) >= before + 150, "no bets were placed after the round's writer died"
        # B claims the round once PostgreSQL has ended A's session and B's
        # route is asked again (within ROUTE_SECONDS of a bet).
        claimed_by = time.monotonic() + 3 * ROUTE_SECONDS
        while round_writer(url, round_id) in ("", sequenced_by_a):
            assert time.monotonic() < claimed_by, "nobody claimed the round after its writer died"
            key = str(uuid.uuid4())
            burst.bodies[key] = {"account_id": wallets[0], "bet": {"bet": "big"}, "stake": 10}
            placed = bet(b.base, operator, round_id, burst.bodies[key], key)
            assert placed.status_code == 201, placed.text
            burst.acked[key] = placed.json()["bet_id"]
            time.sleep(0.5)
        burst.check_retries(b.base)
        stop_nodes(a, b)
        assert round_bets(tmp_path, url) == Counter({"on-a": 1, **dict.fromkeys(burst.acked, 1)})
        checkpointed_and_verified(tmp_path, url)


@pytest.fixture(autouse=True)
def _no_stray_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_PROGRESS_INTERVAL", "off")
