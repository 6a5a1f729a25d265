"""Benchmark: `ledger export` and `ledger verify --bundle` on a store.

Measures, on the store given (issue 11 asks for a 1,000,000-event one):

- export: events/s (wall clock, and per CPU second: the machine is shared),
  peak RSS of the export process;
- verify --bundle against verify on the store itself (the baseline, same
  level, same workers), run interleaved with the order alternating run by
  run: seconds, events/s, peak RSS, and the median of the per-run ratios
  verify --bundle / verify.

Every command is the installed `ledger` CLI in a child process; its CPU time
and peak RSS come from the kernel's accounting of that child (os.wait4), with
the children it reaped. Workers started by a fork server are not its children
(the server reaps them), so `tree_cpu_seconds` adds up every process of the
command's tree, each its own CPU, sampled every 0.1 s (Linux; a process that
ends loses at most its last 0.1 s). Results: stdout and tools/results/NAME.json.

    .venv/bin/python tools/bench_export.py --store sqlite:////path/ledger.db --keys DIR \
        [--runs 3] [--level settlement] [--workers 2] [--verify-runs N] [--name NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))

import _benchlib as bench  # noqa: E402

LEDGER = Path(sys.executable).parent / "ledger"


@dataclass
class Run:
    what: str
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    events: int
    tree_cpu_seconds: float = 0.0  # every process of its tree (module doc)

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    @property
    def cpu_rate(self) -> float:
        return self.events / self.cpu_seconds if self.cpu_seconds else 0.0


def run_ledger(what: str, argv: list[str], events: int) -> Run:
    """One `ledger` command, timed; its own and its children's CPU and peak RSS,
    and its whole tree's CPU (module doc)."""
    env = os.environ | {"LEDGER_PROGRESS_INTERVAL": "off"}
    started = time.perf_counter()
    child = subprocess.Popen(
        [str(LEDGER), *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    tree = _TreeCpu(child.pid)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # (a zombie: its stat final)
    seconds = time.perf_counter() - started
    tree_cpu = tree.stop()
    _, status, usage = os.wait4(child.pid, 0)
    out = child.stdout.read().decode() if child.stdout else ""
    err = child.stderr.read().decode() if child.stderr else ""
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{what} failed ({child.returncode}): {err.strip() or out.strip()}")
    print(f"  {what}: {seconds:.1f} s; {out.splitlines()[0] if out else ''}", flush=True)
    cpu = usage.ru_utime + usage.ru_stime
    return Run(what, seconds, cpu, usage.ru_maxrss / 1024, events, tree_cpu)


class _TreeCpu:
    """Each process below `pid` (and `pid`): its own CPU, the last seen, sampled
    by a thread every 0.1 s until `stop` (called once `pid` has exited, not
    reaped: its own figure is then final)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._seen: dict[int, float] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        for pid in bench.with_descendants([self._pid]):
            used = bench.cpu_seconds(pid)
            if used:
                self._seen[pid] = used

    def _run(self) -> None:
        while not self._done.wait(0.1):
            self._sample()

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        self._sample()
        return sum(self._seen.values())


def count_events(store: str, keys: str) -> int:
    from ledger.crypto.keystore import KeyDirectory
    from ledger.store.application import LedgerApplication

    with LedgerApplication(store, keyring=KeyDirectory(Path(keys)).keyring(), create=False) as app:
        return app.tables.event_count()[0]


def save_summary(name: str, summary: dict[str, Any]) -> None:
    """`summary` to tools/results/NAME.json, and on stdout without its runs."""
    results = TOOLS / "results"
    results.mkdir(exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=2))


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--keys", required=True)
    parser.add_argument("--runs", type=int, default=3, help="export runs (default 3)")
    parser.add_argument(
        "--verify-runs", type=int, default=None, help="verify pairs (default: --runs)"
    )
    parser.add_argument("--level", default="settlement")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--scratch", default=None, help="where bundles go (default: a temp dir)")
    parser.add_argument("--name", default="bench_export", help="tools/results/NAME.json")
    args = parser.parse_args()
    verify_runs = args.runs if args.verify_runs is None else args.verify_runs

    events = count_events(args.store, args.keys)
    print(f"store: {events} events; {args.runs} export runs, {verify_runs} verify pairs")
    scratch = Path(tempfile.mkdtemp(prefix="bench-export-", dir=args.scratch))
    common = ["--store", args.store, "--keys", args.keys]
    verify_args = ["--level", args.level, "--workers", str(args.workers)]
    exports: list[Run] = []
    bundles: list[Run] = []
    stores: list[Run] = []
    try:
        bundle = scratch / "bundle"
        for number in range(max(args.runs, verify_runs)):
            if bundle.exists():
                shutil.rmtree(bundle)
            run = run_ledger("export", [*common, "export", str(bundle)], events)
            if number < args.runs:
                exports.append(run)
            if number >= verify_runs:
                continue
            pair = [
                ("verify --bundle", ["verify", "--bundle", str(bundle), *verify_args], bundles),
                ("verify (store)", [*common, "verify", *verify_args], stores),
            ]
            for what, argv, into in pair if number % 2 == 0 else reversed(pair):
                into.append(run_ledger(what, argv, events))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    ratios = [b.seconds / s.seconds for b, s in zip(bundles, stores, strict=True)]
    summary: dict[str, Any] = {
        "events": events,
        "store": args.store,
        "level": args.level,
        "workers": args.workers,
        "export_events_per_s": median([r.rate for r in exports]),
        "export_events_per_cpu_s": median([r.cpu_rate for r in exports]),
        "export_peak_rss_mb": max(r.peak_rss_mb for r in exports),
        "verify_bundle_events_per_s": median([r.rate for r in bundles]),
        "verify_store_events_per_s": median([r.rate for r in stores]),
        "verify_bundle_peak_rss_mb": max((r.peak_rss_mb for r in bundles), default=None),
        "verify_store_peak_rss_mb": max((r.peak_rss_mb for r in stores), default=None),
        "ratio_verify_bundle_over_store_time": median(ratios),
        "ratios": ratios,
        "load_average": os.getloadavg(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": [asdict(r) for r in exports + bundles + stores],
    }
    print(
        f"export: {summary['export_events_per_s']:,.0f} events/s wall, "
        f"{summary['export_events_per_cpu_s']:,.0f} events per CPU second, "
        f"peak RSS {summary['export_peak_rss_mb']:.0f} MB (median of {len(exports)})"
    )
    if ratios:
        print(
            f"verify --bundle: {summary['verify_bundle_events_per_s']:,.0f} events/s, "
            f"verify on the store: {summary['verify_store_events_per_s']:,.0f} events/s; "
            f"time ratio bundle/store {summary['ratio_verify_bundle_over_store_time']:.2f} "
            f"(median of {len(ratios)}: {', '.join(f'{r:.2f}' for r in ratios)}); peak RSS "
            f"{summary['verify_bundle_peak_rss_mb']:.0f} MB vs "
            f"{summary['verify_store_peak_rss_mb']:.0f} MB"
        )
    print(f"load average {summary['load_average'][0]:.1f} (2 cores shared)")
    results = TOOLS / "results"
    results.mkdir(exist_ok=True)
    (results / f"{args.name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
