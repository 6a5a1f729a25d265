#!/usr/bin/env python3
"""Speed and memory of `ledger report` on a store, against reading the same log.

Each run measures, in alternating order, on one store:

(a) the report's pass (`ledger.report.reader.read_log`: every log position
    read, every event it counts decoded and its envelope checked, aggregated)
    in events/s, against
    - the store's raw read rate: `select_notifications` over the whole log in
      the same batches, nothing decoded;
    - reading it checked: every event through the sealing mapper (envelope,
      signature, decoding), nothing aggregated.
(b) peak memory of the whole command, `ledger report FILE.html` (read, render,
    charts, write), in a subprocess: its VmHWM.         target < 300 MB at 1,000,000 events
    and its events/s end to end.

    .venv/bin/python tools/bench_report.py --dir /work/helpers/big-store [--repeats 3]
    .venv/bin/python tools/bench_report.py --rounds 500         (a fresh simulated store)

--dir holds ledger.db and keys/ (copied first with SQLite's online backup: the store
is not touched, and may still be being written).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _benchlib as bench

from ledger.crypto.keystore import KeyDirectory
from ledger.plugins.manager import get_plugin_manager
from ledger.report.reader import BATCH, read_log
from ledger.report.theory import Theories, load_edges
from ledger.store.application import LedgerApplication

EDGE = bench.TOOLS.parent / "docs" / "xidach_edge.json"
LEDGER = Path(sys.executable).with_name("ledger")


def raw_read(app: LedgerApplication) -> int:
    count, position = 0, 0
    while batch := app.recorder.select_notifications(position, BATCH, inclusive_of_start=False):
        count += len(batch)
        position = batch[-1].id
    return count


def checked_read(app: LedgerApplication) -> int:
    count, position = 0, 0
    while batch := app.recorder.select_notifications(position, BATCH, inclusive_of_start=False):
        for notification in batch:
            app.mapper.to_domain_event(notification)
        count += len(batch)
        position = batch[-1].id
    return count


def report_pass(app: LedgerApplication, theories: Theories) -> int:
    return read_log(app, theories).events


def command(workdir: Path, env: dict[str, str]) -> tuple[float, int]:
    """(seconds, VmHWM in kB) of `ledger report` run in a fresh interpreter."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", bench.LEDGER_WITH_PEAK, "report", "bench.html", "--edge", str(EDGE)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    peak = bench.peak_kb(done.stdout)
    if done.returncode != 0 or peak is None:
        raise SystemExit(f"ledger report failed: {done.stderr.strip()}")
    return seconds, peak


def prepared(args: Any, workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env |= {"LEDGER_STORE": f"sqlite:///{workdir / 'ledger.db'}", "LEDGER_KEYS": "keys"}
    if args.dir:
        source = Path(args.dir)
        bench.note(f"copying {source / 'ledger.db'}")
        # SQLite's online backup: a consistent copy even of a store still being written.
        with (
            contextlib.closing(
                sqlite3.connect(f"file:{source / 'ledger.db'}?mode=ro", uri=True)
            ) as original,
            contextlib.closing(sqlite3.connect(workdir / "ledger.db")) as copy,
        ):
            original.backup(copy)
        shutil.copytree(source / "keys", workdir / "keys")
        return env
    env["LEDGER_PASSPHRASE"] = "bench"
    bench.note(f"simulating {args.rounds} rounds")
    subprocess.run(
        [str(LEDGER), "simulate", "--rounds", str(args.rounds), "--players", "40", "--seed", "7"],
        cwd=workdir,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return env


def main() -> int:
    parser = bench.parser(__doc__.splitlines()[0], events=0, repeats=3, store="sqlite")
    parser.add_argument("--dir", help="a directory holding ledger.db and keys/ (copied)")
    parser.add_argument("--rounds", type=int, default=300, help="without --dir: rounds simulated")
    args = parser.parse_args()
    with bench.temp_dir("ledger-bench-report-") as workdir:
        env = prepared(args, workdir)
        keyring = KeyDirectory(workdir / "keys").keyring()
        app = LedgerApplication(env["LEDGER_STORE"], keyring=keyring, create=False)
        games = get_plugin_manager().games()
        theories = Theories(games, load_edges([str(EDGE)]))
        events = app.tables.event_count()[0]
        versus_raw = bench.Comparison(
            "sqlite", "report pass events/s", "raw read", "report pass", "ev/s", None
        )
        versus_checked = bench.Comparison(
            "sqlite", "report pass events/s", "checked read", "report pass", "ev/s", None
        )
        end_to_end = bench.Measure("sqlite", "ledger report events/s (whole command)", "ev/s", None)
        memory = bench.Measure("sqlite", "ledger report peak RSS (VmHWM)", "MB", 300.0)
        for run in range(args.repeats):
            order = ["raw", "checked", "report"]
            if run % 2:
                order.reverse()
            rates: dict[str, float] = {}
            for which in order:
                fn = {
                    "raw": lambda: raw_read(app),
                    "checked": lambda: checked_read(app),
                    "report": lambda: report_pass(app, theories),
                }[which]
                seconds, count = bench.timed(fn)
                assert count == events, (which, count, events)
                rates[which] = count / seconds
                bench.note(f"run {run}: {which} {rates[which]:,.0f} ev/s")
            versus_raw.add(rates["raw"], rates["report"])
            versus_checked.add(rates["checked"], rates["report"])
            seconds, hwm_kb = command(workdir, env)
            end_to_end.runs.append(events / seconds)
            memory.runs.append(hwm_kb / 1024)
            bench.note(f"run {run}: ledger report {seconds:.1f} s, VmHWM {hwm_kb / 1024:.0f} MB")
        tally = read_log(app, theories)
        app.close()
        sizes = {
            "events": events,
            "open_rounds_at_end": len(tally.open),
            "day_table_rows": len(tally.days),
            "timeline_buckets": len(tally.timeline),
            "timeline_resolution_s": tally.resolution,
            "game_family_rows": sum(len(f) for f in tally.returns.values()),
            "report_bytes": (workdir / "bench.html").stat().st_size,
        }
    print(bench.machine_line())
    print(f"store: {events:,} events ({args.dir or f'simulated, {args.rounds} rounds'})")
    print(bench.comparison_table([versus_raw, versus_checked]))
    print(bench.measure_table([end_to_end, memory]))
    print("what the report holds at the end: " + ", ".join(f"{k} {v:,}" for k, v in sizes.items()))
    path = bench.write_results(
        "bench_report", args, [versus_raw, versus_checked], [end_to_end, memory], {"sizes": sizes}
    )
    if path:
        print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
