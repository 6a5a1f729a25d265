"""`kill -9` of `ledger serve` in the middle of a betting burst, then a restart
(issue 17), on both stores (SQLite with one worker, PostgreSQL with two): every
acknowledged bet is in the log exactly once, nothing is half-written (each bet
with its debit and its request's index row, or nothing of it), every request sent
again after the restart gets its first result or is placed once, and verify
passes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.node import open_node
from tests import local_http
from tests.casino_support import notifications
from tests.conftest import PASSPHRASE
from tests.http_api.test_http_serve import LIMITS, call, ledger, token
from tests.ports import free_port

CLIENTS = 12
WALLETS = 24


class Server:
    """`ledger serve` in a session of its own: `crash` kills it and its workers at once."""

    def __init__(self, cwd: Path, store: str, workers: int) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(cwd / f"serve-{self.port}.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ledger.cli.main", "--store", store, "serve",
             "--port", str(self.port), "--workers", str(workers)],
            cwd=cwd,
            env={**os.environ, "LEDGER_PASSPHRASE": PASSPHRASE.decode()},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while True:
            if local_http.serving(self.base):
                return
            assert self.process.poll() is None and time.monotonic() < deadline, self.log.name
            time.sleep(0.05)

    def crash(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()

    def stop(self) -> None:
        self.interrupt()
        self.wait()

    def interrupt(self) -> None:
        """Ctrl-C, once (a second one is uvicorn's force exit)."""
        self.process.send_signal(signal.SIGINT)

    def wait(self) -> None:
        self.process.wait(timeout=60)
        self.log.close()


def funded_round(base: str, cashier: str, operator: str, wallets: int) -> tuple[str, list[str]]:
    """An open RNG Tài Xỉu round and `wallets` funded wallets, over HTTP."""
    funded = []
    for n in range(wallets):
        made = call(base, "POST", "/v1/accounts", cashier,
                    {"owner": f"p{n}", "currency": "EUR"}, f"a{n}")  # fmt: skip
        wallet = made.json()["account_id"]
        call(base, "POST", f"/v1/accounts/{wallet}/deposits", cashier,
             {"amount": 10**8}, f"d{n}")  # fmt: skip
        funded.append(wallet)
    table = call(base, "POST", "/v1/tables", operator,
                 {"name": "Live", "game": "taixiu", "kind": "rng", "currency": "EUR",
                  "limits": LIMITS}, "t").json()["table_id"]  # fmt: skip
    call(base, "POST", f"/v1/tables/{table}/seeds", operator, None, "s")
    round_id = call(base, "POST", "/v1/rounds", operator,
                    {"table_id": table, "dealer": "D"}, "r").json()["round_id"]  # fmt: skip
    return round_id, funded


def test_a_burst_survives_kill_9_of_the_server(tmp_path: Path, store_url: str) -> None:
    workers = 1 if store_url.startswith("sqlite") else 2
    cashier, operator = token(tmp_path, "cashier"), token(tmp_path, "operator")
    server = Server(tmp_path, store_url, workers)
    try:
        round_id, wallets = funded_round(server.base, cashier, operator, WALLETS)
    except BaseException:
        server.stop()
        raise
    sent: dict[str, dict[str, Any]] = {}  # request id -> body
    acked: dict[str, str] = {}  # request id -> bet id
    lock = threading.Lock()
    stop = threading.Event()

    def client(n: int) -> None:
        with local_http.client(base_url=server.base, timeout=30) as http:
            while not stop.is_set():
                key = str(uuid.uuid4())
                body = {"account_id": wallets[n % WALLETS], "bet": {"bet": "big"}, "stake": 10}
                with lock:
                    sent[key] = body
                try:
                    answer = http.post(
                        f"/v1/rounds/{round_id}/bets",
                        json=body,
                        headers={"Authorization": f"Bearer {operator}", "Idempotency-Key": key},
                    )
                except httpx.TransportError:
                    return  # the server is gone: this request's answer never came
                if answer.status_code == 201:
                    with lock:
                        acked[key] = answer.json()["bet_id"]

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while len(acked) < 300 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.crash()  # mid-burst: requests in flight, batches half applied
    stop.set()
    for thread in threads:
        thread.join()
    assert len(acked) >= 300, "the burst never got going"
    unanswered = set(sent) - set(acked)

    # Nothing half-written: every bet has its debit and its request, once.
    node = open_node(store_url, str(tmp_path / "keys"), writable=False)
    try:
        topics: Counter[str] = Counter()
        for notification in notifications(node.app):
            topics[notification.topic.rsplit(":", 1)[-1]] += 1
        indexed = node.app.tables.indexed_requests(list(sent))
    finally:
        node.close()
    bets = topics["Round.BetPlaced"]
    assert bets >= len(acked)
    assert topics["Account.Debited"] == bets  # a bet never lacks its stake's debit
    assert len(indexed) == bets  # nor the index row a retry finds it by
    # Every request sent again after a restart: its first result, or placed once now.
    restarted = Server(tmp_path, store_url, workers)
    try:
        for key in list(acked):
            again = call(restarted.base, "POST", f"/v1/rounds/{round_id}/bets", operator,
                         sent[key], key)  # fmt: skip
            assert again.status_code == 201 and again.json()["bet_id"] == acked[key]
        for key in unanswered:
            again = call(restarted.base, "POST", f"/v1/rounds/{round_id}/bets", operator,
                         sent[key], key)  # fmt: skip
            assert again.status_code == 201, again.text
            acked[key] = again.json()["bet_id"]
    finally:
        restarted.stop()
    node = open_node(store_url, str(tmp_path / "keys"), writable=False)
    try:
        placed: Counter[str] = Counter()
        requests: Counter[str] = Counter()
        for notification in notifications(node.app):
            if notification.topic.endswith("Round.BetPlaced"):
                event: Any = node.app.mapper.to_domain_event(notification)
                placed[event.bet_id] += 1
                requests[event.request_id] += 1
    finally:
        node.close()
    assert placed == Counter(acked.values())  # each acknowledged bet once, nothing else
    assert set(requests) == set(sent) and set(requests.values()) == {1}
    checkpointed = ledger(tmp_path, "--store", store_url, "checkpoint")
    assert checkpointed.returncode == 0, checkpointed.stderr
    verified = ledger(tmp_path, "--store", store_url, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.fixture(autouse=True)
def _no_stray_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGER_PROGRESS_INTERVAL", "off")
