"""Every fault of issue 22, injected N times each, and what it cost: a table
of each fault, how many times it was injected, how many runs survived it
(every check of its scenario passed), the acknowledged commands lost (must
be 0) and the recovery time (from the fault until a request sent after it
was acknowledged; for a killed service, until the restarted one caught up).

The scenarios are the suite's own (tests/fault_scenarios.py): private
PostgreSQL clusters on loopback ports (never the shared server's 5432, which
only the killed-services scenario uses, in a schema of its own), a small
tmpfs for the full disk (root). Results go to stdout and
tools/results/faults.json.

    .venv/bin/python tools/faults.py [--repeats 3] [--only failover,restarts,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LEDGER_PROGRESS_INTERVAL", "off")

import _benchlib as bench

from tests.fault_scenarios import (
    DISK_NAMES,
    FAILOVER_NAME,
    RESTART_NAMES,
    RESTARTS,
    SERVICE_NAMES,
    Outcome,
    disk_full,
    failover,
    killed_services,
    restarts,
)

Scenario = Callable[[Path, list[Outcome]], Any]
SCENARIOS: dict[str, tuple[Scenario, list[str]]] = {
    "failover": (lambda cwd, rec: failover(cwd, rec), [FAILOVER_NAME]),
    "restarts": (
        lambda cwd, rec: restarts(cwd, RESTARTS, rec),
        [RESTART_NAMES[f] for f in RESTARTS],
    ),
    "disk-sqlite": (lambda cwd, rec: disk_full(cwd, "sqlite", rec), [DISK_NAMES["sqlite"]]),
    "disk-postgres": (
        lambda cwd, rec: disk_full(cwd, "postgres", rec),
        [DISK_NAMES["postgres"]],
    ),
    "services": (lambda cwd, rec: killed_services(cwd, rec), list(SERVICE_NAMES.values())),
}


def say(message: str) -> None:
    """A progress line on stderr, on a terminal or not (each run takes a minute or so)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_once(name: str, number: int) -> dict[str, Any]:
    scenario, faults = SCENARIOS[name]
    record: list[Outcome] = []
    started = time.monotonic()
    error = None
    with bench.temp_dir(f"ledger-faults-{name}-") as cwd:
        try:
            scenario(cwd, record)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a failed check (or pytest's skip/fail) is a result here
            where = traceback.extract_tb(exc.__traceback__)[-1]
            error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            error += f" (at {Path(where.filename).name}:{where.lineno})"
    seconds = time.monotonic() - started
    verdict = "survived" if error is None else f"FAILED: {error.splitlines()[0][:200]}"
    say(f"{name} run {number}: {verdict} ({seconds:.0f} s)")
    return {
        "scenario": name,
        "run": number,
        "faults": faults,
        "survived": error is None,
        "error": error,
        "seconds": round(seconds, 1),
        "outcomes": [o.as_dict() for o in record],
    }


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for run in runs:
        for fault in run["faults"]:
            row = rows.setdefault(
                fault,
                {"fault": fault, "injected": 0, "survived": 0, "lost": 0, "lost_unknown": 0,
                 "recoveries": [], "acknowledged": 0, "retried": 0},
            )  # fmt: skip
            row["injected"] += 1
            row["survived"] += run["survived"]
            outcome = next((o for o in run["outcomes"] if o["fault"] == fault), None)
            if outcome is None or outcome["lost"] is None:
                row["lost_unknown"] += 1
                continue
            row["lost"] += outcome["lost"]
            row["acknowledged"] += outcome["acknowledged"]
            row["retried"] += outcome["retried"]
            if outcome["recovery"] is not None:
                row["recoveries"].append(outcome["recovery"])
    for row in rows.values():
        found = row.pop("recoveries")
        row["recovery_median_s"] = round(statistics.median(found), 2) if found else None
        row["recovery_max_s"] = round(max(found), 2) if found else None
    return list(rows.values())


def table(rows: list[dict[str, Any]]) -> str:
    """The figures as a Markdown table (the README's and docs/operations.md's)."""

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    lines = [
        "| fault | injected | survived | acknowledged lost | recovery median / max (s) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        lost = str(row["lost"])
        if row["lost_unknown"]:
            lost += f" (+{row['lost_unknown']} runs unchecked)"
        recovery = f"{seconds(row['recovery_median_s'])} / {seconds(row['recovery_max_s'])}"
        lines.append(
            f"| {row['fault']} | {row['injected']} | {row['survived']} | {lost} | {recovery} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each scenario")
    parser.add_argument(
        "--only", default=",".join(SCENARIOS), help=f"scenarios, of {', '.join(SCENARIOS)}"
    )
    parser.add_argument("--out", default=str(bench.RESULTS / "faults.json"))
    args = parser.parse_args()
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in SCENARIOS]
    if unknown or args.repeats < 1:
        parser.error(f"unknown scenario {unknown[0]!r}" if unknown else "--repeats is 1 or more")
    say(bench.machine_line())
    load_before = os.getloadavg()
    runs = []
    for number in range(1, args.repeats + 1):  # interleaved: load drifts over every scenario
        for name in chosen:
            say(f"{name} run {number} of {args.repeats} ...")
            runs.append(run_once(name, number))
    rows = summarise(runs)
    print(table(rows))
    load_after = os.getloadavg()
    print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {
                "started": bench.STARTED,
                "machine": bench.machine(),
                "code": bench.CODE_AT_START,
                "load_average": {"before": load_before, "after": load_after},
                "repeats": args.repeats,
                "rows": rows,
                "runs": runs,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.out}")
    everything = all(run["survived"] for run in runs) and all(
        row["lost"] == 0 and not row["lost_unknown"] for row in rows
    )
    return 0 if everything else 1


if __name__ == "__main__":
    raise SystemExit(main())
