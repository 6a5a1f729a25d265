"""Benchmark: `ledger erase` on a large store, against the same process doing
nothing but opening the ledger (the baseline, measured in the same run).

Issue 40 asks for an erase in under a second. Each run erases one more
player (an account whose owner is sealed) of a copy of the store given
(SQLite: an erase writes), in a child process of the installed CLI, and,
interleaved with it, runs `ledger balances ACCOUNT` on the same copy: a
command that opens the same ledger with its keys and reads one account (what
every command pays before its own work). Reported: the medians, their
difference (the erase's own work: its checks, the signed event, the key
destroyed) and the ratio. Results: stdout and tools/results/NAME.json.

    .venv/bin/python tools/bench_erase.py --store sqlite:////path/ledger.db --keys DIR [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
LEDGER = Path(sys.executable).parent / "ledger"


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([str(LEDGER), *argv], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv[4:6]} failed: {done.stderr.strip()}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a SQLite store URL (it is copied)")
    parser.add_argument("--keys", required=True)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--scratch", default=None)
    parser.add_argument("--name", default="bench_erase")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-erase-", dir=args.scratch))
    try:
        keys = scratch / "keys"
        shutil.copytree(args.keys, keys)
        target = scratch / "ledger.db"
        with (
            sqlite3.connect(args.store.removeprefix("sqlite:///")) as src,
            sqlite3.connect(target) as dst,
        ):
            src.backup(dst)
        env = os.environ | {"LEDGER_PROGRESS_INTERVAL": "off"}
        common = ["--store", f"sqlite:///{target}", "--keys", str(keys)]
        subprocess.run(
            [str(LEDGER), *common, "keys", "create", "op", "--role", "operator"],
            env=env,
            check=True,
            capture_output=True,
        )
        subjects = sorted(p.stem for p in (keys / "subjects").glob("account-*.key"))
        erases: list[float] = []
        opens: list[float] = []
        for number, subject in enumerate(subjects[: args.runs]):
            account = subject.removeprefix("account-")
            erase = [*common, "erase", subject, "--reason", "bench: right to erasure"]
            look = [*common, "balances", account, "--json"]
            pair = [(erase, erases), (look, opens)]
            for argv, into in pair if number % 2 == 0 else reversed(pair):
                into.append(timed(argv, env))
            print(f"  {subject}: erase {erases[-1]:.3f} s, open and read {opens[-1]:.3f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    summary: dict[str, Any] = {
        "store": args.store,
        "runs": args.runs,
        "erase_median_s": statistics.median(erases),
        "open_and_read_median_s": statistics.median(opens),
        "erase_own_work_s": statistics.median(erases) - statistics.median(opens),
        "erase_over_open_and_read": statistics.median(
            e / o for e, o in zip(erases, opens, strict=True)
        ),
        "erases_s": erases,
        "opens_s": opens,
        "load_average": os.getloadavg(),
    }
    (TOOLS / "results").mkdir(exist_ok=True)
    (TOOLS / "results" / f"{args.name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if not k.endswith("s_s")}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
