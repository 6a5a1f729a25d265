"""`ledger serve` as a real server: one command on the default SQLite store,
and two server processes on one PostgreSQL store writing to the same wallets
and the same round at once (no overdraft, no lost or duplicated bet, verify
passes). The servers' logs never hold a token."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.devices import DealerDevice
from tests import local_http
from tests.conftest import PASSPHRASE, PG_URL, drop_pg_schema, new_pg_schema, require_postgres
from tests.ports import free_port
from tests.reproducible import PROGRAM as REPRODUCIBLE

LIMITS = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000_000}


def ledger(cwd: Path, *args: str, seed: int | None = None) -> subprocess.CompletedProcess[str]:
    """`ledger ARGS` in a process of its own (with a `seed`, in a session that is
    the same every run: tests/reproducible.py)."""
    env = {**os.environ, "LEDGER_PASSPHRASE": PASSPHRASE.decode()}
    command = ["-m", "ledger.cli.main"] if seed is None else [str(REPRODUCIBLE), str(seed)]
    return subprocess.run(
        [sys.executable, *command, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@contextmanager
def serving(cwd: Path, *args: str, serve: tuple[str, ...] = ()) -> Iterator[tuple[str, Path]]:
    """`ledger ARGS serve SERVE` on a free port until the block ends: (base URL, its log)."""
    with serving_together(1, cwd, *args, serve=serve) as (served,):
        yield served


@contextmanager
def serving_together(
    count: int, cwd: Path, *args: str, serve: tuple[str, ...] = ()
) -> Iterator[list[tuple[str, Path]]]:
    """`count` of `serving`'s servers, stopped together when the block ends
    (Ctrl-C to each, then the wait for each): nodes on one store link their
    writers, and one stopped while another runs waits for that link to hang
    up (ledger.http.writer_process HANG_UP_SECONDS, 30 s)."""
    env = {**os.environ, "LEDGER_PASSPHRASE": PASSPHRASE.decode()}
    started: list[tuple[subprocess.Popen[bytes], str, Path]] = []
    try:
        for _ in range(count):
            port = free_port()
            log = cwd / f"serve-{port}.log"
            with open(log, "w") as out:
                server = subprocess.Popen(
                    [sys.executable, "-m", "ledger.cli.main", *args, "serve", *serve,
                     "--port", str(port)],
                    cwd=cwd,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )  # fmt: skip
            base = f"http://127.0.0.1:{port}"
            started.append((server, base, log))
            deadline = time.monotonic() + 60
            while True:
                if local_http.serving(base):
                    break
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)  # a server starts in a second or two: poll often
        yield [(base, log) for _, base, log in started]
    finally:
        for server, _, _ in started:
            server.send_signal(signal.SIGINT)
        for server, _, _ in started:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def token(cwd: Path, role: str, *more: str) -> str:
    created = ledger(cwd, "tokens", "create", "--role", role, *more)
    assert created.returncode == 0, created.stderr
    return created.stdout.strip()


def call(
    base: str, method: str, path: str, text: str, body: Any = None, key: str | None = None
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {text}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return local_http.request(method, f"{base}{path}", json=body, headers=headers, timeout=60)


def test_ledger_serve_on_the_default_sqlite_store_in_one_command(tmp_path: Path) -> None:
    with serving(tmp_path) as (base, log):
        operator = token(tmp_path, "operator")
        cashier = token(tmp_path, "cashier")
        assert call(base, "GET", "/v1/games", "nope").status_code == 401
        games = call(base, "GET", "/v1/games", operator)
        assert games.status_code == 200 and games.json()["games"]
        account = call(
            base, "POST", "/v1/accounts", cashier, {"owner": "a", "currency": "EUR"}, "a1"
        )
        assert account.status_code == 201, account.text
        forbidden = call(
            base, "POST", "/v1/accounts", operator, {"owner": "a", "currency": "EUR"}, "a2"
        )
        assert forbidden.status_code == 403
    assert (tmp_path / "ledger.db").exists()  # the default store
    assert (tmp_path / "keys" / "keyring.json").exists() or any((tmp_path / "keys").iterdir())
    text = log.read_text()
    assert "serving the ledger API" in text and "POST /v1/accounts" in text
    for secret in (operator, cashier):
        assert secret not in text and secret.split(".")[1] not in text
    verified = ledger(tmp_path, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_two_servers_on_one_postgres_store_write_the_same_wallets_and_round(
    tmp_path: Path,
) -> None:
    require_postgres()
    schema = new_pg_schema()
    store = f"{PG_URL}?schema={schema}"
    try:
        _two_servers(tmp_path, store)
    finally:
        drop_pg_schema(schema)


def _two_servers(tmp_path: Path, store: str) -> None:
    keys = KeyDirectory(tmp_path / "keys")
    keys.create_node_keys(PASSPHRASE)
    keys.create("device-1", Role.DEALER_DEVICE, PASSPHRASE)
    device = DealerDevice(keys.signer(Role.DEALER_DEVICE, PASSPHRASE))
    with serving_together(2, tmp_path, "--store", store) as [(one, _), (two, _)]:
        servers = [one, two]
        operator, cashier = token(tmp_path, "operator"), token(tmp_path, "cashier")
        wallets = []
        for n in range(3):
            made = call(
                one, "POST", "/v1/accounts", cashier, {"owner": f"p{n}", "currency": "EUR"}, f"w{n}"
            )
            wallets.append(made.json()["account_id"])
            funded = call(
                two,
                "POST",
                f"/v1/accounts/{wallets[-1]}/deposits",
                cashier,
                {"amount": 1_000},
                f"d{n}",
            )
            assert funded.json() == {"balance": 1_000}
        body = {
            "name": "T",
            "game": "taixiu",
            "kind": "physical",
            "currency": "EUR",
            "limits": LIMITS,
        }
        table = call(one, "POST", "/v1/tables", operator, body, "t").json()["table_id"]
        round_id = call(
            two, "POST", "/v1/rounds", operator, {"table_id": table, "dealer": "D"}, "r"
        ).json()["round_id"]

        def bet(n: int) -> tuple[int, str, int, dict[str, Any]]:
            """Bet n: 100 from wallet n % 3, sent to both servers at once (a retry racing it)."""
            key = f"bet-{n}"
            payload = {"account_id": wallets[n % 3], "bet": {"bet": "big"}, "stake": 100}

            def send(server: str) -> tuple[int, Any]:
                for attempt in range(100):  # a bound against a livelock, not a measure
                    response = call(
                        server, "POST", f"/v1/rounds/{round_id}/bets", operator, payload, key
                    )
                    if response.status_code != 503:  # writers still conflicting: retry, same key
                        break
                    time.sleep(0.01 * min(attempt, 10))  # as a client backs off
                return response.status_code, response.json()

            with ThreadPoolExecutor(max_workers=2) as both:  # the same request, racing itself
                answers = list(both.map(send, servers))
            (first_status, first), (second_status, second) = answers
            if first_status == 201 or second_status == 201:
                assert (first_status, first) == (second_status, second), answers  # one bet, not two
            return n, wallets[n % 3], first_status, first

        # 45 bets of 100 on 3 wallets of 1,000: at most 30 can be covered.
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(bet, range(45)))
        acknowledged = {r[3]["bet_id"]: r for r in results if r[2] == 201}
        refused = [r for r in results if r[2] != 201]
        assert all(
            r[2] == 400 and "more than the available balance" in r[3]["detail"] for r in refused
        ), refused
        assert len(acknowledged) == 30
        recorded = call(one, "GET", f"/v1/rounds/{round_id}", operator).json()["bets"]
        assert set(recorded) == set(acknowledged)  # none lost, none twice
        for wallet in wallets:
            balance = call(two, "GET", f"/v1/accounts/{wallet}", operator).json()["balance"]
            staked = sum(100 for r in acknowledged.values() if r[1] == wallet)
            assert balance == 1_000 - staked == 0  # never below zero
        assert (
            call(
                one, "POST", f"/v1/rounds/{round_id}/close-betting", operator, None, "c"
            ).status_code
            == 200
        )
        report = device.act(round_id, 1, "dealer", "throw", {}, [6, 5, 4])
        thrown = call(
            two,
            "POST",
            f"/v1/rounds/{round_id}/act",
            operator,
            {"actor": "dealer", "action": "throw", "source": report},
            "x",
        )
        assert thrown.status_code == 200, thrown.text
        for wallet in wallets:
            assert call(one, "GET", f"/v1/accounts/{wallet}", operator).json()["balance"] == 2_000
    verified = ledger(tmp_path, "--store", store, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
