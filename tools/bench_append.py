"""Append throughput: sealed (LedgerApplication) vs plain eventsourcing Application.

The same domain work (one new Table aggregate per save: Opened + 9 x
DiceThrown = 10 events, same seed, same names and dice) is saved through
both applications into fresh stores of the same kind: the plain one uses
eventsourcing's own recorder (no envelope, no signature, no append-only
triggers). Only the `save(table)` calls are timed; the aggregates are made
with their pending events beforehand, for each run anew, so the ratio is the
cost of sealing and the ledger's recorder alone.

    .venv/bin/python tools/bench_append.py [--store sqlite|postgres|both]
        [--events 20000] [--repeats 5] [--per-save 10]
"""

from __future__ import annotations

import gc
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench

NAME = "bench_append"
TARGETS = {"sqlite": 0.6, "postgres": 0.8}


def _save_all(app: Any, n: int, per_save: int, label: str) -> float:
    tables = bench.make_tables(n, per_save)
    gc.collect()
    with bench.progress(label, n) as advance:
        started = time.perf_counter()
        for i, table in enumerate(tables):
            app.save(table)
            if i % 100 == 99:
                advance(100 * per_save)
        elapsed = time.perf_counter() - started
    return elapsed


def run_sealed(kind: str, workdir: Path, keys: bench.Keys, n: int, per_save: int) -> float:
    from ledger.store.application import LedgerApplication

    with bench.fresh_store(kind, workdir) as url:
        app = LedgerApplication(url, keyring=keys.keyring, signer=keys.node_signer)
        try:
            seconds = _save_all(app, n, per_save, f"{kind} sealed")
            stored, _ = app.tables.event_count()
        finally:
            app.close()
    if stored != n:
        raise SystemExit(f"sealed store holds {stored} events, expected {n}")
    return n / seconds


def run_plain(kind: str, workdir: Path, n: int, per_save: int) -> float:
    from eventsourcing.application import Application

    with bench.fresh_store(kind, workdir) as url:
        app: Application[Any] = Application(env=bench.plain_env(url))
        try:
            seconds = _save_all(app, n, per_save, f"{kind} plain")
            stored = app.recorder.max_notification_id()  # type: ignore[attr-defined]
        finally:
            app.close()
    if stored != n:
        raise SystemExit(f"plain store holds {stored} events, expected {n}")
    return n / seconds


def main() -> int:
    p = bench.parser(__doc__.splitlines()[0], events=20_000)
    p.add_argument("--per-save", type=int, default=10, help="events per save (default 10)")
    args = p.parse_args()
    print(bench.machine_line())
    print(
        f"append {args.events:,} events, {args.per_save} per save (one new Table per save), "
        f"median of {args.repeats} interleaved runs"
    )
    n = args.events
    comparisons = []
    with bench.temp_dir() as workdir:
        keys = bench.make_keys(workdir)
        for kind in bench.stores(args.store):
            c = bench.Comparison(
                kind,
                "append",
                "plain Application",
                "LedgerApplication",
                "events/s",
                TARGETS[kind],
            )
            for run in range(args.repeats):
                bench.note(f"{kind}: run {run + 1}/{args.repeats}")
                # Alternate which goes first, so drift and warm caches favour neither.
                if run % 2 == 0:
                    plain = run_plain(kind, workdir, n, args.per_save)
                    sealed = run_sealed(kind, workdir, keys, n, args.per_save)
                else:
                    sealed = run_sealed(kind, workdir, keys, n, args.per_save)
                    plain = run_plain(kind, workdir, n, args.per_save)
                c.add(plain, sealed)
                bench.note(f"  plain {plain:,.0f}/s  sealed {sealed:,.0f}/s  {sealed / plain:.3f}x")
            comparisons.append(c)
    print()
    print(bench.comparison_table(comparisons))
    path = bench.write_results(NAME, args, comparisons)
    if path:
        print(f"\nwrote {path.relative_to(bench.TOOLS.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
