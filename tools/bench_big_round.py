"""A whole round at studio scale: closing and settling a 100,000-bet round, and verifying it.

For each store and each round size (a quarter, a half and all of --bets),
in a fresh store of its own:

- the default `ledger serve` (one worker, its default settings), wallets and
  an RNG Tài Xỉu table made over HTTP, one round filled with that many bets
  by the table's own role (`table-device`) in batches of 1,000;
- closing betting: one HTTP command (`POST .../close-betting`), timed;
- the draw that settles every bet: one HTTP command (`POST .../draw`),
  timed (target: <= 10 s at 100,000 bets);
- the server's peak memory (VmHWM) afterwards;
- `ledger verify --level settlement` of that store, timed, with its peak
  memory: time per bet should stay flat as the round grows (linear).

    .venv/bin/python tools/bench_big_round.py [--bets 100000] [--store both]
        [--repeats 1]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench
from bench_burst import Setup
from load_http import Server, ledger

NAME = "bench_big_round"
BATCH = 1_000  # bets a request (the batch operation's maximum)
SENDERS = 4  # batches in flight while filling the round
STAKE = 100
SETTLE_LIMIT_S = 10.0  # issue 38: a 100,000-bet round settled by one command in <= 10 s


def fill(base: str, token: str, round_id: str, wallets: list[str], bets: int) -> None:
    """`bets` bets on the round, BATCH a request, SENDERS requests in flight."""
    path = f"/v1/rounds/{round_id}/bets/batch"
    run = uuid.uuid4().hex[:8]
    names = ("big", "small")

    def send(first: int) -> int:
        body = {
            "bets": [
                {
                    "request_id": f"{run}-{n}",
                    "account_id": wallets[n % len(wallets)],
                    "bet": {"bet": names[n % 2]},
                    "stake": STAKE,
                }
                for n in range(first, min(first + BATCH, bets))
            ]
        }
        with httpx.Client(base_url=base, timeout=300) as http:
            response = http.post(path, json=body, headers={"Authorization": f"Bearer {token}"})
        if response.status_code != 200:
            raise SystemExit(f"a batch was refused: {response.status_code} {response.text[:300]}")
        refused = [b for b in response.json()["bets"] if b.get("error")]
        if refused:
            raise SystemExit(f"{len(refused)} bets refused, e.g. {refused[0]}")
        return len(body["bets"])

    with bench.progress("bets", bets) as advance, ThreadPoolExecutor(SENDERS) as pool:
        for sent in pool.map(send, range(0, bets, BATCH)):
            advance(sent)


def timed_post(base: str, token: str, path: str) -> float:
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": str(uuid.uuid4())}
    started = time.perf_counter()
    response = httpx.post(f"{base}{path}", headers=headers, timeout=600)
    took = time.perf_counter() - started
    if response.status_code not in (200, 201):
        raise SystemExit(f"{path}: {response.status_code} {response.text[:300]}")
    return took


def peak_of(pid: int) -> int:
    """VmHWM (kB) of a running process."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def verify_settlement(workdir: Path, url: str) -> tuple[float, int]:
    """`ledger verify --level settlement`: seconds, and its peak memory (kB)."""
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            bench.LEDGER_WITH_PEAK,
            *("--keys", str(workdir / "keys"), "--store", url),
            *("verify", "--level", "settlement"),
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"verify failed ({done.returncode}): {done.stdout[-500:]}{done.stderr}")
    peak = bench.peak_kb(done.stdout)
    assert peak is not None
    return took, peak


def one_round(kind: str, bets: int) -> dict[str, float]:
    """A fresh store with one round of `bets` bets, closed, drawn and verified."""
    with bench.temp_dir("ledger-big-round-") as workdir, bench.fresh_store(kind, workdir) as url:
        bench.make_keys(workdir)
        tokens = {
            role: ledger(workdir, "tokens", "create", "--role", role).stdout.strip()
            for role in ("operator", "cashier")
        }
        server = Server(workdir, url, 1)
        try:
            setup = Setup(server.base, tokens)
            made = ledger(
                workdir,
                *("--store", url, "tokens", "create", "--role", "table-device"),
                *("--table", setup.table),
            )
            if made.returncode != 0:
                raise SystemExit(f"no table-device token: {made.stderr}")
            device = made.stdout.strip()
            bench.note(f"{kind}: {bets:,} bets on one round")
            fill(server.base, device, setup.round, setup.wallets, bets)
            close_s = timed_post(server.base, device, f"/v1/rounds/{setup.round}/close-betting")
            draw_s = timed_post(server.base, device, f"/v1/rounds/{setup.round}/draw")
            serve_peak = peak_of(server.process.pid)
        finally:
            server.stop()
        bench.note(f"{kind}: verify --level settlement of {bets:,} bets")
        verify_s, verify_peak = verify_settlement(workdir, url)
    found = {
        "close_s": close_s,
        "draw_s": draw_s,
        "serve_peak_mb": serve_peak / 1024,
        "verify_s": verify_s,
        "verify_us_per_bet": verify_s / bets * 1e6,
        "verify_peak_mb": verify_peak / 1024,
    }
    print(
        f"  {kind} {bets:,} bets: close {close_s:.2f} s, draw (settles all) {draw_s:.2f} s, "
        f"serve peak {serve_peak / 1024:.0f} MB, verify {verify_s:.1f} s "
        f"({found['verify_us_per_bet']:.0f} µs a bet, peak {verify_peak / 1024:.0f} MB)",
        file=sys.stderr,
    )
    return found


def run_store(kind: str, args: Any) -> list[bench.Measure]:
    sizes = [args.bets // 4, args.bets // 2, args.bets]
    measures: dict[tuple[str, int], bench.Measure] = {}
    labels = {
        "close_s": ("close betting, one command", "s", None),
        "draw_s": ("the draw that settles every bet, one command", "s", SETTLE_LIMIT_S),
        "serve_peak_mb": ("ledger serve's peak memory", "MB", None),
        "verify_s": ("verify --level settlement", "s", None),
        "verify_us_per_bet": ("verify --level settlement per bet", "µs", None),
        "verify_peak_mb": ("verify's peak memory", "MB", None),
    }
    for size in sizes:
        for key, (what, unit, limit) in labels.items():
            measures[(key, size)] = bench.Measure(
                kind,
                f"{what}, {size:,} bets",
                unit,
                limit if size == args.bets else None,
                details={"key": key, "bets": size},
            )
    for repeat in range(args.repeats):
        for size in sizes:
            bench.note(f"{kind}: run {repeat + 1}/{args.repeats}, {size:,} bets")
            for key, value in one_round(kind, size).items():
                measures[(key, size)].runs.append(value)
    return list(measures.values())


def plot(measures: list[bench.Measure]) -> None:
    """How the costs grow with the round: seconds, and peak memory, against bets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (times, memory) = plt.subplots(1, 2, figsize=(10, 4))
    lines = {
        times: ("close_s", "draw_s", "verify_s"),
        memory: ("serve_peak_mb", "verify_peak_mb"),
    }
    names = {
        "close_s": "close betting",
        "draw_s": "draw + settle every bet",
        "verify_s": "verify --level settlement",
        "serve_peak_mb": "ledger serve",
        "verify_peak_mb": "verify",
    }
    for ax, keys in lines.items():
        for store in dict.fromkeys(m.store for m in measures):
            for key in keys:
                points = sorted(
                    (m.details["bets"], m.median)
                    for m in measures
                    if m.store == store and m.details.get("key") == key
                )
                style = "-" if store == "sqlite" else "--"
                ax.plot(
                    *zip(*points, strict=True), style, marker="o", label=f"{names[key]} ({store})"
                )
        ax.set_xlabel("bets on the round")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    times.axhline(SETTLE_LIMIT_S, color="red", linewidth=1, linestyle=":")
    times.set_ylabel("seconds (red: the settling command's limit)")
    memory.set_ylabel("peak memory, MB")
    fig.suptitle(f"{NAME}: {bench.cpu_model()}, {bench.cores()} cores", fontsize=9)
    fig.tight_layout()
    fig.savefig(bench.RESULTS / f"{NAME}.png", dpi=110)
    plt.close(fig)


def main() -> int:
    parser = bench.parser(__doc__.splitlines()[0], events=0, repeats=1, store="both")
    parser.add_argument("--bets", type=int, default=100_000, help="the largest round's bets")
    args = parser.parse_args()
    os.environ.setdefault("LEDGER_PROGRESS_INTERVAL", "off")
    print(bench.machine_line(), file=sys.stderr)
    measures: list[bench.Measure] = []
    for kind in bench.stores(args.store):
        measures += run_store(kind, args)
    print(bench.measure_table(measures))
    path = bench.write_results(NAME, args, [], measures)
    if path:
        plot(measures)
        print(f"results: {path}")
    return 0 if all(m.met is not False for m in measures) else 1


if __name__ == "__main__":
    sys.exit(main())
