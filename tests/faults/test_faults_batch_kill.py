"""`ledger serve` killed (kill -9) while batches of bets are in flight, on both
stores: every bet a batch's answer acknowledged is in the log once; each batch
sent again to the restarted server answers its bets with their first results
(one never answered is placed once); nothing is half-written."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests import local_http
from tests.fault_support import Casino, Server, read_log, set_up_casino

BATCH = 50


class Batches(threading.Thread):
    """Sends batches of new bets until the server stops answering."""

    def __init__(self, base: str, casino: Casino) -> None:
        super().__init__(daemon=True)
        self.base, self.casino = base, casino
        self.sent: list[list[dict[str, Any]]] = []  # every batch sent, answered or not
        self.acked: dict[str, str] = {}  # request id -> bet id, from an answer

    def run(self) -> None:
        path = f"/v1/rounds/{self.casino.round_id}/bets/batch"
        headers = {"Authorization": f"Bearer {self.casino.operator}"}
        with local_http.client(base_url=self.base, timeout=30) as http:
            for n in range(10_000):
                bets = [
                    {
                        "request_id": str(uuid.uuid4()),
                        "account_id": self.casino.wallets[(n + k) % len(self.casino.wallets)],
                        "bet": {"bet": "big"},
                        "stake": 10,
                    }
                    for k in range(BATCH)
                ]
                self.sent.append(bets)
                try:
                    answer = http.post(path, json={"bets": bets}, headers=headers)
                except httpx.TransportError:
                    return  # the server is gone
                assert answer.status_code == 200, answer.text
                for bet in answer.json()["bets"]:
                    assert bet["status"] == 201, bet
                    self.acked[bet["request_id"]] = bet["bet_id"]


def test_a_server_killed_mid_batch_loses_no_acknowledged_bet(
    tmp_path: Path, store_url: str
) -> None:
    server = Server(tmp_path, store_url)
    try:
        casino = set_up_casino(tmp_path, server.base)
        client = Batches(server.base, casino)
        client.start()
        deadline = time.monotonic() + 60
        while len(client.acked) < 3 * BATCH:
            assert client.is_alive() and time.monotonic() < deadline, "no batch answered"
            time.sleep(0.01)
        server.crash()  # kill -9, the client mid-batch
        client.join(timeout=60)
        assert not client.is_alive()
    finally:
        if server.alive():
            server.crash()
    acknowledged = dict(client.acked)
    assert len(client.sent) * BATCH > len(acknowledged)  # a batch was in flight
    # Every acknowledged bet is in the log once, with its stake debited.
    log = read_log(tmp_path, store_url)
    assert all(log.placed[bet_id] == 1 for bet_id in acknowledged.values())
    assert sum(log.placed.values()) == log.debits, "a bet without its debit (half-written)"
    # The client sends every batch again, as it would after the crash.
    again = Server(tmp_path, store_url)
    try:
        path = f"/v1/rounds/{casino.round_id}/bets/batch"
        headers = {"Authorization": f"Bearer {casino.operator}"}
        placed: dict[str, str] = {}
        with local_http.client(base_url=again.base, timeout=60) as http:
            for bets in client.sent:
                answer = http.post(path, json={"bets": bets}, headers=headers)
                assert answer.status_code == 200, answer.text
                for bet in answer.json()["bets"]:
                    assert bet["status"] == 201, bet
                    placed[bet["request_id"]] = bet["bet_id"]
    finally:
        again.stop()
    assert {k: placed[k] for k in acknowledged} == acknowledged  # their first results
    log = read_log(tmp_path, store_url)
    assert log.placed == Counter(placed.values())  # every bet sent, once
    assert all(count == 1 for count in log.by_request.values())
    assert sum(log.placed.values()) == log.debits
