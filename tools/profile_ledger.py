"""Where the ledger's time goes: cProfile of a sealed append and of verification.

    .venv/bin/python tools/profile_ledger.py append [--store sqlite|postgres|both]
        [--events 20000]
    .venv/bin/python tools/profile_ledger.py verify [--store ...] [--events 200000]
        [--level signatures,integrity]

`append` profiles LedgerApplication.save over the bench_append workload, then
the plain Application's for comparison;
`verify` builds a store like bench_verify and profiles verify_store with
workers=1 in this process (the per-chunk code the workers run, plus the
planning and merging the main process does), and times plan_chunks alone.
cProfile inflates many-small-call Python code against C calls (the
signatures), so read the cumulative shares, not the absolute times; use
py-spy for an unbiased sample. Stats go to stdout and to
tools/results/profile_<mode>_<store>.txt.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench


def _report(prof: cProfile.Profile, title: str, out_name: str, wall: float) -> None:
    text = io.StringIO()
    print(f"== {title}: {wall:.2f} s wall under cProfile", file=text)
    for key in ("tottime", "cumulative"):
        print(f"\n-- top 30 by {key}", file=text)
        stats = pstats.Stats(prof, stream=text)
        stats.strip_dirs().sort_stats(key).print_stats(30)
    print(text.getvalue())
    bench.RESULTS.mkdir(exist_ok=True)
    (bench.RESULTS / f"{out_name}.txt").write_text(text.getvalue())


def profile_append(kind: str, n: int) -> None:
    """The bench_append workload (save(table), 10 events each), sealed and then plain."""
    from eventsourcing.application import Application

    from ledger.store.application import LedgerApplication

    with bench.temp_dir() as workdir:
        keys = bench.make_keys(workdir)
        for label in ("sealed", "plain"):
            tables = bench.make_tables(n)
            with bench.fresh_store(kind, workdir) as url:
                app: Application[Any] = (
                    LedgerApplication(url, keyring=keys.keyring, signer=keys.node_signer)
                    if label == "sealed"
                    else Application(env=bench.plain_env(url))
                )
                prof = cProfile.Profile()
                started = time.perf_counter()
                prof.enable()
                for table in tables:
                    app.save(table)
                prof.disable()
                wall = time.perf_counter() - started
                app.close()
            _report(
                prof, f"{label} append of {n:,} events on {kind}", f"profile_append_{kind}_{label}",
                wall,
            )  # fmt: skip


def profile_verify(kind: str, n: int, level_names: str) -> None:
    from bench_verify import build, open_app

    from ledger.audit.log.chunks import CHUNK_LEAVES
    from ledger.audit.verify import Level, VerifyOptions, plan_chunks, verify_store

    with bench.temp_dir() as workdir, bench.fresh_store(kind, workdir) as url:
        keys = bench.make_keys(workdir)
        bench.note(f"{kind}: building {n:,} events")
        build(url, keys, n, 10)
        for level in [Level.parse(name) for name in level_names.split(",")]:
            app = open_app(url, keys)
            try:
                sizes = sorted(c.size for c in app.tables.checkpoints())
                started = time.perf_counter()
                _, specs = plan_chunks(app, sizes, level, CHUNK_LEAVES)
                planning = time.perf_counter() - started
                print(f"{kind}: plan_chunks for {len(specs)} chunks took {planning:.3f} s")
                prof = cProfile.Profile()
                started = time.perf_counter()
                prof.enable()
                verify_store(
                    app,
                    keys.keyring,
                    VerifyOptions(level=level, workers=1, games=_games(level)),
                )
                prof.disable()
                wall = time.perf_counter() - started
            finally:
                app.close()
            _report(
                prof,
                f"verify_store level={level.value} workers=1 of {n:,} events on {kind} "
                f"(plan_chunks alone: {planning:.3f} s)",
                f"profile_verify_{level.value}_{kind}",
                wall,
            )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=["append", "verify"])
    p.add_argument("--store", choices=["sqlite", "postgres", "both"], default="sqlite")
    p.add_argument("--events", type=int)
    p.add_argument("--level", default="signatures,integrity", help="comma-separated levels")
    args = p.parse_args()
    print(bench.machine_line())
    for kind in bench.stores(args.store):
        if args.mode == "append":
            profile_append(kind, args.events or 20_000)
        else:
            profile_verify(kind, args.events or 200_000, args.level)
    return 0


def _games(level: Any) -> Any:
    """The installed games at level settlement (loaded inside the run timed, as
    verify loaded them itself before it took them as an argument); none below."""
    from ledger.audit.verify import Level
    from ledger.plugins.manager import get_plugin_manager

    return get_plugin_manager().games() if level is Level.SETTLEMENT else None


if __name__ == "__main__":
    raise SystemExit(main())
