"""Nodes that add capacity: CPU-seconds a bet, 1 and 2 nodes writing one round on PostgreSQL.

Each run starts N nodes (`ledger serve`, default settings, the background
anchor off: `ledger checkpoint --follow` checkpoints from a process of its
own, as docs/http.md says to run several writers) on one PostgreSQL store
with one keys directory, fills one round with batches of --batch bets from
the table's own role (`wrk`, --connections connections spread over the
nodes), and counts the CPU time the nodes, the checkpointer and every
PostgreSQL process used meanwhile (/proc: user + system, children reaped by
the postmaster included). The cost is CPU-seconds a bet acknowledged; the
target (issue 38) is <= 1.15x with 2 nodes against 1. Runs alternate the
order; medians of --repeats. Every acknowledged bet must be in the round.

    .venv/bin/python tools/bench_nodes.py [--repeats 3] [--seconds 10]
        [--batch 100] [--connections 8]
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench
from _benchlib import cpu_seconds, with_descendants
from bench_burst import Setup
from bench_studio import STAKE, WRK_BATCH, placed_bets, wrk_command, wrk_figures
from load_http import Server, ledger

NAME = "bench_nodes"
TARGET = 1.15  # CPU-seconds a bet, 2 nodes / 1 node, at most (held as 1 node / 2 >= 1/1.15)


def postgres_cpu() -> float:
    """Every process of the PostgreSQL server user, the postmaster's reaped
    backends included."""
    uid = pwd.getpwnam("postgres").pw_uid
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            owner = entry.stat().st_uid
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        if owner == uid:
            total += cpu_seconds(int(entry.name), children=parent == 1)
    return total


KINDS = ("http", "writer", "checkpointer", "postgres")


def process_kind(pid: int, checkpointer: int) -> str:
    """What a node's process does, for the breakdown of a bet's CPU."""
    if pid == checkpointer:
        return "checkpointer"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return "http"
    return "writer" if b"writer_process" in command else "http"


def wrk_batches(
    base: str, script: Path, path: str, token: str, wallets: list[str], args: Any, conns: int
) -> subprocess.Popen[str]:
    """wrk against one node, running while the others' run."""
    return subprocess.Popen(
        wrk_command(base, script, path, token, wallets, args.seconds, conns, threads=1),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def one_run(nodes: int, args: Any) -> dict[str, float]:
    with bench.temp_dir("ledger-nodes-") as workdir, bench.fresh_store("postgres", workdir) as url:
        bench.make_keys(workdir)
        tokens = {
            role: ledger(workdir, "tokens", "create", "--role", role).stdout.strip()
            for role in ("operator", "cashier")
        }
        os.environ["LEDGER_SERVE_ANCHOR"] = "0"  # the checkpointer below anchors
        servers = [Server(workdir, url, 1) for _ in range(nodes)]
        follower = subprocess.Popen(
            [sys.executable, "-m", "ledger.cli.main", "--keys", str(workdir / "keys"),
             "--store", url, "checkpoint", "--follow"],
            cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            setup = Setup(servers[0].base, tokens)
            made = ledger(
                workdir,
                *("--store", url, "tokens", "create", "--role", "table-device"),
                *("--table", setup.table),
            )
            if made.returncode != 0:
                raise SystemExit(f"no table-device token: {made.stderr}")
            device = made.stdout.strip()
            script = workdir / "batches.lua"
            script.write_text(
                WRK_BATCH.replace("STAKE", str(STAKE)).replace("BATCH", str(args.batch))
            )
            path = f"/v1/rounds/{setup.round}/bets/batch"
            # Each node with its writer process (`ledger serve` places bets there).
            pids = [*with_descendants([s.process.pid for s in servers]), follower.pid]
            kinds = {p: process_kind(p, follower.pid) for p in pids}
            before_each = {p: cpu_seconds(p) for p in pids}
            before_pg = postgres_cpu()
            before = sum(before_each.values()) + before_pg
            started = time.monotonic()
            loads = [
                wrk_batches(
                    s.base, script, path, device, setup.wallets, args, args.connections // nodes
                )
                for s in servers
            ]
            outputs = [load.communicate()[0] for load in loads]
            results = [
                wrk_figures(load.returncode, out) for load, out in zip(loads, outputs, strict=True)
            ]
            elapsed = time.monotonic() - started
            after_each = {p: cpu_seconds(p) for p in pids}
            after_pg = postgres_cpu()
            after = sum(after_each.values()) + after_pg
        finally:
            for server in servers:
                server.stop()
            follower.terminate()
            follower.wait()
        acknowledged = sum(r["requests"] for r in results) * args.batch
        held = placed_bets(workdir, url, setup.round)
        in_flight = args.connections * args.batch
        if not acknowledged <= held <= acknowledged + in_flight:
            raise SystemExit(f"{acknowledged} bets acknowledged, the round holds {held}")
    shares = {kind: 0.0 for kind in KINDS}
    for pid, kind in kinds.items():
        shares[kind] += after_each[pid] - before_each[pid]
    shares["postgres"] = after_pg - before_pg
    return {
        **{f"us_{kind}": used / acknowledged * 1e6 for kind, used in shares.items()},
        "bets_per_s": acknowledged / elapsed,
        "cpu_s": after - before,
        "cpu_us_per_bet": (after - before) / acknowledged * 1e6,
        "cores_busy": (after - before) / elapsed,
    }


def main() -> int:
    parser = bench.parser(__doc__.splitlines()[0], events=0, repeats=3, store="postgres")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("LEDGER_PROGRESS_INTERVAL", "off")
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")
    print(bench.machine_line(), file=sys.stderr)
    # Lower is better: held as 1 node's cost / 2 nodes' >= 1/1.15.
    cost = bench.Comparison(
        "postgres", "CPU µs a bet (nodes + PostgreSQL), 1 node / 2 nodes", "2 nodes",
        "1 node", "µs", round(1 / TARGET, 3),
    )  # fmt: skip
    rate = {n: bench.Measure("postgres", f"bets/s, {n} node(s)", "1/s", None) for n in (1, 2)}
    busy = {n: bench.Measure("postgres", f"cores busy, {n} node(s)", "cores", None) for n in (1, 2)}
    for repeat in range(args.repeats):
        order = (1, 2) if repeat % 2 == 0 else (2, 1)
        found: dict[int, dict[str, float]] = {}
        for nodes in order:
            bench.note(f"run {repeat + 1}/{args.repeats}: {nodes} node(s)")
            found[nodes] = one_run(nodes, args)
            rate[nodes].runs.append(found[nodes]["bets_per_s"])
            busy[nodes].runs.append(found[nodes]["cores_busy"])
            print(
                f"  {nodes} node(s): {found[nodes]['bets_per_s']:,.0f} bets/s, "
                f"{found[nodes]['cpu_us_per_bet']:,.0f} µs CPU a bet, "
                f"{found[nodes]['cores_busy']:.2f} cores busy ("
                + ", ".join(f"{k} {found[nodes]['us_' + k]:,.0f}" for k in KINDS)
                + " µs)",
                file=sys.stderr,
            )
        cost.add(found[2]["cpu_us_per_bet"], found[1]["cpu_us_per_bet"])
    print(bench.comparison_table([cost]))
    measures = [*rate.values(), *busy.values()]
    print(bench.measure_table(measures))
    path = bench.write_results(NAME, args, [cost], measures)
    if path:
        print(f"results: {path}")
    return 0 if cost.met is not False else 1


if __name__ == "__main__":
    sys.exit(main())
