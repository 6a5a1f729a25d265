"""`ledger history --last 10` on a large store: a proof made and checked, for
many random players, against a baseline measured in the same run, interleaved
call by call: reading one event by its stream index and checking its envelope
(row, signature), the least any read of a verified fact costs.

Target (issue 40): a history of the last 10 rounds under 50 ms on a
1,000,000-event store. Also the `ledger history` command's whole wall time
(a new process: Python's start and imports included), a few times.

    .venv/bin/python tools/bench_history.py --store URL --keys DIR [--histories 200]

The store is made once with `ledger simulate` (see docs/performance.md,
"Account history", for the command that made the one measured there).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench

NAME = "bench_history"
TARGET_MS = 50.0


def sample_wallets(app: Any, count: int, seed: int) -> list[str]:
    """Accounts with more than 20 events (players who played, and the houses)."""
    from ledger.store.merkle_log import stream_of

    with app.tables.recorder.read() as cursor:
        cursor.execute(
            app.tables.recorder.sql(
                "SELECT account FROM {heads} WHERE version > 20 ORDER BY account"
            )
        )
        players = [stream_of(row[0]) for row in cursor.fetchall()]
    return random.Random(seed).sample(players, min(count, len(players)))


def cli_wall(store: str, keys: str, account: str, runs: int) -> list[float]:
    ledger = Path(sys.executable).parent / "ledger"
    env = os.environ | {"LEDGER_PROGRESS_INTERVAL": "off"}
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [str(ledger), "--store", store, "--keys", keys, "history", account, "--last", "10"],
            check=True,
            capture_output=True,
            env=env,
        )
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> int:
    from ledger.crypto.envelope import SignerCheck
    from ledger.crypto.keys import Keyring
    from ledger.history.check import check_history
    from ledger.history.proof import history_proof
    from ledger.history.span import Span
    from ledger.store.application import LedgerApplication

    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--store", required=True)
    args.add_argument("--keys", required=True)
    args.add_argument("--histories", type=int, default=200)
    args.add_argument("--cli-runs", type=int, default=5)
    args.add_argument("--seed", type=int, default=11)
    options = args.parse_args()

    keyring = Keyring.load(Path(options.keys) / "keyring.json")
    app = LedgerApplication(options.store, keyring=keyring, create=False)
    try:
        events, _ = app.tables.event_count()
        bench.note(f"store: {events} events; sampling accounts")
        accounts = sample_wallets(app, options.histories, options.seed)
        signer_check = SignerCheck(keyring)
        made_ms: list[float] = []
        checked_ms: list[float] = []
        base_ms: list[float] = []
        sizes: list[int] = []
        gc.collect()
        with bench.progress("histories", len(accounts)) as advance:
            for n, account in enumerate(accounts):
                for which in (0, 1) if n % 2 == 0 else (1, 0):
                    started = time.perf_counter()
                    if which == 0:
                        proof = history_proof(app, keyring, account, Span(last=10))
                        made = time.perf_counter()
                        check_history(proof, keyring)
                        done = time.perf_counter()
                        made_ms.append((made - started) * 1000)
                        checked_ms.append((done - made) * 1000)
                        sizes.append(len(proof["events"]))
                    else:
                        bench.read_one_event(app, signer_check, account)
                        base_ms.append((time.perf_counter() - started) * 1000)
                advance(1)
        accounts_in_map = len(sample_wallets(app, 10**9, 0))
    finally:
        app.close()
    cli_ms = cli_wall(options.store, options.keys, accounts[0], options.cli_runs)

    both = [m + c for m, c in zip(made_ms, checked_ms, strict=True)]
    ratios = [t / b for t, b in zip(both, base_ms, strict=True)]
    result: dict[str, Any] = {
        "name": NAME,
        "machine": bench.machine_line(),
        "code": bench.code_fingerprint(),
        "store": options.store,
        "store_events": events,
        "accounts_sampled": len(accounts),
        "accounts_with_over_20_events": accounts_in_map,
        "events_per_history_median": statistics.median(sizes),
        "events_per_history_max": max(sizes),
        "made_ms_median": round(statistics.median(made_ms), 3),
        "checked_ms_median": round(statistics.median(checked_ms), 3),
        "made_and_checked_ms_median": round(statistics.median(both), 3),
        "made_and_checked_ms_p95": round(sorted(both)[int(len(both) * 0.95) - 1], 3),
        "baseline_one_event_ms_median": round(statistics.median(base_ms), 3),
        "ratio_median": round(statistics.median(ratios), 2),
        "cli_wall_ms": [round(t, 1) for t in cli_ms],
        "cli_wall_ms_median": round(statistics.median(cli_ms), 1),
        "target_ms": TARGET_MS,
        "met": statistics.median(both) < TARGET_MS,
    }
    print(bench.machine_line())
    print(
        f"{len(accounts)} histories (--last 10) of random accounts on a {events}-event store "
        f"({result['events_per_history_median']} events per proof, median; max "
        f"{result['events_per_history_max']})"
    )
    print(
        f"made {result['made_ms_median']} ms + checked {result['checked_ms_median']} ms, median; "
        f"both: median {result['made_and_checked_ms_median']} ms, p95 "
        f"{result['made_and_checked_ms_p95']} ms (target < {TARGET_MS:.0f} ms: "
        f"{'met' if result['met'] else 'NOT met'})"
    )
    print(
        f"baseline (one event by index, envelope checked): median "
        f"{result['baseline_one_event_ms_median']} ms; history / baseline, median of ratios: "
        f"{result['ratio_median']}x"
    )
    print(f"`ledger history --last 10`, whole process: median {result['cli_wall_ms_median']} ms")
    bench.RESULTS.mkdir(exist_ok=True)
    (bench.RESULTS / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
