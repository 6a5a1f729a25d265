"""Benchmark: `ledger archive` against `ledger export` of the same store.

Issue 40 asks for archiving at >= 0.5x the export's rate with peak memory
bounded. Each run copies the store (SQLite: the archive is destructive),
then runs on the copy, in child processes of the installed CLI, interleaved
with the order alternating run by run:

- the baseline: `ledger export DIR` (the whole log, every event written);
- `ledger archive --before NOW --to DIR` (every finished round: the log read
  twice, the rounds' events and the tiles written, the archive read back and
  checked, recorded, the rows removed in one transaction).

Reported: seconds, log events per second (the log's events over the run's
wall time, both commands reading the whole log), archived events per second,
CPU seconds and peak RSS (os.wait4, the children it reaped), the CPU seconds
of the whole process tree (`bench_export.run_ledger`: the envelope workers
are a fork server's children, which os.wait4 does not count), and the median of the
per-run ratios archive rate / export rate. Results: stdout and
tools/results/NAME.json.

    .venv/bin/python tools/bench_archive.py --store sqlite:////path/ledger.db --keys DIR [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_export import Run, count_events, run_ledger, save_summary

TOOLS = Path(__file__).resolve().parent


def copy_store(store: str, keys: str, into: Path) -> tuple[str, str]:
    """A copy of a SQLite store (by SQLite's backup API) and of its keys directory
    (whose kept checkpoint would refuse a store that went back in time)."""
    import sqlite3

    shutil.copytree(keys, into / "keys")  # (makes `into`)
    source = Path(store.removeprefix("sqlite:///"))
    target = into / source.name
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    # On disk before a timed command starts: else the copy's writeback (1.3 GB)
    # lands on whichever command runs first, and the archive, which syncs its
    # files and commits, waits behind it (a pair's order then swung it 30 -> 56 s).
    os.sync()
    return f"sqlite:///{target}", str(into / "keys")


def _export(store: str, keys: str, scratch: Path, events: int) -> Run:
    argv = ["--store", store, "--keys", keys, "export", str(scratch / "bundle")]
    return run_ledger("export", argv, events)


def _archive(store: str, keys: str, scratch: Path, now: str, events: int) -> Run:
    argv = ["--store", store, "--keys", keys, "archive", "--before", now]
    return run_ledger("archive", [*argv, "--to", str(scratch / "a")], events)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a SQLite store URL (it is copied)")
    parser.add_argument("--keys", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scratch", default=None, help="where copies go (default: a temp dir)")
    parser.add_argument("--name", default="bench_archive", help="tools/results/NAME.json")
    args = parser.parse_args()
    if not args.store.startswith("sqlite:///"):
        raise SystemExit("--store: a SQLite store URL (each run archives a copy of it)")
    if args.scratch is not None:
        Path(args.scratch).mkdir(parents=True, exist_ok=True)
    events = count_events(args.store, args.keys)
    print(f"store: {events} events; {args.runs} pairs", flush=True)
    exports: list[Run] = []
    archives: list[Run] = []
    archived: list[int] = []
    for number in range(args.runs):
        scratch = Path(tempfile.mkdtemp(prefix="bench-archive-", dir=args.scratch))
        try:
            now = datetime.now(UTC).isoformat()

            # Alternating which runs first; a store that archived refuses an export,
            # so an export after the archive reads a fresh copy.
            if number % 2 == 0:
                store, keys = copy_store(args.store, args.keys, scratch / "one")
                exports.append(_export(store, keys, scratch, events))
                archives.append(_archive(store, keys, scratch, now, events))
            else:
                store, keys = copy_store(args.store, args.keys, scratch / "one")
                archives.append(_archive(store, keys, scratch, now, events))
                store, keys = copy_store(args.store, args.keys, scratch / "two")
                exports.append(_export(store, keys, scratch, events))
            manifest = json.loads((scratch / "a" / "manifest.json").read_text())
            archived.append(manifest["events"])
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    ratios = [a.rate / e.rate for a, e in zip(archives, exports, strict=True)]
    moved = [n / a.seconds for n, a in zip(archived, archives, strict=True)]
    summary: dict[str, Any] = {
        "events": events,
        "archived_events": statistics.median(archived),
        "export_events_per_s": statistics.median(r.rate for r in exports),
        "archive_log_events_per_s": statistics.median(r.rate for r in archives),
        "archive_archived_events_per_s": statistics.median(moved),
        "archive_over_export_rate": statistics.median(ratios),
        "archived_over_export_rate": statistics.median(
            m / e.rate for m, e in zip(moved, exports, strict=True)
        ),
        "export_peak_rss_mb": max(r.peak_rss_mb for r in exports),
        "archive_peak_rss_mb": max(r.peak_rss_mb for r in archives),
        "archive_cpu_s": statistics.median(r.cpu_seconds for r in archives),
        "export_cpu_s": statistics.median(r.cpu_seconds for r in exports),
        # (The archive's envelope workers are a fork server's children: only here.)
        "archive_tree_cpu_s": statistics.median(r.tree_cpu_seconds for r in archives),
        "export_tree_cpu_s": statistics.median(r.tree_cpu_seconds for r in exports),
        "runs": [
            {"export": vars(e), "archive": vars(a), "ratio": r}
            for e, a, r in zip(exports, archives, ratios, strict=True)
        ],
        "machine": f"{os.cpu_count()} cores",
    }
    save_summary(args.name, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
