"""Load on the HTTP API: N concurrent clients on loopback playing RNG tai xiu
rounds (open, bets from shared wallets, close betting, throw: the throw
settles) for a bounded time against `ledger serve` — SQLite with one worker,
PostgreSQL with two — and the same commands through the Python API in one
process, in the same run, as the baseline.

Reports requests/s and p50/p99 latency per endpoint, and the ratio of HTTP
requests/s to Python-API commands/s (medians of --repeats interleaved runs).
After every HTTP run: `ledger verify` passes, every acknowledged bet is in
the log exactly once, and no request id placed two bets.

    .venv/bin/python tools/load_http.py [--store sqlite|postgres|both]
        [--clients 8] [--seconds 15] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _benchlib as bench
import httpx

LIMITS = {"min_bet": 10, "max_bet": 10_000, "max_round": 10**9}
WALLETS = 20
BETS_PER_ROUND = 4
STAKE = 100
FUNDS = 10**9


def ledger(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli.main", "--keys", str(workdir / "keys"), *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=1800,
    )


class Server:
    """`ledger serve` on a free port, until stopped."""

    def __init__(self, workdir: Path, url: str, workers: int) -> None:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = open(workdir / f"serve-{self.port}.log", "w")  # noqa: SIM115
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ledger.cli.main",
                "--keys",
                str(workdir / "keys"),
                "--store",
                url,
                "serve",
                "--unencrypted",
                "--port",
                str(self.port),
                "--workers",
                str(workers),
                "--log-level",
                "warning",
            ],
            cwd=workdir,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{self.base}/openapi.json", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"ledger serve did not start: {self.log.name}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


class Client(threading.Thread):
    """Plays rounds on its own RNG table until the deadline; keeps every latency
    and every acknowledged bet. A 503 or a dropped connection is retried with the
    same Idempotency-Key (that is what the key is for)."""

    def __init__(
        self,
        base: str,
        tokens: dict[str, str],
        table: str,
        wallets: list[str],
        deadline: float,
        number: int,
    ) -> None:
        super().__init__(daemon=True)
        self.http = httpx.Client(base_url=base, timeout=60)
        self.tokens = tokens
        self.table = table
        self.wallets = wallets
        self.deadline = deadline
        self.number = number
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.statuses: dict[int, int] = defaultdict(int)
        self.acked_bets: dict[str, str] = {}  # bet id -> request id
        self.error: str | None = None

    def call(self, endpoint: str, path: str, body: Any = None) -> dict[str, Any] | None:
        key = str(uuid.uuid4())
        headers = {"Authorization": f"Bearer {self.tokens['operator']}", "Idempotency-Key": key}
        for _ in range(50):
            started = time.perf_counter()
            try:
                response = self.http.post(path, json=body, headers=headers)
            except httpx.TransportError:
                continue
            self.latencies[endpoint].append(time.perf_counter() - started)
            self.statuses[response.status_code] += 1
            if response.status_code == 503:
                continue
            if response.status_code >= 400:
                return None
            found: dict[str, Any] = response.json()
            found["_key"] = key
            return found
        return None

    def run(self) -> None:
        try:
            turn = 0
            while time.monotonic() < self.deadline:
                opened = self.call(
                    "open round", "/v1/rounds", {"table_id": self.table, "dealer": "D"}
                )
                if opened is None:
                    raise RuntimeError("a round did not open")
                round_id = opened["round_id"]
                for b in range(BETS_PER_ROUND):
                    wallet = self.wallets[(self.number * 7 + turn + b) % len(self.wallets)]
                    body = {"account_id": wallet, "bet": {"bet": "big"}, "stake": STAKE}
                    placed = self.call("place bet", f"/v1/rounds/{round_id}/bets", body)
                    if placed is not None:
                        self.acked_bets[placed["bet_id"]] = placed["_key"]
                self.call("close betting", f"/v1/rounds/{round_id}/close-betting")
                if self.call("throw", f"/v1/rounds/{round_id}/throw") is None:
                    raise RuntimeError(f"round {round_id} was not thrown")
                turn += 1
        except Exception as exc:  # reported by the main thread
            self.error = f"{type(exc).__name__}: {exc}"


def setup_http(base: str, tokens: dict[str, str], clients: int) -> tuple[list[str], list[str]]:
    with httpx.Client(base_url=base, timeout=60) as http:

        def post(role: str, path: str, body: Any = None) -> dict[str, Any]:
            headers = {
                "Authorization": f"Bearer {tokens[role]}",
                "Idempotency-Key": str(uuid.uuid4()),
            }
            response = http.post(path, json=body, headers=headers)
            if response.status_code not in (200, 201):
                raise SystemExit(f"setup failed: {path}: {response.text}")
            result: dict[str, Any] = response.json()
            return result

        wallets = []
        for n in range(WALLETS):
            wallet = post("cashier", "/v1/accounts", {"owner": f"p{n}", "currency": "EUR"})[
                "account_id"
            ]
            post("cashier", f"/v1/accounts/{wallet}/deposits", {"amount": FUNDS})
            wallets.append(wallet)
        tables = []
        for n in range(clients):
            body = {
                "name": f"T{n}",
                "game": "taixiu",
                "kind": "rng",
                "currency": "EUR",
                "limits": LIMITS,
            }
            table = post("operator", "/v1/tables", body)["table_id"]
            post("operator", f"/v1/tables/{table}/seeds")
            tables.append(table)
    return wallets, tables


def check_log(workdir: Path, url: str, acked: dict[str, str]) -> str:
    """verify passes; every acknowledged bet once; no request id placed two bets."""
    verified = ledger(workdir, "--store", url, "verify")
    if verified.returncode != 0:
        raise SystemExit(
            f"ledger verify failed after the load:\n{verified.stdout}{verified.stderr}"
        )
    from ledger.casino import open_ledger

    node = open_ledger(url, str(workdir / "keys"), writable=False).node
    try:
        bets: dict[str, int] = defaultdict(int)
        requests: dict[str, int] = defaultdict(int)
        after = 0
        while batch := node.app.recorder.select_notifications(
            start=after, limit=1000, inclusive_of_start=False
        ):
            for notification in batch:
                if notification.topic.endswith("Round.BetPlaced"):
                    event = node.app.mapper.to_domain_event(notification)
                    bets[event.bet_id] += 1  # type: ignore[attr-defined]
                    requests[event.request_id] += 1  # type: ignore[attr-defined]
            after = batch[-1].id
    finally:
        node.close()
    missing = [b for b in acked if bets.get(b) != 1]
    twice = [r for r, n in requests.items() if n > 1]
    if missing or twice:
        raise SystemExit(
            f"acknowledged bets not recorded once: {missing[:5]}; requests twice: {twice[:5]}"
        )
    return (
        f"verify OK; {len(acked)} acknowledged bets each once; {len(bets)} bets, no request twice"
    )


def http_run(kind: str, clients: int, seconds: float) -> dict[str, Any]:
    workers = 2 if kind == "postgres" else 1
    with bench.temp_dir("ledger-load-") as workdir, bench.fresh_store(kind, workdir) as url:
        bench.make_keys(workdir)
        tokens = {}
        for role in ("operator", "cashier"):
            made = ledger(workdir, "tokens", "create", "--role", role)
            tokens[role] = made.stdout.strip()
        server = Server(workdir, url, workers)
        try:
            wallets, tables = setup_http(server.base, tokens, clients)
            deadline = time.monotonic() + seconds
            threads = [
                Client(server.base, tokens, tables[n], wallets, deadline, n) for n in range(clients)
            ]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            while any(t.is_alive() for t in threads):
                time.sleep(min(5.0, seconds / 3))
                done = sum(len(v) for t in threads for v in t.latencies.values())
                print(f"  http {kind}: {done} requests so far", file=sys.stderr, flush=True)
            elapsed = time.perf_counter() - started
        finally:
            server.stop()
        errors = [t.error for t in threads if t.error]
        if errors:
            raise SystemExit(f"a client failed: {errors[0]} (see {workdir})")
        latencies: dict[str, list[float]] = defaultdict(list)
        statuses: dict[int, int] = defaultdict(int)
        acked: dict[str, str] = {}
        for thread in threads:
            for endpoint, values in thread.latencies.items():
                latencies[endpoint] += values
            for status, count in thread.statuses.items():
                statuses[status] += count
            acked |= thread.acked_bets
        checked = check_log(workdir, url, acked)
    total = sum(len(v) for v in latencies.values())
    return {
        "requests_per_s": total / elapsed,
        "endpoints": {
            name: {
                "requests_per_s": len(values) / elapsed,
                "p50_ms": 1000 * statistics.median(values),
                "p99_ms": 1000 * sorted(values)[max(0, int(len(values) * 0.99) - 1)],
            }
            for name, values in sorted(latencies.items())
        },
        "statuses": dict(statuses),
        "checked": checked,
    }


def python_run(kind: str, seconds: float) -> float:
    """The same commands through the Python API, one process, one caller: commands/s."""
    from ledger.casino import Casino
    from ledger.plugins.manager import get_plugin_manager
    from ledger.privacy.personal import PersonalData
    from ledger.rng.server import RngServer
    from ledger.store.application import LedgerApplication

    with bench.temp_dir("ledger-load-py-") as workdir, bench.fresh_store(kind, workdir) as url:
        keys = bench.make_keys(workdir)
        app = LedgerApplication(
            url,
            keyring=keys.keyring,
            signer=keys.node_signer,
            personal=PersonalData(keys.path, None),  # owners and dealers sealed, as a node does
        )
        try:
            casino = Casino(app, get_plugin_manager().games())
            rng = RngServer()
            wallets = []
            for n in range(WALLETS):
                wallet = casino.open_account(request_id=f"a{n}", owner=f"p{n}", currency="EUR")
                casino.deposit(request_id=f"d{n}", account_id=wallet, amount=FUNDS)
                wallets.append(wallet)
            table = casino.open_table(
                request_id="t",
                name="T",
                game="taixiu",
                kind="rng",
                currency="EUR",
                limits=LIMITS,  # type: ignore[arg-type]
            )
            casino.commit_seed(request_id="s", table_id=table, rng=rng)
            commands = 0
            deadline = time.monotonic() + seconds
            started = time.perf_counter()
            turn = 0
            while time.monotonic() < deadline:

                def key() -> str:
                    return str(uuid.uuid4())

                round_id = casino.open_round(request_id=key(), table_id=table, dealer="D")
                for b in range(BETS_PER_ROUND):
                    wallet = wallets[(turn + b) % len(wallets)]
                    casino.place_bet(
                        request_id=key(),
                        round_id=round_id,
                        account_id=wallet,
                        bet={"bet": "big"},
                        stake=STAKE,
                    )
                casino.close_betting(request_id=key(), round_id=round_id)
                casino.throw_dice(request_id=key(), round_id=round_id, rng=rng)
                commands += 3 + BETS_PER_ROUND
                turn += 1
            return commands / (time.perf_counter() - started)
        finally:
            app.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("LEDGER_PROGRESS_INTERVAL", "off")
    report: dict[str, Any] = {
        "machine": bench.machine_line(),
        "clients": args.clients,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "stores": {},
    }
    for kind in bench.stores(args.store):
        runs: list[dict[str, Any]] = []
        baselines: list[float] = []
        for repeat in range(args.repeats):  # interleaved: HTTP, then Python, each repeat
            print(f"{kind}: repeat {repeat + 1}/{args.repeats}", file=sys.stderr, flush=True)
            runs.append(http_run(kind, args.clients, args.seconds))
            baselines.append(python_run(kind, args.seconds))
        ratios = [r["requests_per_s"] / b for r, b in zip(runs, baselines, strict=True)]
        middle = sorted(range(len(runs)), key=lambda i: runs[i]["requests_per_s"])[len(runs) // 2]
        report["stores"][kind] = {
            "workers": 2 if kind == "postgres" else 1,
            "http_requests_per_s": [round(r["requests_per_s"], 1) for r in runs],
            "python_commands_per_s": [round(b, 1) for b in baselines],
            "ratio_median": round(statistics.median(ratios), 3),
            "ratios": [round(r, 3) for r in ratios],
            "median_run_endpoints": runs[middle]["endpoints"],
            "statuses": [r["statuses"] for r in runs],
            "checked": [r["checked"] for r in runs],
        }
        store = report["stores"][kind]
        print(
            f"\n{kind} ({store['workers']} worker(s), {args.clients} clients, "
            f"{args.seconds:.0f} s):"
        )
        print(
            f"  HTTP requests/s {store['http_requests_per_s']}; Python API commands/s "
            f"{store['python_commands_per_s']}; ratio median {store['ratio_median']}x"
        )
        for name, figures in store["median_run_endpoints"].items():
            print(
                f"  {name:<14} {figures['requests_per_s']:8.1f} req/s"
                f"  p50 {figures['p50_ms']:7.1f} ms  p99 {figures['p99_ms']:7.1f} ms"
            )
        for line in store["checked"]:
            print(f"  {line}")
    bench.RESULTS.mkdir(exist_ok=True)
    (bench.RESULTS / "load_http.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {bench.RESULTS / 'load_http.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
