"""`ledger verify --level settlement`, this code against an earlier release's, and resume.

A store of every game (Tài Xỉu, Sic Bo and Xì dách tables, RNG and physical)
is simulated once (`ledger simulate`), and its whole-log bundle exported.
Each run then times, in alternating order and each in its own process:

(s) `ledger verify --level settlement` on the store: the baseline's code (a
    git worktree of --baseline, imported first on PYTHONPATH; the plugins
    are the installed ones) against this code.        target >= 3x as fast
(u) the same with `--bundle DIR`.                       target >= 3x as fast
(m) each run's peak memory: VmHWM of the verify process (the settlement pass
    runs there; chunk workers read rows only). It must stay flat as the log
    grows: compare runs at two --rounds.
(r) with --resume-events K: `verify --save-state` on the store, then K more
    events simulated, then `verify --resume`, against a full run over the
    whole grown store (the same code).           target: resume <= 1/50 of full

    .venv/bin/python tools/bench_settlement.py [--rounds 2000] [--repeats 3]
        [--baseline 786f57a] [--resume-events 10000] [--store-dir DIR]
        [--own-stores] [--target 3]

With --own-stores each code verifies a store (and bundle) it simulated and
exported itself, the same simulation (seed, rounds, tables), its events/s
compared: for a baseline that cannot read what this code writes (a release
before a format change), and to ask "no slower than that release" (--target
0.97) rather than "3x as fast as 786f57a".
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench

NAME = "bench_settlement"
ROOT = Path(__file__).resolve().parent.parent
PASSPHRASE = os.environ.get("LEDGER_PASSPHRASE", "bench-settlement")  # a --store-dir's own
TARGET_SPEEDUP = 3.0
TARGET_RESUME = 1 / 50


def ledger(workdir: Path, *argv: str, code: Path = ROOT) -> tuple[float, float, str]:
    """(seconds, peak MB, stdout) of one `ledger` command run with `code`'s package."""
    # The code's own game plugins too: today's plugins may import what an older core lacks.
    path = [str(code), *(str(p.parent) for p in sorted(code.glob("plugins/*/pyproject.toml")))]
    env = dict(os.environ, LEDGER_PASSPHRASE=PASSPHRASE, PYTHONPATH=os.pathsep.join(path))
    command = [
        sys.executable,
        "-c",
        bench.LEDGER_WITH_PEAK,
        "--store",
        f"sqlite:///{workdir / 'ledger.db'}",
    ]
    command += ["--keys", str(workdir / "keys"), *argv]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    peak = bench.peak_kb(done.stdout)
    if done.returncode != 0 or peak is None:
        raise SystemExit(
            f"`ledger {' '.join(argv)}` ({code}) failed ({done.returncode}):\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    return seconds, peak / 1024, done.stdout


def events_in(stdout: str) -> int:
    line = next(line for line in stdout.splitlines() if line.startswith("OK"))
    return int(line.split(": ", 1)[1].split()[0])


def worktree(rev: str, where: Path) -> Path:
    """The baseline's code, checked out beside this one (its `ledger` package)."""
    path = where / f"baseline-{rev}"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(path), rev],
        check=True,
        capture_output=True,
    )
    return path


def simulate(workdir: Path, rounds: int, seed: int, code: Path = ROOT) -> None:
    ledger(
        workdir, "simulate", "--rounds", str(rounds), "--players", "60", "--tables", "4",
        "--card-tables", "2", "--seed", str(seed), code=code,
    )  # fmt: skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2000, help="simulated rounds (default 2000)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--baseline", default="786f57a", help="the earlier code (a git revision)")
    p.add_argument(
        "--resume-events",
        type=int,
        default=0,
        help="also measure --resume after about this many new events (0: skip)",
    )
    p.add_argument("--store-dir", help="a simulated store (ledger.db, keys/) to use; copied")
    p.add_argument("--parts", default="sur", help="which of s, u (with m) and r to run")
    p.add_argument("--no-files", action="store_true", help="write no results file")
    p.add_argument(
        "--own-stores",
        action="store_true",
        help="each code verifies the store it simulated itself (module doc)",
    )
    p.add_argument("--target", type=float, default=TARGET_SPEEDUP, help="this / baseline, events/s")
    args = p.parse_args()
    if args.own_stores and args.store_dir:
        p.error("--own-stores simulates a store with each code: not with --store-dir")
    print(bench.machine_line())
    comparisons: list[bench.Comparison] = []
    measures: list[bench.Measure] = []
    extra: dict[str, Any] = {}
    with bench.temp_dir() as scratch:
        base = worktree(args.baseline, scratch)
        try:
            work = scratch / "store"
            if args.store_dir:
                shutil.copytree(args.store_dir, work)
            else:
                work.mkdir()
                bench.note(f"simulating {args.rounds:,} rounds")
                simulate(work, args.rounds, seed=11)
            stores = {ROOT: work, base: work}  # the code -> the store it verifies
            if args.own_stores:
                stores[base] = scratch / "store-of-baseline"
                stores[base].mkdir()
                bench.note(f"simulating {args.rounds:,} rounds with {args.baseline}'s code")
                simulate(stores[base], args.rounds, seed=11, code=base)
            if "u" in args.parts:
                bench.note("exporting the whole-log bundle")
                ledger(work, "export", str(work / "bundle"))
                if args.own_stores:
                    where = stores[base]
                    ledger(where, "export", str(where / "bundle"), code=base)
            store = bench.Comparison(
                "sqlite", "(s) verify --level settlement, store", f"code of {args.baseline}",
                "this code", "events/s", args.target,
            )  # fmt: skip
            bundle = bench.Comparison(
                "sqlite", "(u) verify --level settlement, bundle", f"code of {args.baseline}",
                "this code", "events/s", args.target,
            )  # fmt: skip
            memory = bench.Measure("sqlite", "(m) peak RSS of verify, this code", "MB", None)
            memory_base = bench.Measure("sqlite", f"(m) peak RSS, {args.baseline}", "MB", None)
            verify = ("verify", "--level", "settlement")
            events = 0
            chosen = [(store, ()), (bundle, ("--bundle", "bundle"))]
            chosen = [c for c, part in zip(chosen, "su", strict=True) if part in args.parts]
            for run in range(args.repeats if chosen else 0):
                for comparison, extra_args in chosen:
                    order = [base, ROOT] if run % 2 == 0 else [ROOT, base]
                    timed: dict[Path, tuple[float, float, int]] = {}
                    for code in order:
                        seconds, peak, out = ledger(stores[code], *verify, *extra_args, code=code)
                        timed[code] = (seconds, peak, events_in(out))
                    events = timed[ROOT][2]
                    comparison.add(timed[base][2] / timed[base][0], timed[ROOT][2] / timed[ROOT][0])
                    memory.runs.append(timed[ROOT][1])
                    memory_base.runs.append(timed[base][1])
                    print(
                        f"run {run + 1}: {comparison.metric}: {args.baseline} "
                        f"{timed[base][0]:.1f} s, this {timed[ROOT][0]:.1f} s "
                        f"({timed[base][2]:,} and {events:,} events)",
                        flush=True,
                    )
            comparisons += [c for c, _ in chosen]
            if chosen:
                measures += [memory, memory_base]
            extra["events"] = events
            if args.resume_events and "r" in args.parts:
                extra["resume"] = resume(work, args)
                measures.append(extra["resume"]["measure"])
                extra["resume"]["measure"] = extra["resume"]["measure"].as_json()
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                capture_output=True,
            )
    if comparisons:
        print(bench.comparison_table(comparisons))
    print(bench.measure_table(measures))
    path = bench.write_results(NAME, args, comparisons, measures, extra)
    if path:
        print(f"results: {path.relative_to(ROOT)}")
    return 0


def resume(work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Full run with --save-state; about K new events; then resume against a full run."""
    state = work / "audit-state"
    ledger(work, "verify", "--save-state", str(state))
    before = json.loads((state / "state.json").read_text())["size"]
    rounds = max(1, args.resume_events // 47)  # a simulated round writes about 47 events
    simulate(work, rounds, seed=12)
    fractions, fulls, resumes, peaks = [], [], [], []
    for run in range(args.repeats):
        copy = work.parent / f"state-{run}"
        shutil.copytree(state, copy)  # each resume starts from the same state
        if run % 2 == 0:
            full_s, full_mb, out = ledger(work, "verify")
            resume_s, resume_mb, _ = ledger(work, "verify", "--resume", str(copy))
        else:
            resume_s, resume_mb, _ = ledger(work, "verify", "--resume", str(copy))
            full_s, full_mb, out = ledger(work, "verify")
        peaks.append((full_mb, resume_mb))
        shutil.rmtree(copy)
        fractions.append(resume_s / full_s)
        fulls.append(full_s)
        resumes.append(resume_s)
        print(
            f"run {run + 1}: full {full_s:.1f} s ({full_mb:.0f} MB), resume {resume_s:.1f} s "
            f"({resume_mb:.0f} MB) "
            f"({events_in(out) - before:,} new of {events_in(out):,} events)",
            flush=True,
        )
    measure = bench.Measure(
        "sqlite", "(r) resume / full run (fraction of the time)", "x", TARGET_RESUME
    )
    measure.runs = fractions
    return {
        "events_before": before,
        "events_after": events_in(out),
        "full_seconds": statistics.median(fulls),
        "resume_seconds": statistics.median(resumes),
        "peak_mb_full_and_resume": peaks,
        "measure": measure,
    }


if __name__ == "__main__":
    raise SystemExit(main())
