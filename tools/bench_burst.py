"""A live table's betting window: N bets on ONE round from C concurrent HTTP clients.

`ledger serve` on loopback (SQLite with one worker, PostgreSQL with two), one
RNG Tài Xỉu round open, C keep-alive connections posting N bets between them
as fast as each answer comes back, with bad input mixed in (an unknown
account, a stake over the limit: refused on their own). Then, on the same
round: close betting, the throw (which settles every bet), `ledger verify
--level settlement`; every acknowledged bet must be in the log exactly once.

Reported per run: bets/s, p50/p99 latency, the rate of the last tenth of the
bets against the first tenth (a bet must not cost more as its round grows),
the close and the throw of the full round (one command each), and the
baseline measured in the same run: the same disk's (or server's) single-row
commit rate, one INSERT and COMMIT at a time. Medians of --repeats runs.

    .venv/bin/python tools/bench_burst.py [--store sqlite|postgres|both]
        [--bets 10000] [--clients 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import time
import uuid
from itertools import pairwise
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _benchlib as bench
import httpx
from load_http import Server, ledger

LIMITS = {"min_bet": 10, "max_bet": 1_000, "max_round": 10**9}
WALLETS = 500
STAKE = 100
FUNDS = 10**9
BAD_EVERY = 97  # one request in this many is bad input, refused on its own
TARGETS = {"bets_per_s": 1_000, "p99_ms": 250, "last_vs_first": 0.7}


def commit_rate(kind: str, workdir: Path, seconds: float = 3.0) -> float:
    """Single-row transactions a second: one INSERT and one COMMIT at a time, on
    the store's own disk (SQLite: a file beside it, WAL, the ledger's settings)
    or server (PostgreSQL: a table in a scratch schema)."""
    payload = os.urandom(300)  # about one sealed bet event
    if kind == "sqlite":
        path = workdir / "commit-rate.db"
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, state BLOB)")
        count, deadline = 0, time.perf_counter() + seconds
        started = time.perf_counter()
        while time.perf_counter() < deadline:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO t (state) VALUES (?)", (payload,))
            conn.execute("COMMIT")
            count += 1
        rate = count / (time.perf_counter() - started)
        conn.close()
        return rate
    import psycopg

    schema = f"rate_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(bench.PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"CREATE TABLE {schema}.t (id bigserial PRIMARY KEY, state bytea)")
            count, deadline = 0, time.perf_counter() + seconds
            started = time.perf_counter()
            while time.perf_counter() < deadline:
                with conn.transaction():
                    conn.execute(f"INSERT INTO {schema}.t (state) VALUES (%s)", (payload,))
                count += 1
            return count / (time.perf_counter() - started)
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


class Setup:
    """Tokens, wallets, an RNG table with a committed seed, one open round."""

    def __init__(self, base: str, tokens: dict[str, str]) -> None:
        self.base, self.tokens = base, tokens
        with httpx.Client(base_url=base, timeout=120) as http:
            self.http = http
            self.wallets = []
            for n in range(WALLETS):
                wallet = self.post("cashier", "/v1/accounts", {"owner": f"p{n}", "currency": "EUR"})
                self.post(
                    "cashier", f"/v1/accounts/{wallet['account_id']}/deposits", {"amount": FUNDS}
                )
                self.wallets.append(str(wallet["account_id"]))
            body = {
                "name": "Live",
                "game": "taixiu",
                "kind": "rng",
                "currency": "EUR",
                "limits": LIMITS,
            }
            self.table = str(self.post("operator", "/v1/tables", body)["table_id"])
            self.post("operator", f"/v1/tables/{self.table}/seeds")
            self.round = str(
                self.post("operator", "/v1/rounds", {"table_id": self.table, "dealer": "D"})[
                    "round_id"
                ]
            )

    def post(self, role: str, path: str, body: Any = None) -> dict[str, Any]:
        headers = {
            "Authorization": f"Bearer {self.tokens[role]}",
            "Idempotency-Key": str(uuid.uuid4()),
        }
        response = self.http.post(path, json=body, headers=headers)
        if response.status_code not in (200, 201):
            raise SystemExit(f"setup failed: {path}: {response.status_code} {response.text}")
        found: dict[str, Any] = response.json()
        return found


def request_bytes(host: str, path: str, token: str, key: str, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
        f"Idempotency-Key: {key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return status, await reader.readexactly(length)


async def burst(
    port: int, token: str, round_id: str, wallets: list[str], bets: int, clients: int
) -> dict[str, Any]:
    """N good bets (and bad ones mixed in) over C keep-alive connections."""
    path = f"/v1/rounds/{round_id}/bets"
    jobs: list[tuple[str, dict[str, Any], bool]] = []
    for n in range(bets):
        jobs.append(
            (
                str(uuid.uuid4()),
                {"account_id": wallets[n % len(wallets)], "bet": {"bet": "big"}, "stake": STAKE},
                True,
            )
        )
        if n % BAD_EVERY == BAD_EVERY - 1:
            bad = (
                {"account_id": str(uuid.uuid4()), "bet": {"bet": "big"}, "stake": STAKE}
                if (n // BAD_EVERY) % 2
                else {
                    "account_id": wallets[0],
                    "bet": {"bet": "big"},
                    "stake": LIMITS["max_bet"] + 1,
                }
            )
            jobs.append((str(uuid.uuid4()), bad, False))
    queue = iter(jobs)
    done: list[tuple[float, float, bool, int, bytes, str]] = []

    async def client() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for key, body, good in queue:
                message = request_bytes("127.0.0.1", path, token, key, body)
                started = time.perf_counter()
                writer.write(message)
                await writer.drain()
                status, answer = await read_response(reader)
                done.append((started, time.perf_counter(), good, status, answer, key))
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    good = sorted((d for d in done if d[2]), key=lambda d: d[1])
    bad = [d for d in done if not d[2]]
    acked = {json.loads(d[4])["bet_id"]: d[5] for d in good if d[3] == 201}
    failed = [(d[3], d[4][:200]) for d in good if d[3] != 201]
    if failed:
        raise SystemExit(f"{len(failed)} good bets were not accepted, e.g. {failed[:3]}")
    wrongly = [(d[3], d[4][:200]) for d in bad if d[3] < 400 or d[3] >= 500]
    if wrongly:
        raise SystemExit(f"bad input not refused with a 4xx: {wrongly[:3]}")
    latencies = sorted(d[1] - d[0] for d in good)
    tenth = max(1, len(good) // 10)
    first = tenth / (good[tenth - 1][1] - started)
    last = tenth / (good[-1][1] - good[-tenth - 1][1])
    # Bets/s in each tenth of the bets, in the order they were acknowledged.
    edges = [started] + [good[min(len(good), (k + 1) * tenth) - 1][1] for k in range(10)]
    tenths = [tenth / (b - a) if b > a else 0.0 for a, b in pairwise(edges)]
    return {
        "elapsed_s": elapsed,
        "bets_per_s": len(good) / elapsed,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[max(0, int(len(latencies) * 0.99) - 1)],
        "first_tenth_per_s": first,
        "last_tenth_per_s": last,
        "last_vs_first": last / first,
        "tenths_per_s": tenths,
        "refused_bad_input": len(bad),
        "acked": acked,
    }


def one_command(setup: Setup, path: str) -> float:
    started = time.perf_counter()
    with httpx.Client(base_url=setup.base, timeout=600) as http:
        setup.http = http
        setup.post("operator", path)
    return time.perf_counter() - started


def run(kind: str, bets: int, clients: int) -> dict[str, Any]:
    workers = 2 if kind == "postgres" else 1
    with bench.temp_dir("ledger-burst-") as workdir, bench.fresh_store(kind, workdir) as url:
        bench.make_keys(workdir)
        baseline = commit_rate(kind, workdir)
        tokens = {}
        for role in ("operator", "cashier"):
            tokens[role] = ledger(workdir, "tokens", "create", "--role", role).stdout.strip()
        server = Server(workdir, url, workers)
        try:
            bench.note(f"{kind}: setting up {WALLETS} wallets and a round")
            setup = Setup(server.base, tokens)
            bench.note(f"{kind}: {bets} bets from {clients} clients")
            figures = asyncio.run(
                burst(server.port, tokens["operator"], setup.round, setup.wallets, bets, clients)
            )
            figures["close_s"] = one_command(setup, f"/v1/rounds/{setup.round}/close-betting")
            figures["throw_s"] = one_command(setup, f"/v1/rounds/{setup.round}/throw")
        finally:
            server.stop()
        acked = figures.pop("acked")
        figures["checked"] = check(workdir, url, setup.round, acked)
        started = time.perf_counter()
        verified = ledger(workdir, "--store", url, "verify", "--level", "settlement")
        if verified.returncode != 0:
            raise SystemExit(f"verify failed:\n{verified.stdout}{verified.stderr}")
        figures["verify_settlement_s"] = time.perf_counter() - started
    figures["commit_rate_per_s"] = baseline
    figures["vs_commit_rate"] = figures["bets_per_s"] / baseline
    return figures


def check(workdir: Path, url: str, round_id: str, acked: dict[str, str]) -> str:
    """Every acknowledged bet is in the round exactly once, by its own request."""
    from ledger.casino import open_ledger

    node = open_ledger(url, str(workdir / "keys"), writable=False).node
    try:
        seen: dict[str, str] = {}
        twice = 0
        after = 0
        while batch := node.app.recorder.select_notifications(
            start=after, limit=2000, inclusive_of_start=False
        ):
            for notification in batch:
                if notification.topic.endswith("Round.BetPlaced"):
                    event: Any = node.app.mapper.to_domain_event(notification)
                    twice += event.bet_id in seen
                    seen[event.bet_id] = event.request_id
            after = batch[-1].id
    finally:
        node.close()
    missing = [b for b, key in acked.items() if seen.get(b) != key]
    if missing or twice or len(seen) != len(acked):
        raise SystemExit(
            f"acknowledged bets not in the log once: {missing[:5]}; twice {twice}; "
            f"{len(seen)} in the log, {len(acked)} acknowledged"
        )
    return f"{len(acked)} acknowledged bets each in round {round_id} once, nothing else"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--bets", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-files", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("LEDGER_PROGRESS_INTERVAL", "off")
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in bench.stores(args.store)}
    for repeat in range(args.repeats):  # the stores interleaved, run by run
        for kind in runs:
            print(f"{kind}: run {repeat + 1}/{args.repeats}", file=sys.stderr, flush=True)
            runs[kind].append(run(kind, args.bets, args.clients))
    summary: dict[str, Any] = {}
    for kind, found in runs.items():
        medians = {
            key: statistics.median(r[key] for r in found)
            for key in found[0]
            if isinstance(found[0][key], float | int)
        }
        summary[kind] = {
            "workers": 2 if kind == "postgres" else 1,
            "median": medians,
            "runs": found,
        }
        print(
            f"\n{kind} ({summary[kind]['workers']} worker(s)), {args.bets} bets on one round, "
            f"{args.clients} clients:"
        )
        print(
            f"  {medians['bets_per_s']:.0f} bets/s (x{medians['vs_commit_rate']:.2f} the disk's "
            f"{medians['commit_rate_per_s']:.0f} single-row commits/s); "
            f"p50 {medians['p50_ms']:.1f} ms, "
            f"p99 {medians['p99_ms']:.1f} ms; last tenth {medians['last_vs_first']:.2f}x the first"
        )
        print(
            f"  close betting {medians['close_s']:.2f} s, throw (settles every bet) "
            f"{medians['throw_s']:.2f} s, verify --level settlement "
            f"{medians['verify_settlement_s']:.1f} s"
        )
    if "sqlite" in summary and "postgres" in summary:
        ratio = (
            summary["postgres"]["median"]["bets_per_s"] / summary["sqlite"]["median"]["bets_per_s"]
        )
        summary["postgres_vs_sqlite"] = ratio
        print(f"\nPostgreSQL (2 workers) / SQLite (1 worker): {ratio:.2f}x")
    if not args.no_files:
        bench.RESULTS.mkdir(exist_ok=True)
        data = {
            "machine": bench.machine(),
            "args": vars(args),
            "targets": TARGETS,
            "stores": summary,
        }
        (bench.RESULTS / "bench_burst.json").write_text(json.dumps(data, indent=2) + "\n")
        chart(summary, args)
    return 0


def chart(summary: dict[str, Any], args: argparse.Namespace) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    kinds = [k for k in ("sqlite", "postgres") if k in summary]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    for ax, key, label, target in (
        (axes[0], "bets_per_s", "bets/s", TARGETS["bets_per_s"]),
        (axes[1], "p99_ms", "p99 latency (ms)", TARGETS["p99_ms"]),
        (axes[2], "last_vs_first", "last tenth / first tenth (rate)", TARGETS["last_vs_first"]),
    ):
        values = [summary[k]["median"][key] for k in kinds]
        bars = ax.bar(kinds, values, color=["#8da0cb", "#fc8d62"][: len(kinds)])
        ax.bar_label(
            bars, labels=[f"{v:,.2f}" if v < 10 else f"{v:,.0f}" for v in values], fontsize=8
        )
        ax.axhline(target, color="red", linestyle="--", linewidth=1)
        ax.set_title(label, fontsize=9)
    fig.suptitle(
        f"bench_burst: {args.bets} bets on one round, {args.clients} HTTP clients "
        f"({bench.cpu_model()}, {bench.cores()} cores; red: target)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(bench.RESULTS / "bench_burst.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
