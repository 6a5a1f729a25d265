"""A live studio's betting window, driven by `wrk` against the default `ledger serve`.

One RNG Tài Xỉu round at a table with room for every bet, 500 funded wallets,
the node as a user starts it (`ledger serve`, its default settings; the keys
unencrypted, a benchmark's). The load comes from `wrk` (Debian's package, C,
not the bottleneck: 2 threads, 64 keep-alive connections), each request a new
bet with an `Idempotency-Key` of its own, for --seconds a run:

(g) the round growing: first, from an empty round, --slices consecutive
    runs of --slice-seconds of the table's single bets: the last slice's
    rate against the first's.                                 target >= 0.8x
(r) the table's own role: bets/s placed with the table's `table-device` token
    against an operator's, the two alternating run by run on the same server
    and round (the order swapped every other run).           target >= 0.9x
(s) the physical limit beside them: one core's bare Ed25519 signing rate,
    measured in the same run (PyNaCl's `crypto_sign` of a 300-byte message,
    as the ledger signs), and each role's bets/s as a ratio of it.
(l) each role's latency, p50 and p99 (wrk's own histogram).
(b) batches: --batch bets a request on POST /v1/rounds/{id}/bets/batch, each
    with its own request id, from the table's device over --batch-connections
    connections: bets/s, as a ratio of the signing rate, and a batch's p99.
(c) the cores the node kept busy meanwhile (the CPU time of `ledger serve`
    and every process below it, its writer and anchor processes included,
    over the run's time): whether a burst uses both cores.

Afterwards every acknowledged bet (wrk's 2xx answers) must be in the round's
log: the round holds at least as many bets as were acknowledged, and no more
than those plus the requests still in flight when wrk stopped.

    .venv/bin/python tools/bench_studio.py [--store sqlite|postgres|both]
        [--seconds 10] [--repeats 3] [--connections 64] [--batch 100]
        [--batch-connections 8] [--slices 10] [--slice-seconds 3]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench
from bench_burst import Setup
from load_http import Server, ledger

NAME = "bench_studio"
STAKE = 100
TARGET_ROLE = 0.9  # issue 38: table-device >= 0.9x the operator's rate
TARGET_GROWTH = 0.8  # issue 38: the last tenth's rate within 0.8x of the first's
SERVE_WORKERS = 1  # `ledger serve`'s default

# wrk's scripts: a new request id for every bet (run, thread, request, bet), the
# wallets taken in turn; done() prints one JSON line for this tool.
WRK_COMMON = """
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
function init(args)
  run, token, path = args[1], args[2], args[3]
  wallets = {}
  for w in string.gmatch(args[4], "[^,]+") do wallets[#wallets + 1] = w end
  n = 0
end
function wallet(k)
  return wallets[(k * 7 + tid) % #wallets + 1]
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRK {"requests":%d,"duration_us":%d,"non_2xx":%d,"socket_errors":%d,' ..
    '"p50_us":%d,"p99_us":%d,"max_us":%d}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""
# One bet a request, its Idempotency-Key its request id.
WRK_SINGLE = (
    WRK_COMMON
    + """
function request()
  n = n + 1
  local body = '{"account_id":"' .. wallet(n) .. '","bet":{"bet":"big"},"stake":STAKE}'
  return wrk.format("POST", path, {
    ["Authorization"] = "Bearer " .. token,
    ["Idempotency-Key"] = run .. "-" .. tid .. "-" .. n,
    ["Content-Type"] = "application/json",
  }, body)
end
"""
)
# BATCH bets a request (POST .../bets/batch), each with its own request id.
WRK_BATCH = (
    WRK_COMMON
    + """
function request()
  n = n + 1
  local bets = {}
  for k = 1, BATCH do
    bets[k] = '{"request_id":"' .. run .. "-" .. tid .. "-" .. n .. "-" .. k ..
      '","account_id":"' .. wallet(n * BATCH + k) .. '","bet":{"bet":"big"},"stake":STAKE}'
  end
  return wrk.format("POST", path, {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
  }, '{"bets":[' .. table.concat(bets, ",") .. ']}')
end
"""
)


def signing_rate(seconds: float = 1.0) -> float:
    """Signatures a second on one core: the ledger's Ed25519 (PyNaCl), 300 bytes."""
    import nacl.bindings

    _, secret = nacl.bindings.crypto_sign_seed_keypair(os.urandom(32))
    message = os.urandom(300)
    sign = nacl.bindings.crypto_sign
    count, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        for _ in range(200):
            sign(message, secret)
        count += 200
    return count / elapsed


def wrk_command(
    base: str,
    script: Path,
    path: str,
    token: str,
    wallets: list[str],
    seconds: float,
    conns: int,
    threads: int = 2,
) -> list[str]:
    """wrk's command line for one of this file's scripts (a run id of its own)."""
    run = uuid.uuid4().hex[:12]
    return [
        *("wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds:g}s", "--timeout", "30s"),
        *("-s", str(script), base, "--", run, token, path, ",".join(wallets)),
    ]


def wrk_figures(returncode: int, output: str) -> dict[str, Any]:
    """The figures a script's `done()` printed (bets/s added); any failure stops the run."""
    line = next((x for x in output.splitlines() if x.startswith("WRK ")), None)
    if returncode != 0 or line is None:
        raise SystemExit(f"wrk failed ({returncode}): {output}")
    figures: dict[str, Any] = json.loads(line[4:])
    if figures["non_2xx"] or figures["socket_errors"]:
        raise SystemExit(f"wrk saw failures: {figures}")
    figures["bets_per_s"] = figures["requests"] / (figures["duration_us"] / 1e6)
    return figures


def wrk(
    base: str, script: Path, path: str, token: str, wallets: list[str], seconds: float, conns: int
) -> dict[str, Any]:
    done = subprocess.run(
        wrk_command(base, script, path, token, wallets, seconds, conns),
        capture_output=True,
        text=True,
        timeout=seconds + 120,
    )
    return wrk_figures(done.returncode, done.stdout + done.stderr)


def node_cpu(server: Server) -> tuple[list[int], float]:
    """The server's processes (it, its workers, its writer and anchor
    processes) and the CPU-seconds they have used so far."""
    pids = bench.with_descendants([server.process.pid])
    return pids, sum(bench.cpu_seconds(p) for p in pids)


def with_cores(server: Server, run: Any) -> tuple[dict[str, Any], float]:
    """`run()`'s figures and the cores the node's processes kept busy meanwhile."""
    pids, before = node_cpu(server)
    started = time.monotonic()
    figures: dict[str, Any] = run()
    elapsed = time.monotonic() - started
    return figures, (sum(bench.cpu_seconds(p) for p in pids) - before) / elapsed


def placed_bets(workdir: Path, url: str, round_id: str) -> int:
    """The bets the round's log holds."""
    from ledger.casino import open_ledger

    opened = open_ledger(url, str(workdir / "keys"), writable=False)
    try:
        return len(opened.casino.round(round_id).bets)
    finally:
        opened.node.close()


def run_store(kind: str, args: Any, comparisons: list[bench.Comparison]) -> list[bench.Measure]:
    roles = bench.Comparison(
        kind, "bets/s on one round", "operator", "table-device", "bets/s", TARGET_ROLE
    )
    per_sign = {
        role: bench.Measure(kind, f"bets/s / one core's Ed25519 signing rate, {role}", "x", None)
        for role in ("operator", "table-device")
    }
    latency = {
        (role, p): bench.Measure(kind, f"{p} latency, {role}", "ms", None)
        for role in ("operator", "table-device")
        for p in ("p50", "p99")
    }
    growth = bench.Comparison(
        kind,
        "single bets/s as the round grows, table-device",
        "first slice",
        "last slice",
        "bets/s",
        TARGET_GROWTH,
    )
    signing = bench.Measure(kind, "Ed25519 signatures/s, one core", "1/s", None)
    batched = bench.Measure(kind, f"bets/s in batches of {args.batch}, table-device", "1/s", None)
    batched_per_sign = bench.Measure(
        kind, f"bets/s in batches of {args.batch} / one core's Ed25519 signing rate", "x", None
    )
    batch_p99 = bench.Measure(kind, f"p99 latency of a batch of {args.batch}", "ms", None)
    cores = {
        what: bench.Measure(kind, f"cores the node kept busy, {what}", "cores", None)
        for what in ("single bets, table-device", f"batches of {args.batch}")
    }
    with bench.temp_dir("ledger-studio-") as workdir, bench.fresh_store(kind, workdir) as url:
        bench.make_keys(workdir)
        tokens = {
            role: ledger(workdir, "tokens", "create", "--role", role).stdout.strip()
            for role in ("operator", "cashier")
        }
        server = Server(workdir, url, SERVE_WORKERS)
        acknowledged, in_flight = 0, 0
        try:
            bench.note(f"{kind}: setting up wallets, a table and a round")
            setup = Setup(server.base, tokens)
            made = ledger(
                workdir,
                *("--store", url, "tokens", "create", "--role", "table-device"),
                *("--table", setup.table),
            )
            if made.returncode != 0:
                raise SystemExit(f"no table-device token: {made.stderr}")
            tokens["table-device"] = made.stdout.strip()
            script = workdir / "bets.lua"
            script.write_text(WRK_SINGLE.replace("STAKE", str(STAKE)))
            path = f"/v1/rounds/{setup.round}/bets"
            # The round growing from empty: the table's bets in consecutive
            # slices; the last slice's rate against the first's.
            slices = []
            for index in range(args.slices):
                bench.note(f"{kind}: the round growing, slice {index + 1}/{args.slices}")
                slices.append(
                    wrk(
                        server.base,
                        script,
                        path,
                        tokens["table-device"],
                        setup.wallets,
                        args.slice_seconds,
                        args.connections,
                    )
                )
                acknowledged += slices[-1]["requests"]
                in_flight += args.connections
            growth.add(slices[0]["bets_per_s"], slices[-1]["bets_per_s"])
            growth.notes.append(
                "slices (bets/s): " + ", ".join(f"{x['bets_per_s']:.0f}" for x in slices)
            )
            print(
                "  the round growing: "
                + ", ".join(f"{x['bets_per_s']:,.0f}" for x in slices)
                + " bets/s",
                file=sys.stderr,
            )
            for repeat in range(args.repeats):
                order = ["operator", "table-device"]
                if repeat % 2:
                    order.reverse()
                found: dict[str, dict[str, Any]] = {}
                for role in order:
                    bench.note(f"{kind}: run {repeat + 1}/{args.repeats}, {role}")
                    found[role], busy = with_cores(
                        server,
                        lambda role=role: wrk(
                            server.base,
                            script,
                            path,
                            tokens[role],
                            setup.wallets,
                            args.seconds,
                            args.connections,
                        ),
                    )
                    if role == "table-device":
                        cores["single bets, table-device"].runs.append(busy)
                    acknowledged += found[role]["requests"]
                    in_flight += args.connections
                rate = signing_rate()
                signing.runs.append(rate)
                roles.add(found["operator"]["bets_per_s"], found["table-device"]["bets_per_s"])
                for role, figures in found.items():
                    per_sign[role].runs.append(figures["bets_per_s"] / rate)
                    latency[(role, "p50")].runs.append(figures["p50_us"] / 1000)
                    latency[(role, "p99")].runs.append(figures["p99_us"] / 1000)
                print(
                    f"  run {repeat + 1}: operator {found['operator']['bets_per_s']:,.0f}/s, "
                    f"table-device {found['table-device']['bets_per_s']:,.0f}/s, "
                    f"signing {rate:,.0f}/s",
                    file=sys.stderr,
                )
            batches = workdir / "batches.lua"
            batch_script = WRK_BATCH.replace("STAKE", str(STAKE)).replace("BATCH", str(args.batch))
            batches.write_text(batch_script)
            for repeat in range(args.repeats):
                bench.note(f"{kind}: batches of {args.batch}, run {repeat + 1}/{args.repeats}")
                figures, busy = with_cores(
                    server,
                    lambda: wrk(
                        server.base,
                        batches,
                        f"{path}/batch",
                        tokens["table-device"],
                        setup.wallets,
                        args.seconds,
                        args.batch_connections,
                    ),
                )
                cores[f"batches of {args.batch}"].runs.append(busy)
                acknowledged += figures["requests"] * args.batch
                in_flight += args.batch_connections * args.batch
                rate = signing_rate()
                signing.runs.append(rate)
                batched.runs.append(figures["bets_per_s"] * args.batch)
                batched_per_sign.runs.append(figures["bets_per_s"] * args.batch / rate)
                batch_p99.runs.append(figures["p99_us"] / 1000)
                print(
                    f"  batches: {figures['bets_per_s'] * args.batch:,.0f} bets/s, "
                    f"p99 of a batch {figures['p99_us'] / 1000:.0f} ms, signing {rate:,.0f}/s",
                    file=sys.stderr,
                )
        finally:
            server.stop()
        held = placed_bets(workdir, url, setup.round)
        if not acknowledged <= held <= acknowledged + in_flight:
            raise SystemExit(
                f"the round holds {held} bets, {acknowledged} were acknowledged "
                f"(and at most {in_flight} in flight at the ends of the runs)"
            )
        bench.note(f"{kind}: {acknowledged} acknowledged bets, the round holds {held}")
    comparisons.append(roles)
    comparisons.append(growth)
    return [
        signing,
        *per_sign.values(),
        *latency.values(),
        batched,
        batched_per_sign,
        batch_p99,
        *cores.values(),
    ]


def main() -> int:
    parser = bench.parser(__doc__.splitlines()[0], events=0, repeats=3, store="both")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--slices", type=int, default=10, help="slices of the growing round (default 10)"
    )
    parser.add_argument("--slice-seconds", type=float, default=3.0)
    parser.add_argument("--batch", type=int, default=100, help="bets a batch (default 100)")
    parser.add_argument(
        "--batch-connections", type=int, default=8, help="batches in flight (default 8)"
    )
    args = parser.parse_args()
    os.environ.setdefault("LEDGER_PROGRESS_INTERVAL", "off")
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk")
    print(bench.machine_line(), file=sys.stderr)
    comparisons: list[bench.Comparison] = []
    measures: list[bench.Measure] = []
    for kind in bench.stores(args.store):
        measures += run_store(kind, args, comparisons)
    print(bench.comparison_table(comparisons))
    print(bench.measure_table(measures))
    path = bench.write_results(NAME, args, comparisons, measures)
    if path:
        print(f"results: {path}")
    return 0 if all(c.met is not False for c in comparisons) else 1


if __name__ == "__main__":
    sys.exit(main())
