"""`ledger recall` latency on a large store: the median of many recalls of random
rounds, against a baseline measured in the same run, interleaved recall by
recall: reading one event by its stream index and checking its envelope
(row, signature), the least any read of a verified fact costs.

Target (issue 11): a recall under 50 ms on a 1,000,000-event store.

    .venv/bin/python tools/bench_recall.py [--store URL] [--keys DIR] [--recalls 300]

Default store: the lead's 1,000,000-event SQLite store in
/work/helpers/big-store (read only). Rounds are sampled once, before timing,
from the rounds' first events (that scan is set-up, not part of a recall).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from ledger.errors import with_article

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench

NAME = "bench_recall"
BIG = Path("/work/helpers/big-store")
TARGET_MS = 50.0


def sample_rounds(app: Any, count: int, seed: int) -> list[str]:
    from ledger.audit.recall import OPENED
    from ledger.store.merkle_log import stream_of

    with app.recorder.read() as cursor:
        cursor.execute(
            app.recorder.sql(
                "SELECT originator_id FROM {events} WHERE originator_version = 1 AND topic = %s"
            ),
            (OPENED,),
        )
        rounds = [stream_of(r[0]) for r in cursor.fetchall()]
    return random.Random(seed).sample(rounds, min(count, len(rounds)))


def main() -> int:
    from ledger.audit.recall import recall_round
    from ledger.crypto.envelope import SignerCheck
    from ledger.crypto.keys import Keyring
    from ledger.domain.stored_names import ROUND_OPENED, current_names
    from ledger.plugins.manager import get_plugin_manager
    from ledger.store.application import LedgerApplication

    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--store", default=f"sqlite:///{BIG / 'ledger.db'}")
    args.add_argument("--keys", default=str(BIG / "keys"))
    args.add_argument("--recalls", type=int, default=300)
    args.add_argument("--seed", type=int, default=11)
    options = args.parse_args()

    keyring = Keyring.load(Path(options.keys) / "keyring.json")
    games = get_plugin_manager().games()
    app = LedgerApplication(options.store, keyring=keyring, create=False)
    try:
        events, _ = app.tables.event_count()
        bench.note(f"store: {events} events; sampling rounds")
        rounds = sample_rounds(app, options.recalls, options.seed)
        signer_check = SignerCheck(keyring)
        recall_ms: list[float] = []
        base_ms: list[float] = []
        sizes: list[int] = []
        by_game: dict[str, list[float]] = {}
        failed = 0
        gc.collect()
        with bench.progress("recalling", len(rounds)) as advance:
            for n, round_id in enumerate(rounds):
                # Alternate the order so drift and cache warmth hit both alike.
                for which in (0, 1) if n % 2 == 0 else (1, 0):
                    started = time.perf_counter()
                    if which == 0:
                        recall = recall_round(app, keyring, games, round_id)
                        recall_ms.append((time.perf_counter() - started) * 1000)
                        sizes.append(len(recall.events))
                        opened = current_names(ROUND_OPENED, dict(recall.events[0].facts or {}))
                        game = str(opened.get("game"))
                        by_game.setdefault(game, []).append(recall_ms[-1])
                        failed += 0 if recall.ok else 1
                    else:
                        bench.read_one_event(app, signer_check, round_id)
                        base_ms.append((time.perf_counter() - started) * 1000)
                advance(1)
    finally:
        app.close()

    ratios = [r / b for r, b in zip(recall_ms, base_ms, strict=True)]
    result: dict[str, Any] = {
        "name": NAME,
        "machine": bench.machine_line(),
        "code": bench.code_fingerprint(),
        "store": options.store,
        "store_events": events,
        "recalls": len(recall_ms),
        "events_per_round_median": statistics.median(sizes),
        "events_per_round_max": max(sizes),
        "recall_ms_median": round(statistics.median(recall_ms), 3),
        "recall_ms_p95": round(sorted(recall_ms)[int(len(recall_ms) * 0.95) - 1], 3),
        "recall_ms_max": round(max(recall_ms), 3),
        "recall_ms_median_by_game": {
            game: {"recalls": len(times), "median": round(statistics.median(times), 3)}
            for game, times in sorted(by_game.items())
        },
        "baseline_one_event_ms_median": round(statistics.median(base_ms), 3),
        "ratio_median": round(statistics.median(ratios), 2),
        "rounds_not_verified": failed,
        "target_ms": TARGET_MS,
        "met": statistics.median(recall_ms) < TARGET_MS and failed == 0,
    }
    print(bench.machine_line())
    print(
        f"{result['recalls']} recalls of random rounds on {with_article(f'{events}-event')} store "
        f"({result['events_per_round_median']} events per round, median; max "
        f"{result['events_per_round_max']})"
    )
    print(
        f"recall: median {result['recall_ms_median']} ms, p95 {result['recall_ms_p95']} ms, "
        f"max {result['recall_ms_max']} ms (target < {TARGET_MS:.0f} ms median: "
        f"{'met' if result['met'] else 'NOT met'})"
    )
    print(
        "by game: "
        + ", ".join(
            f"{game} {v['median']} ms ({v['recalls']} recalls)"
            for game, v in result["recall_ms_median_by_game"].items()
        )
    )
    print(
        f"baseline (one event by index, envelope checked): median "
        f"{result['baseline_one_event_ms_median']} ms; recall / baseline, median of per-recall "
        f"ratios: {result['ratio_median']}x"
    )
    if failed:
        print(f"{failed} recalled rounds did not verify")
    bench.RESULTS.mkdir(exist_ok=True)
    (bench.RESULTS / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
