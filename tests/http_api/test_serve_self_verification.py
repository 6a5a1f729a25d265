"""A running node verifies itself on a schedule (issue 40, item 5), on both
stores: `ledger serve --self-verify-every 1s` records its runs and says ok
at `GET /v1/health` (no token); a row an attacker with database rights edits
turns it degraded (503) with the finding named, in its log too, while bets
are still taken (both answers as the OpenAPI document declares them).
`ledger checkpoint --follow --self-verify-every 1s` records its runs and
names the finding in its log the same way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from ledger.audit.self_status import SelfStatus
from ledger.http.app import create_app
from ledger.node import Node
from tests import local_http
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE, ledger_cli
from tests.http_api.test_http_contract import check
from tests.http_api.test_http_serve import LIMITS, call, ledger, serving, token
from tests.http_support import make_api
from tests.reproducible import reproducible_session

WAIT = 120  # seconds: a loaded machine, not a speed the test holds anything to


def until(what: str, found: Callable[[], Any]) -> Any:
    """`found()` once it is truthy (polled), else the test fails naming `what`."""
    deadline = time.monotonic() + WAIT
    while not (value := found()):
        assert time.monotonic() < deadline, f"not within {WAIT} s: {what}"
        time.sleep(0.2)
    return value


def health(base: str) -> httpx.Response:
    return local_http.get(f"{base}/v1/health", timeout=60)


def self_runs(cwd: Path, store: str) -> list[dict[str, Any]]:
    listed = ledger(cwd, "--store", store, "events", "--significant", "--json")
    assert listed.returncode == 0, listed.stderr
    lines = [json.loads(line) for line in listed.stdout.splitlines()]
    return [line for line in lines if line["kind"] == "self-verification"]


def tamper(store: str, stream: str, version: int) -> None:
    """Edit one stored event's bytes, as an attacker with database rights would."""
    attacker = Attacker(store)
    try:
        _, _, _, _, state = attacker.row(stream, version)
        attacker.set_state(stream, version, state[:-1] + b" ")
    finally:
        attacker.close()


def test_serve_verifies_itself_and_turns_degraded_on_a_finding_while_taking_bets(
    tmp_path: Path, store_url: str
) -> None:
    with serving(tmp_path, "--store", store_url, serve=("--self-verify-every", "1s")) as (
        base,
        log,
    ):
        cashier, operator = token(tmp_path, "cashier"), token(tmp_path, "operator")

        def post(path: str, text: str, body: Any = None) -> dict[str, Any]:
            answer = call(base, "POST", path, text, body, str(uuid.uuid4()))
            assert answer.status_code in (200, 201), answer.text
            result: dict[str, Any] = answer.json()
            return result

        def wallet(owner: str) -> str:
            account = post("/v1/accounts", cashier, {"owner": owner, "currency": "EUR"})
            post(f"/v1/accounts/{account['account_id']}/deposits", cashier, {"amount": 10_000})
            return str(account["account_id"])

        victim, player = wallet("victim"), wallet("player")
        table = {"name": "T1", "game": "taixiu", "kind": "physical", "currency": "EUR"}
        table_id = post("/v1/tables", operator, {**table, "limits": LIMITS})["table_id"]
        round_id = post("/v1/rounds", operator, {"table_id": table_id, "dealer": "D1"})["round_id"]
        bet = {"account_id": player, "bet": {"bet": "big"}, "stake": 100}
        post(f"/v1/rounds/{round_id}/bets", operator, bet)

        def passed_over_the_bet() -> dict[str, Any] | None:
            answer = health(base)  # no token: monitoring reads it as it is
            assert answer.status_code == 200, answer.text
            body: dict[str, Any] = answer.json()
            checked = body["self_verification"]
            return body if checked["result"] == "passed" and checked["tree_size"] > 12 else None

        body = until("a passed run over the bet", passed_over_the_bet)
        assert body["status"] == "ok" and body["self_verification"]["every_seconds"] == 1
        assert body["self_verification"]["finding"] is None
        runs = self_runs(tmp_path, store_url)
        assert runs and all(run["details"]["result"] == "passed" for run in runs)

        tamper(store_url, victim, 2)  # the victim's deposit
        degraded = until("health degraded", lambda: health(base).status_code == 503 or None)
        assert degraded
        answer = health(base)
        assert answer.status_code == 503 and answer.json()["status"] == "degraded"
        finding = answer.json()["self_verification"]["finding"]
        assert answer.json()["self_verification"]["result"] == "failed"
        assert f"stream {victim} version 2" in finding and "log position" in finding
        # Bets are still taken, and the finding is in the node's log, in one line.
        post(f"/v1/rounds/{round_id}/bets", operator, bet)
        said = until(
            "the finding in the log",
            lambda: [
                line
                for line in log.read_text().splitlines()
                if "self-verification FAILED" in line and f"stream {victim} version 2" in line
            ],
        )
        assert said[0].startswith("ledger.self-verification: self-verification FAILED over ")
    assert "Traceback" not in log.read_text()


def test_checkpoint_follow_verifies_itself_and_names_a_finding(
    tmp_path: Path, store_url: str
) -> None:
    keys = tmp_path / "keys"
    with ledger_cli(store_url, keys) as run, reproducible_session(4) as seeds:
        assert run("simulate", "--rounds", "2", "--players", "2", "--tables", "1", *seeds) == 0
    log = tmp_path / "follow.log"
    with open(log, "wb") as out:
        service = subprocess.Popen(
            [sys.executable, "-m", "ledger.cli.main", "--store", store_url, "--keys", str(keys),
             "checkpoint", "--follow", "--self-verify-every", "1s"],
            env={**os.environ, "LEDGER_PASSPHRASE": PASSPHRASE.decode()},
            stdout=subprocess.DEVNULL,
            stderr=out,
        )  # fmt: skip
    try:
        until("a passed run", lambda: "self-verification passed" in log.read_text())
        (first, *_) = until("a recorded run", lambda: self_runs(tmp_path, store_url))
        assert first["details"]["result"] == "passed"
        attacker = Attacker(store_url)
        try:
            _, stream, version, _, _ = attacker.rows()[5]
        finally:
            attacker.close()
        tamper(store_url, stream, version)
        said = until(
            "the finding in the log",
            lambda: [
                line
                for line in log.read_text().splitlines()
                if "self-verification FAILED" in line
                and f"stream {stream} version {version}" in line
            ],
        )
        assert "log position 5" in said[0]
    finally:
        service.send_signal(signal.SIGINT)
        service.wait(timeout=60)
    assert service.returncode == 130, log.read_text()
    assert "Traceback" not in log.read_text()


def test_health_answers_as_its_document_declares_ok_and_degraded(
    node: Node, tmp_path: Path
) -> None:
    api = make_api(node, tmp_path)
    status = SelfStatus(tmp_path / "status.json", 3600)
    client = TestClient(create_app(api.service, self_status=status))
    before = client.get("/v1/health")  # no run ended yet
    check(before, "GET", "/v1/health")
    assert before.json() == {
        "status": "ok",
        "self_verification": {
            "every_seconds": 3600,
            "last_run_at": None,
            "result": None,
            "tree_size": None,
            "finding": None,
        },
    }
    status.write(
        "failed", 40, 1_800_000_000_000_000, "stream s version 2: altered (log position 7)"
    )
    degraded = client.get("/v1/health")
    check(degraded, "GET", "/v1/health")
    assert degraded.status_code == 503
    assert degraded.json()["self_verification"]["last_run_at"] == "2027-01-15T08:00:00+00:00"
    status.write("passed", 41, 1_800_000_000_000_001, None)
    assert client.get("/v1/health").json()["status"] == "ok"


def test_the_self_verification_process_ends_at_once_on_a_stop_signal(
    tmp_path: Path, store_url: str
) -> None:
    """Asked to stop before its first run, between runs or in the middle of one
    (SIGINT and SIGTERM together, as a server's Ctrl-C sends them), it ends
    within seconds with exit code 0, no traceback, its state directory gone.
    A stop raised into the interrupted frame was once swallowed by a weakref
    callback it landed in, and the process verified on."""
    keys = tmp_path / "keys"
    with ledger_cli(store_url, keys) as run, reproducible_session(4) as seeds:
        assert run("simulate", "--rounds", "2", "--players", "2", "--tables", "1", *seeds) == 0
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {
        **os.environ,
        "LEDGER_STORE": store_url,
        "LEDGER_KEYS": str(keys),
        "LEDGER_PASSPHRASE": PASSPHRASE.decode(),
        "TMPDIR": str(scratch),
    }
    # Before the node opens, while it opens, then once a run was recorded (the
    # next one due a second later: stopped during it or just before it).
    for when in ("at once", "0.6 s in", "after a recorded run"):
        log = tmp_path / f"side-{when}.log"
        recorded = len(self_runs(tmp_path, store_url))
        with open(log, "wb") as err:
            side = subprocess.Popen(
                [sys.executable, "-m", "ledger.http.self_verification_process",
                 str(os.getpid()), "1", ""],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
            )  # fmt: skip
        assert side.stdout is not None and side.stdout.readline() == b"self-verifying\n"
        until("the state directory", lambda: list(scratch.iterdir()))
        if when == "0.6 s in":
            time.sleep(0.6)
        elif when == "after a recorded run":
            until("a recorded run", lambda n=recorded: len(self_runs(tmp_path, store_url)) > n)
        side.send_signal(signal.SIGINT)
        side.send_signal(signal.SIGTERM)
        assert side.wait(timeout=30) == 0, log.read_text()
        assert "Traceback" not in log.read_text()
        assert list(scratch.iterdir()) == [], f"left behind after a stop {when}"
