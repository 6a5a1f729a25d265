"""What the fault tests share: `ledger serve` and the other services as
processes, a burst of bets over HTTP whose clients retry with the same
Idempotency-Key as a real client would, and the checks made afterwards.

A client sends a bet with a new key and keeps sending it, with that key,
until it gets an answer it can act on: a 201 (acknowledged), or a 4xx (the
ledger refused it). A 503 is retried after its Retry-After; a connection
that fails is retried at once. Every first 201 is kept with its bet id: the
checks then require each acknowledged bet in the log exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ledger.http.tokens import ApiRole, TokenStore
from ledger.node import open_node
from tests import local_http
from tests.casino_support import notifications
from tests.conftest import PASSPHRASE
from tests.http_api.test_http_serve import LIMITS, call
from tests.ports import free_port

WALLETS = 12


def service_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "LEDGER_PASSPHRASE": PASSPHRASE.decode(),
        "LEDGER_PROGRESS_INTERVAL": "off",
        **extra,
    }


class Service:
    """A `ledger` command run as a service (its own session, its log in `cwd`)."""

    def __init__(self, cwd: Path, name: str, args: list[str], env: dict[str, str]) -> None:
        self.log_path = cwd / f"{name}.log"
        self.log = open(self.log_path, "a")  # noqa: SIM115 (closed by stop/crash)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ledger.cli.main", *args],
            cwd=cwd,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def crash(self) -> None:
        """kill -9 of the service and every process it started."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()

    def stop(self, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
        return self.process.returncode

    def text(self) -> str:
        self.log.flush()
        return self.log_path.read_text()


class Server(Service):
    """`ledger serve` on a free port, answering once started."""

    def __init__(self, cwd: Path, store: str, workers: int = 1, **env: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        args = ["--store", store, "serve", "--port", str(self.port), "--workers", str(workers)]
        super().__init__(cwd, f"serve-{self.port}", args, service_env(**env))
        deadline = time.monotonic() + 90
        while True:
            if local_http.serving(self.base):
                return
            if not self.alive() or time.monotonic() > deadline:
                self.crash()
                raise AssertionError(f"ledger serve did not start: {self.text()}")
            time.sleep(0.05)


@dataclass
class Casino:
    """The tokens, wallets and open round a burst bets on."""

    operator: str
    wallets: list[str]
    round_id: str


def api_token(cwd: Path, role: ApiRole) -> str:
    """A token as `ledger tokens create` makes it (the server reads the file per request)."""
    text, _ = TokenStore(cwd / "keys").create(role)
    return text


def set_up_casino(cwd: Path, base: str) -> Casino:
    cashier, operator = api_token(cwd, ApiRole.CASHIER), api_token(cwd, ApiRole.OPERATOR)
    wallets = []
    for n in range(WALLETS):
        made = call(base, "POST", "/v1/accounts", cashier,
                    {"owner": f"p{n}", "currency": "EUR"}, f"a{n}")  # fmt: skip
        assert made.status_code == 201, made.text
        wallet = made.json()["account_id"]
        call(base, "POST", f"/v1/accounts/{wallet}/deposits", cashier, {"amount": 10**8}, f"d{n}")
        wallets.append(wallet)
    table = call(base, "POST", "/v1/tables", operator,
                 {"name": "Live", "game": "taixiu", "kind": "rng", "currency": "EUR",
                  "limits": LIMITS}, "t").json()["table_id"]  # fmt: skip
    call(base, "POST", f"/v1/tables/{table}/seeds", operator, None, "s")
    made = call(base, "POST", "/v1/rounds", operator, {"table_id": table, "dealer": "D"}, "r")
    assert made.status_code == 201, made.text
    return Casino(operator, wallets, made.json()["round_id"])


@dataclass
class Burst:
    """Bets from `clients` threads against `base` until `stop`."""

    base: str
    casino: Casino
    clients: int = 4
    sent: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> body
    acked: dict[str, str] = field(default_factory=dict)  # key -> bet id, the first 201
    # (the acknowledged attempt sent, answered): monotonic times
    acked_at: list[tuple[float, float]] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)  # key -> a 4xx status
    statuses: Counter[str] = field(default_factory=Counter)  # every answer or failure seen
    unavailable: Counter[str] = field(default_factory=Counter)  # the details of the 503s

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._client, args=(n,), daemon=True)
            for n in range(self.clients)
        ]

    def start(self) -> Burst:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)
        assert not any(t.is_alive() for t in self._threads), "a client never finished"

    def wait_for(self, acknowledged: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < acknowledged:
            assert time.monotonic() < deadline, (
                f"only {len(self.acked)} of {acknowledged} bets acknowledged; "
                f"answers seen: {dict(self.statuses)}"
            )
            time.sleep(0.01)

    def acknowledged_after(self, moment: float) -> float | None:
        """The first acknowledgement (monotonic time) of a request sent after
        `moment` (a new bet, or one sent again after a 503 or a lost connection)."""
        with self._lock:
            times = [answered for sent, answered in self.acked_at if sent >= moment]
        return min(times, default=None)

    def _client(self, n: int) -> None:
        headers = {"Authorization": f"Bearer {self.casino.operator}"}
        path = f"/v1/rounds/{self.casino.round_id}/bets"
        with local_http.client(base_url=self.base, timeout=30) as http:
            while not self._stop.is_set():
                key = str(uuid.uuid4())
                body = {"account_id": self.casino.wallets[n % WALLETS], "bet": {"bet": "big"},
                        "stake": 10}  # fmt: skip
                with self._lock:
                    self.sent[key] = body
                # Until answered: a client that gave up on a sent bet would
                # leave its fate unknown (the final checks resend those).
                while True:
                    attempt = time.monotonic()
                    try:
                        answer = http.post(
                            path, json=body, headers={**headers, "Idempotency-Key": key}
                        )
                    except httpx.TransportError as exc:
                        self._seen(type(exc).__name__)
                        if self._stop.is_set():
                            return
                        time.sleep(0.05)
                        continue
                    self._seen(str(answer.status_code))
                    if answer.status_code == 201:
                        with self._lock:
                            self.acked[key] = answer.json()["bet_id"]
                            self.acked_at.append((attempt, time.monotonic()))
                        break
                    if answer.status_code == 503 and "retry-after" in answer.headers:
                        with self._lock:
                            self.unavailable[answer.json()["detail"]] += 1
                        if self._stop.is_set():
                            return
                        time.sleep(float(answer.headers["retry-after"]))
                        continue
                    with self._lock:
                        self.refused[key] = answer.status_code
                    break

    def _seen(self, what: str) -> None:
        with self._lock:
            self.statuses[what] += 1


@dataclass
class LogCheck:
    """What the log holds of the burst's bets."""

    placed: Counter[str]  # bet id -> BetPlaced events
    by_request: Counter[str]  # request id -> BetPlaced events
    debits: int
    events: int


def read_log(cwd: Path, store: str) -> LogCheck:
    node = open_node(store, str(cwd / "keys"), writable=False)
    try:
        placed: Counter[str] = Counter()
        by_request: Counter[str] = Counter()
        debits = events = 0
        for notification in notifications(node.app):
            events += 1
            if notification.topic.endswith("Account.Debited"):
                debits += 1
            if notification.topic.endswith("Round.BetPlaced"):
                event: Any = node.app.mapper.to_domain_event(notification)
                placed[event.bet_id] += 1
                by_request[event.request_id] += 1
    finally:
        node.close()
    return LogCheck(placed, by_request, debits, events)


def lost_and_duplicated(burst: Burst, log: LogCheck) -> tuple[int, int]:
    """Acknowledged bets missing from the log; bets in it more than once."""
    lost = sum(1 for bet_id in burst.acked.values() if log.placed[bet_id] == 0)
    duplicated = sum(1 for count in log.placed.values() if count > 1)
    duplicated += sum(1 for count in log.by_request.values() if count > 1)
    return lost, duplicated


def check_burst(cwd: Path, store: str, base: str, burst: Burst) -> int:
    """The checks every fault ends with; returns the acknowledged bets lost (0).

    - nothing half-written: every bet has its stake's debit (deposits are
      credits, so every debit is a bet's);
    - every acknowledged bet is in the log exactly once, no request placed two;
    - every bet sent again with its key (the client's retry) gets its first
      result back, and one never answered is placed once (or was, unseen);
    - after those retries the log holds exactly the acknowledged bets, once each.
    """
    log = read_log(cwd, store)
    assert sum(log.placed.values()) == log.debits, "a bet without its debit (half-written)"
    lost, duplicated = lost_and_duplicated(burst, log)
    assert (lost, duplicated) == (0, 0), f"{lost} acknowledged bets lost, {duplicated} twice"
    assert not burst.refused, f"bets refused: {Counter(burst.refused.values())}"
    path = f"/v1/rounds/{burst.casino.round_id}/bets"
    auth = {"Authorization": f"Bearer {burst.casino.operator}"}

    def again(http: httpx.Client, key: str) -> str:
        answer = http.post(path, json=burst.sent[key], headers={**auth, "Idempotency-Key": key})
        assert answer.status_code == 201, answer.text
        bet_id: str = answer.json()["bet_id"]
        if key in burst.acked:
            assert bet_id == burst.acked[key], "a retry got another result"
        return bet_id

    keys = list(burst.sent)
    with local_http.client(base_url=base, timeout=60) as http, ThreadPoolExecutor(4) as pool:
        burst.acked.update(zip(keys, pool.map(lambda k: again(http, k), keys), strict=True))
    log = read_log(cwd, store)
    assert log.placed == Counter(burst.acked.values())
    assert set(log.by_request) == set(burst.sent) and set(log.by_request.values()) == {1}
    assert sum(log.placed.values()) == log.debits
    return lost
