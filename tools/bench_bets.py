"""The Python API at a live table: N bets on ONE round from T threads of one
process (each call waits for its commit), and from one caller keeping 128 in
flight (`Casino.submit_bet`), against the storage limit measured in the same
run: raw batched inserts of the very rows those bets stored (the same sealed
bytes, 256 bets' rows a transaction, no ledger code).

Then, on that round: close betting and the throw (which settles every bet),
each one command; and `verify --level settlement` over rounds of N/4, N/2 and
N bets, to show that re-settling a round grows linearly with its bets.

    .venv/bin/python tools/bench_bets.py [--store sqlite|postgres|both]
        [--bets 10000] [--threads 16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _benchlib as bench

LIMITS: Any = {"min_bet": 10, "max_bet": 1_000, "max_round": 10**9}
WALLETS = 500
STAKE = 100
BATCH = 256  # bets a transaction in the raw insert baseline (the runner's batch size)
WINDOW = 128  # bets one caller keeps in flight through submit_bet
TARGET_BETS_PER_S = 3_000


def open_casino(url: str, keys: bench.Keys) -> Any:
    from ledger.casino import Casino
    from ledger.plugins.manager import get_plugin_manager
    from ledger.privacy.personal import PersonalData
    from ledger.store.application import LedgerApplication

    personal = PersonalData(keys.path, None)  # owners and dealers sealed, as a node seals them
    app = LedgerApplication(url, keyring=keys.keyring, signer=keys.node_signer, personal=personal)
    return app, Casino(app, get_plugin_manager().games())


def table_with_round(casino: Any) -> tuple[str, str, list[str]]:
    from ledger.rng.server import RngServer

    wallets = []
    for n in range(WALLETS):
        wallet = casino.open_account(request_id=f"a{n}", owner=f"p{n}", currency="EUR")
        casino.deposit(request_id=f"d{n}", account_id=wallet, amount=10**9)
        wallets.append(wallet)
    table = casino.open_table(
        request_id="t", name="Live", game="taixiu", kind="rng", currency="EUR", limits=LIMITS
    )
    rng = RngServer()
    casino.commit_seed(request_id="seed", table_id=table, rng=rng)
    casino.rng = rng
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    return table, round_id, wallets


def threaded_bets(casino: Any, round_id: str, wallets: list[str], bets: int, threads: int) -> float:
    """N bets from T threads, each placing the next one as soon as its last is
    acknowledged: bets/s."""
    counter = iter(range(bets))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while True:
                with lock:
                    n = next(counter, None)
                if n is None:
                    return
                casino.place_bet(
                    request_id=str(uuid.uuid4()),
                    round_id=round_id,
                    account_id=wallets[n % len(wallets)],
                    bet={"bet": "big"},
                    stake=STAKE,
                )
        except BaseException as exc:  # reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    started = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"a bet failed: {errors[0]!r}")
    return bets / elapsed


def windowed_bets(casino: Any, round_id: str, wallets: list[str], bets: int, window: int) -> float:
    """N bets from ONE caller keeping `window` of them in flight (`Casino.submit_bet`,
    each answered by a future once its batch commits): bets/s."""
    pending: deque[Any] = deque()
    started = time.perf_counter()
    for n in range(bets):
        pending.append(
            casino.submit_bet(
                request_id=str(uuid.uuid4()),
                round_id=round_id,
                account_id=wallets[n % len(wallets)],
                bet={"bet": "big"},
                stake=STAKE,
            )
        )
        if len(pending) >= window:
            pending.popleft().result()
    while pending:
        pending.popleft().result()
    return bets / (time.perf_counter() - started)


def stored_rows(app: Any, after: int) -> list[tuple[Any, int, str, bytes]]:
    rows = []
    while batch := app.tables.rows_after(after, 5000):
        rows += [(r[1], r[2], r[3], bytes(r[4])) for r in batch]
        after = batch[-1][0]
    return rows


def raw_inserts(
    kind: str, workdir: Path, rows: list[tuple[Any, int, str, bytes]], per_bet: float
) -> float:
    """The same rows into a bare table of the same shape, BATCH bets' rows a
    transaction: bets/s the storage alone sustains."""
    chunk = max(1, round(BATCH * per_bet))
    if kind == "sqlite":
        conn = sqlite3.connect(workdir / "raw.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE e (originator_id TEXT, originator_version INTEGER, topic TEXT, "
            "state BLOB, PRIMARY KEY (originator_id, originator_version))"
        )
        started = time.perf_counter()
        for start in range(0, len(rows), chunk):
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO e VALUES (?, ?, ?, ?)", rows[start : start + chunk])
            conn.execute("COMMIT")
        elapsed = time.perf_counter() - started
        conn.close()
        return len(rows) / per_bet / elapsed
    import psycopg

    schema = f"raw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(bench.PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(
                f"CREATE TABLE {schema}.e (originator_id uuid, originator_version int, "
                "topic text, state bytea, PRIMARY KEY (originator_id, originator_version))"
            )
            started = time.perf_counter()
            for start in range(0, len(rows), chunk):
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO {schema}.e VALUES (%s, %s, %s, %s)",
                        [(str(r[0]), r[1], r[2], r[3]) for r in rows[start : start + chunk]],
                    )
            elapsed = time.perf_counter() - started
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return len(rows) / per_bet / elapsed


def verify_seconds(url: str, keys: bench.Keys) -> float:
    from ledger.audit.verify import Level, VerifyOptions, verify_store
    from ledger.plugins.manager import get_plugin_manager
    from ledger.store.application import LedgerApplication

    app = LedgerApplication(url, keyring=keys.keyring, create=False)
    try:
        started = time.perf_counter()
        verify_store(
            app,
            keys.keyring,
            VerifyOptions(level=Level.SETTLEMENT, games=get_plugin_manager().games()),
        )
        return time.perf_counter() - started
    finally:
        app.close()


def run(kind: str, bets: int, threads: int) -> dict[str, Any]:
    with bench.temp_dir("ledger-bets-") as workdir, bench.fresh_store(kind, workdir) as url:
        keys = bench.make_keys(workdir)
        app, casino = open_casino(url, keys)
        try:
            _, round_id, wallets = table_with_round(casino)
            before = app.tables.highest_id()
            batches = casino.runner.batches
            rate = threaded_bets(casino, round_id, wallets, bets, threads)
            batches = casino.runner.batches - batches
            rows = stored_rows(app, before)
            windowed = windowed_bets(casino, round_id, wallets, bets, WINDOW)
            started = time.perf_counter()
            casino.close_betting(request_id="close", round_id=round_id)
            close_s = time.perf_counter() - started
            started = time.perf_counter()
            casino.throw_dice(request_id="throw", round_id=round_id, rng=casino.rng)
            throw_s = time.perf_counter() - started
        finally:
            app.close()
        raw = raw_inserts(kind, workdir, rows, len(rows) / bets)
    return {
        "bets_per_s": rate,
        "windowed_bets_per_s": windowed,
        "windowed_vs_raw": windowed / raw,
        "raw_bets_per_s": raw,
        "vs_raw": rate / raw,
        "rows_per_bet": len(rows) / bets,
        "bets_per_commit": bets / max(1, batches),
        "close_s": close_s,
        "throw_s": throw_s,
    }


def linear(kind: str, bets: int) -> dict[str, float]:
    """verify --level settlement on stores holding one round of n bets, n = N/4, N/2, N."""
    found: dict[str, float] = {}
    for n in (bets // 4, bets // 2, bets):
        with bench.temp_dir("ledger-bets-v-") as workdir, bench.fresh_store(kind, workdir) as url:
            keys = bench.make_keys(workdir)
            app, casino = open_casino(url, keys)
            try:
                _, round_id, wallets = table_with_round(casino)
                threaded_bets(casino, round_id, wallets, n, 16)
                casino.close_betting(request_id="close", round_id=round_id)
                casino.throw_dice(request_id="throw", round_id=round_id, rng=casino.rng)
            finally:
                app.close()
            found[str(n)] = verify_seconds(url, keys)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--bets", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-files", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("LEDGER_PROGRESS_INTERVAL", "off")
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in bench.stores(args.store)}
    for repeat in range(args.repeats):
        for kind in runs:
            print(f"{kind}: run {repeat + 1}/{args.repeats}", file=sys.stderr, flush=True)
            runs[kind].append(run(kind, args.bets, args.threads))
    summary: dict[str, Any] = {}
    for kind, found in runs.items():
        medians = {key: statistics.median(r[key] for r in found) for key in found[0]}
        print(
            f"{kind}: verify on rounds of {args.bets // 4}, {args.bets // 2}, {args.bets} bets",
            file=sys.stderr,
        )
        scaling = linear(kind, args.bets)
        summary[kind] = {"median": medians, "runs": found, "verify_settlement_s": scaling}
        per_thousand = {n: 1000 * s / int(n) for n, s in scaling.items()}
        print(f"\n{kind}: {args.bets} bets on one round from {args.threads} threads (Python API):")
        print(
            f"  {medians['bets_per_s']:.0f} bets/s; raw batched inserts of the same rows "
            f"{medians['raw_bets_per_s']:.0f} bets/s: x{medians['vs_raw']:.2f} "
            f"({medians['rows_per_bet']:.1f} rows a bet, "
            f"{medians['bets_per_commit']:.0f} bets a commit)"
        )
        print(
            f"  one caller, {WINDOW} bets in flight (submit_bet): "
            f"{medians['windowed_bets_per_s']:.0f} bets/s (x{medians['windowed_vs_raw']:.2f} raw)"
        )
        print(
            f"  close betting {medians['close_s']:.2f} s; "
            f"throw (settles every bet) {medians['throw_s']:.2f} s"
        )
        print(
            "  verify --level settlement: "
            + ", ".join(
                f"{n} bets {s:.1f} s ({per_thousand[n]:.2f} s per 1,000)"
                for n, s in scaling.items()
            )
        )
    if not args.no_files:
        bench.RESULTS.mkdir(exist_ok=True)
        data = {
            "machine": bench.machine(),
            "args": vars(args),
            "target_bets_per_s": TARGET_BETS_PER_S,
            "stores": summary,
        }
        (bench.RESULTS / "bench_bets.json").write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
