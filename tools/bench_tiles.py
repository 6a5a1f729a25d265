"""Benchmark: writing and checking the C2SP tlog-tiles (`ledger tiles`).

One store of N sealed, checkpointed events (bench_verify's build) per store
kind. Each run, in alternating order where two things are compared:

(a) write_tiles into an empty directory (every event read, parsed, checked
    and hashed, the tree rebuilt and compared with the signed root, the
    files written) vs verify_store(level=INTEGRITY, workers=1) on the same
    store: the ledger's own cheapest full check of every event. events/s.
(b) check_tiles of that directory (every bundle and tile read back and
    rebuilt, no store) vs the same baseline. events/s.
(c) a `checkpoint --follow --tiles` turn: 1,000 new events sealed, then the
    checkpointer's catch_up over them (baseline) and write_tiles extending
    the directory (subject), seconds; the ratio says whether publishing keeps
    up with checkpointing.

    .venv/bin/python tools/bench_tiles.py [--store sqlite|postgres|both]
        [--events 50000] [--repeats 3]
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench
from bench_verify import build

NAME = "bench_tiles"
TURN_EVENTS = 1000


def _app(url: str, keys: bench.Keys, *, signer: bool = False) -> Any:
    from ledger.store.application import LedgerApplication

    return LedgerApplication(url, keyring=keys.keyring, signer=keys.node_signer if signer else None)


def _baseline(url: str, keys: bench.Keys, n: int) -> float:
    from ledger.audit.verify import Level, VerifyOptions, verify_store

    app = _app(url, keys)
    try:
        started = time.perf_counter()
        report = verify_store(app, keys.keyring, VerifyOptions(level=Level.INTEGRITY, workers=1))
        elapsed = time.perf_counter() - started
    finally:
        app.close()
    if report.events != n:
        raise SystemExit(f"verify saw {report.events} events, expected {n}")
    return n / elapsed


def _write(url: str, keys: bench.Keys, directory: Path) -> tuple[float, Any]:
    from ledger.export.tiles import write_tiles
    from ledger.store.checkpointer import DEFAULT_ORIGIN

    app = _app(url, keys)
    try:
        return bench.timed(lambda: write_tiles(app, keys.keyring, directory, origin=DEFAULT_ORIGIN))
    finally:
        app.close()


def _check(keys: bench.Keys, directory: Path) -> tuple[float, Any]:
    from ledger.export.tiles_check import check_tiles

    return bench.timed(lambda: check_tiles(directory, keys.keyring))


def _turn(url: str, keys: bench.Keys, directory: Path, seed: int) -> tuple[float, float]:
    """Seal TURN_EVENTS, then (catch_up seconds, write_tiles seconds)."""
    from ledger.crypto.envelope import SignerCheck
    from ledger.store.checkpointer import Checkpointer

    app = _app(url, keys, signer=True)
    try:
        batches = bench.table_batches(TURN_EVENTS, 10, seed=10_000 + seed)
        app.save(*[event for batch in batches for event in batch])
        checkpointer = Checkpointer(
            app.tables,
            signer=keys.checkpoint_signer,
            signer_check=SignerCheck(keys.keyring),
            keyring=keys.keyring,
            batch_size=1000,
        )
        caught_up, _ = bench.timed(checkpointer.catch_up)
    finally:
        app.close()
    written, result = _write(url, keys, directory)
    if result is None or result.size == result.previous:
        raise SystemExit("the turn published nothing")
    return caught_up, written


def run_store(kind: str, args: Any, workdir: Path) -> list[bench.Comparison]:
    n = args.events
    write = bench.Comparison(kind, "events/s", "verify --level integrity, 1 worker",
                             "ledger tiles DIR (from empty)", "events/s", None)  # fmt: skip
    check = bench.Comparison(kind, "events/s", "verify --level integrity, 1 worker",
                             "ledger tiles DIR --check", "events/s", None)  # fmt: skip
    turn = bench.Comparison(kind, f"seconds per {TURN_EVENTS:,} new events",
                            "checkpointer catch_up", "tiles extended", "s", None)  # fmt: skip
    keys = bench.make_keys(workdir)
    with bench.fresh_store(kind, workdir) as url:
        built = build(url, keys, n, 10)
        bench.note(f"{kind}: built {n:,} events ({built})")
        for run in range(args.repeats):
            directory = workdir / f"tiles-{kind}-{run}"
            order = ["baseline", "subject"] if run % 2 == 0 else ["subject", "baseline"]
            rates: dict[str, float] = {}
            for which in order:
                if which == "baseline":
                    rates["baseline"] = _baseline(url, keys, n)
                else:
                    seconds, result = _write(url, keys, directory)
                    assert result is not None and result.size == n
                    rates["write"] = n / seconds
                    seconds, checked = _check(keys, directory)
                    assert checked.size == n
                    rates["check"] = n / seconds
            write.add(rates["baseline"], rates["write"])
            check.add(rates["baseline"], rates["check"])
            shutil.rmtree(directory)
        directory = workdir / f"tiles-{kind}-turns"
        _write(url, keys, directory)
        for run in range(args.repeats):
            caught_up, written = _turn(url, keys, directory, run)
            turn.add(caught_up, written)
            n += TURN_EVENTS
    return [write, check, turn]


def main() -> int:
    args = bench.parser(__doc__.splitlines()[0], events=50_000, repeats=3).parse_args()
    comparisons: list[bench.Comparison] = []
    with bench.temp_dir() as workdir:
        for kind in bench.stores(args.store):
            comparisons += run_store(kind, args, workdir)
    print(bench.machine_line())
    print(bench.comparison_table(comparisons))
    print(f"load average {os.getloadavg()[0]:.1f}")
    bench.write_results(NAME, args, comparisons, extra={"load_average": os.getloadavg()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
