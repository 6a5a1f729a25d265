"""Run one benchmark script on this checkout and on an earlier release, interleaved.

A benchmark's ratio (ledger vs its baseline, measured in the same run) moves
with the machine: on a shared box the baselines themselves swing by 2x from
one hour to the next. Figures from another day cannot say whether a change
made the ledger slower. This runs the same script of both releases in turn
(the order alternating run by run) in the same quiet period, each release's
own code in its own git worktree and virtualenv, and compares the medians of
their ratios.

    .venv/bin/python tools/bench_against.py --rev e8d7535 [--runs 3] \
        [--worktree /tmp/ledger-rev] -- bench_append.py --repeats 5

The worktree is made (and its virtualenv set up by its own bootstrap) when it
does not exist yet. Results: stdout and tools/results/bench_against_NAME.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "tools" / "results"


def ensure_worktree(rev: str, where: Path) -> Path:
    """A checkout of `rev` at `where` with its own set-up virtualenv."""
    if not where.exists():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev], check=True
        )
        # Releases before 0.2 tracked a virtualenv that works on no other machine.
        shutil.rmtree(where / ".venv", ignore_errors=True)
    if not (where / ".venv" / "bin" / "python").exists():
        subprocess.run([sys.executable, str(where / "tools" / "bootstrap.py"), "setup"], check=True)
    return where


def run_once(tree: Path, script: str, args: list[str]) -> dict[str, Any]:
    """One run of `script` in `tree`; the results JSON it wrote."""
    result_file = tree / "tools" / "results" / f"{Path(script).stem}.json"
    before = result_file.stat().st_mtime if result_file.exists() else 0.0
    env = os.environ | {"LEDGER_PROGRESS_INTERVAL": "off"}
    # A script exits 1 when one of its own targets is missed (bench_studio's on a
    # loaded machine): still a run, whose ratios are compared. It failed only
    # when it wrote no results.
    done = subprocess.run(
        [str(tree / ".venv" / "bin" / "python"), str(tree / "tools" / script), *args],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    if not result_file.exists() or result_file.stat().st_mtime <= before:
        raise SystemExit(f"{script} in {tree} wrote no new {result_file.name} ({done.returncode})")
    data: dict[str, Any] = json.loads(result_file.read_text())
    return data


def ratios_of(data: dict[str, Any]) -> dict[str, float]:
    """'store: metric' -> that run's median ratio, each the higher the better.
    bench_burst's results name theirs per store (bets/s against the single-row
    commit rate), bench_bets' (bets/s against raw inserts), bench_mirror's its
    lag and its baseline's (the source's own unanchored tail: baseline over
    lag); a script's measures in "x" are ratios against a limit of the same run."""
    if "comparisons" in data:
        found = {f"{c['store']}: {c['metric']}": c["ratio_median"] for c in data["comparisons"]}
        # A measure in "x" is a ratio against a limit measured in the same run
        # (bench_studio's bets/s over one core's signing rate): higher is better.
        for m in data.get("measures", []):
            if m["unit"] == "x" and m["median"] is not None:
                found[f"{m['store']}: {m['metric']}"] = m["median"]
        return found
    ratios = {}
    for store, found in data["stores"].items():
        median = found["median"]
        if "vs_commit_rate" in median:
            ratios[f"{store}: bets/s vs commit rate"] = median["vs_commit_rate"]
        if "vs_raw" in median:  # bench_bets: against raw inserts of the same rows
            ratios[f"{store}: bets/s vs raw inserts"] = median["vs_raw"]
            ratios[f"{store}: submit_bet bets/s vs raw inserts"] = median["windowed_vs_raw"]
        if "lag_seconds" in median:
            ratios[f"{store}: unanchored tail / mirror lag (s)"] = (
                median["anchor_lag_seconds"] / median["lag_seconds"]
            )
    return ratios


ATTEMPTS = 3  # a run that fails (a flaky end check, a port taken) is run again, said so


def measured(tree: Path, script: str, args: list[str]) -> dict[str, float]:
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return ratios_of(run_once(tree, script, args))
        except SystemExit as exc:
            print(f"{tree}: {script} failed ({exc}), attempt {attempt}/{ATTEMPTS}", flush=True)
    raise SystemExit(f"{script} failed {ATTEMPTS} times in {tree}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", required=True, help="the earlier release (a git revision)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each release (default 3)")
    parser.add_argument("--worktree", type=Path, help="where the earlier release is checked out")
    parser.add_argument("script", help="a script in tools/, e.g. bench_append.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    options = parser.parse_args()
    if options.runs < 1:
        parser.error("--runs must be at least 1")
    script_args = [a for a in options.args if a != "--"]
    old_tree = ensure_worktree(options.rev, options.worktree or Path(f"/tmp/ledger-{options.rev}"))
    sides = {"earlier": old_tree, "this": ROOT}
    runs: dict[str, list[dict[str, float]]] = {"earlier": [], "this": []}
    started = datetime.now(UTC)
    for index in range(options.runs):
        order = ["earlier", "this"] if index % 2 == 0 else ["this", "earlier"]
        for side in order:
            begun = time.perf_counter()
            found = measured(sides[side], options.script, script_args)
            runs[side].append(found)
            took = time.perf_counter() - begun
            shown = ", ".join(f"{k} {v:.3f}x" for k, v in sorted(found.items()))
            print(f"run {index + 1}/{options.runs} {side} ({took:.0f} s): {shown}", flush=True)
    keys = sorted(set().union(*runs["earlier"]) & set().union(*runs["this"]))
    table = []
    for key in keys:
        earlier = [r[key] for r in runs["earlier"] if key in r]
        this = [r[key] for r in runs["this"] if key in r]
        earlier_median, this_median = statistics.median(earlier), statistics.median(this)
        row: dict[str, Any] = {
            "measure": key,
            "earlier_runs": earlier,
            "this_runs": this,
            "earlier_median": earlier_median,
            "this_median": this_median,
            "this_over_earlier": this_median / earlier_median,
        }
        table.append(row)
        print(
            f"{key}: earlier {row['earlier_median']:.3f}x, this {row['this_median']:.3f}x "
            f"(this / earlier = {row['this_over_earlier']:.2f})"
        )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"bench_against_{Path(options.script).stem}.json"
    out.write_text(
        json.dumps(
            {
                "script": options.script,
                "args": script_args,
                "rev": options.rev,
                "this": subprocess.run(
                    ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                    capture_output=True,
                    text=True,
                ).stdout.strip(),
                "started": started.isoformat(timespec="seconds"),
                "finished": datetime.now(UTC).isoformat(timespec="seconds"),
                "load_average": os.getloadavg(),
                "runs": runs,
                "table": table,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"results: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
