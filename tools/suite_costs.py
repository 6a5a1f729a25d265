#!/usr/bin/env python3
"""What each test of the suite costs: run the whole suite as the README's test
command runs it, and list the slowest tests and files with their CPU.

    .venv/bin/python tools/suite_costs.py [--top 20] [--out FILE] [-- PYTEST ARGS]

Each test's wall time (set-up, call and tear-down) is pytest's; its CPU is
its worker's own (`getrusage(RUSAGE_SELF)`, every thread of the worker) and
that of the processes it started and reaped (`RUSAGE_CHILDREN`: a server's
side processes count when the server reaps them). What this cannot see: the
PostgreSQL server's backends, and a process a test leaves running. The suite
runs with its own settings (three workers on two cores): a test's wall time
includes its waits for a core, so read the CPU beside it.

The same file is the pytest plugin that measures (`-p suite_costs`, with this
directory on PYTHONPATH, which the command sets for the workers). The rows
go to --out (JSON lines, one a test; docs/operations.md's table is made from
them), the lists to standard output.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROWS_ENV = "SUITE_COSTS_ROWS"  # the directory each worker writes its rows to


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


# The plugin (imported by pytest in every worker when run by main() below).
try:
    import pytest
except ImportError:  # (the command itself runs without pytest imported)
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(item: Any, nextitem: Any) -> Generator[None, object, object]:
        directory = os.environ.get(ROWS_ENV)
        started = (time.perf_counter(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN))
        result = yield
        if not directory:
            return result
        wall, own, children = started
        row = {
            "test": item.nodeid,
            "wall": round(time.perf_counter() - wall, 3),
            "cpu_own": round(_cpu(resource.RUSAGE_SELF) - own, 3),
            "cpu_children": round(_cpu(resource.RUSAGE_CHILDREN) - children, 3),
        }
        with open(Path(directory) / f"{os.getpid()}.jsonl", "a") as out:
            out.write(json.dumps(row) + "\n")
        return result


def read_rows(directory: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(directory.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


def report(rows: list[dict[str, Any]], top: int) -> str:
    def cpu(row: dict[str, Any]) -> float:
        return float(row["cpu_own"]) + float(row["cpu_children"])

    lines = [
        f"{len(rows)} tests; their CPU {sum(map(cpu, rows)):.0f} s (workers and reaped children)"
    ]
    lines.append(f"\nThe slowest {top} tests (wall s, CPU s: the worker's + its children's):")
    for row in sorted(rows, key=lambda r: -float(r["wall"]))[:top]:
        lines.append(
            f"{row['wall']:7.1f} {cpu(row):6.1f} ({row['cpu_own']:.1f} + {row['cpu_children']:.1f})"
            f"  {row['test']}"
        )
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for row in rows:
        total = files[row["test"].split("::")[0]]
        total[0] += float(row["wall"])
        total[1] += cpu(row)
        total[2] += 1
    lines.append(f"\nThe {top} files of most CPU (wall s summed over their tests, CPU s, tests):")
    for name, (wall, spent, count) in sorted(files.items(), key=lambda f: -f[1][1])[:top]:
        lines.append(f"{wall:7.1f} {spent:6.1f} {int(count):5d}  {name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=20, help="how many tests and files to list")
    parser.add_argument("--out", type=Path, help="keep every test's row here (JSON lines)")
    parser.add_argument("pytest_args", nargs="*", help="after --: more arguments for pytest")
    args = parser.parse_args(argv)
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        print("no .venv: run `python3 tools/bootstrap.py setup` first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="suite-costs-") as directory:
        env = dict(os.environ, CI=os.environ.get("CI", "true"), **{ROWS_ENV: directory})
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "tools"), env.get("PYTHONPATH")])
        )
        command = [str(python), "-m", "pytest", "-q", "-p", "suite_costs", *args.pytest_args]
        print("suite_costs: running", " ".join(command[1:]), file=sys.stderr, flush=True)
        started = time.perf_counter()
        code = subprocess.run(command, cwd=ROOT, env=env).returncode  # pytest shows its progress
        rows = read_rows(Path(directory))
    print(f"\nsuite_costs: pytest exited {code} after {time.perf_counter() - started:.0f} s")
    if args.out:
        args.out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    print(report(rows, args.top))
    return code


if __name__ == "__main__":
    sys.exit(main())
