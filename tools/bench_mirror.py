"""How far a mirror trails a busy node: `ledger serve` (SQLite, one worker,
anchoring as it does by default) under a steady load of N clients playing RNG
tai xiu rounds over HTTP (tools/load_http.py's clients), and `ledger mirror
--follow` copying it into a store of its own (SQLite or PostgreSQL), every
batch verified at level signatures before it is written.

Sampled every 0.1 s, in the same run:
- the mirror's lag in events: what the source holds minus what the mirror holds;
- its lag in seconds: how long ago the source first held as many events as
  the mirror holds now;
- the baseline, the source's own unanchored tail: what it holds minus its
  newest checkpoint's size (a mirror copies only what a checkpoint covers,
  so this is the least lag any mirror can have); and its age in seconds the
  same way.
Medians over the samples of each run, then over --repeats runs. At the end
the mirror catches up and must hold the source's log byte for byte.

    .venv/bin/python tools/bench_mirror.py [--store sqlite|postgres|both]
        [--clients 4] [--seconds 20] [--repeats 3]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _benchlib as bench
import load_http

SAMPLE = 0.1  # seconds between samples


class Reader:
    """A store held open for sampling (one connection, reopened per read on SQLite)."""

    def __init__(self, url: str) -> None:
        from ledger.crypto.keys import Keyring
        from ledger.store.application import LedgerApplication

        self.app = LedgerApplication(url, keyring=Keyring(), create=False)

    def counts(self) -> tuple[int, int]:
        tables = self.app.tables
        newest = tables.newest_checkpoint_row()
        size = int(newest[0]) if newest and type(newest[0]) is int else 0  # type: ignore[arg-type]
        return tables.event_count()[0], size

    def close(self) -> None:
        self.app.close()


def age(history: list[tuple[float, int]], count: int, now: float) -> float:
    """Seconds since the source first held `count` events (0 when it never held more)."""
    counts = [c for _, c in history]
    index = bisect.bisect_left(counts, count)
    if index >= len(history):
        return 0.0
    return now - history[index][0]


def run(kind: str, clients: int, seconds: float) -> dict[str, Any]:
    with (
        bench.temp_dir("ledger-mirror-") as workdir,
        bench.fresh_store("sqlite", workdir) as source_url,
        bench.fresh_store(kind, workdir) as mirror_url,
    ):
        bench.make_keys(workdir)
        tokens = {}
        for role in ("operator", "cashier", "auditor"):
            made = load_http.ledger(workdir, "tokens", "create", "--role", role)
            tokens[role] = made.stdout.strip()
        (workdir / "token").write_text(tokens["auditor"])
        server = load_http.Server(workdir, source_url, 1)
        follower: subprocess.Popen[str] | None = None
        try:
            wallets, tables = load_http.setup_http(server.base, tokens, clients)
            mirror_cmd = [
                sys.executable,
                "-m",
                "ledger.cli.main",
                "--keys",
                str(workdir / "mirror-keys"),
                "--store",
                mirror_url,
                "mirror",
                "--from",
                server.base,
                "--token-file",
                str(workdir / "token"),
                "--keyring",
                str(workdir / "keys" / "keyring.json"),
            ]
            log = open(workdir / "mirror.log", "w")  # noqa: SIM115
            follower = subprocess.Popen(
                [*mirror_cmd, "--follow", "--poll", "0.1"], stdout=log, stderr=subprocess.STDOUT
            )
            deadline = time.monotonic() + seconds
            threads = [
                load_http.Client(server.base, tokens, tables[n], wallets, deadline, n)
                for n in range(clients)
            ]
            source, mirror = Reader(source_url), None
            history: list[tuple[float, int]] = []
            samples: list[tuple[int, float, int, float]] = []
            started = time.perf_counter()
            first_events = source.counts()[0]
            for thread in threads:
                thread.start()
            next_note = time.monotonic() + 5
            while any(t.is_alive() for t in threads):
                now = time.perf_counter()
                events, anchored = source.counts()
                if not history or events > history[-1][1]:
                    history.append((now, events))
                if mirror is None:
                    try:
                        mirror = Reader(mirror_url)
                    except Exception:  # not made yet by the mirror's first pass
                        mirror = None
                if mirror is not None:
                    copied = mirror.counts()[0]
                    samples.append(
                        (
                            events - copied,
                            age(history, copied + 1, now) if copied < events else 0.0,
                            events - anchored,
                            age(history, anchored + 1, now) if anchored < events else 0.0,
                        )
                    )
                if time.monotonic() > next_note:
                    lag = samples[-1][0] if samples else "?"
                    print(f"  {kind}: source {events} events, mirror lag {lag}", file=sys.stderr)
                    next_note = time.monotonic() + 5
                time.sleep(SAMPLE)
            elapsed = time.perf_counter() - started
            errors = [t.error for t in threads if t.error]
            if errors:
                raise SystemExit(f"a client failed: {errors[0]} (see {workdir})")
            written = source.counts()[0] - first_events
            source.close()
            if mirror is not None:
                mirror.close()
            follower.send_signal(signal.SIGINT)  # it stops after the batch it is in
            if follower.wait(timeout=120) != 130:
                raise SystemExit(f"the follower ended with {follower.returncode} (see {workdir})")
            log.close()
            # Everything checkpointed, then one pass: the mirror holds the source's log.
            checkpoint_all(workdir, source_url)
            caught = subprocess.run(mirror_cmd, capture_output=True, text=True, timeout=600)
            if caught.returncode != 0:
                raise SystemExit(f"the mirror's last pass failed: {caught.stderr}")
        finally:
            if follower is not None and follower.poll() is None:
                follower.kill()
            server.stop()
        same = rows(source_url) == rows(mirror_url)
        if not same:
            raise SystemExit("the mirror does not hold the source's log byte for byte")
        if not samples:
            raise SystemExit("no samples: the mirror never opened its store")
        return {
            "source_events_per_s": written / elapsed,
            "samples": len(samples),
            "lag_events": statistics.median(s[0] for s in samples),
            "lag_seconds": statistics.median(s[1] for s in samples),
            "anchor_lag_events": statistics.median(s[2] for s in samples),
            "anchor_lag_seconds": statistics.median(s[3] for s in samples),
            "lag_events_p90": sorted(s[0] for s in samples)[int(len(samples) * 0.9)],
            "identical": same,
        }


def checkpoint_all(workdir: Path, url: str) -> None:
    """Sign a checkpoint over every event of the source (its keys are unencrypted:
    `ledger checkpoint` would ask for a passphrase, and the check after it then
    compared a log its newest checkpoint did not cover, as if the mirror had failed)."""
    from ledger.audit.proofs import newest_checkpoint
    from ledger.node import open_node

    node = open_node(url, str(workdir / "keys"), writable=False)
    try:
        node.checkpointer().catch_up()
        events, _ = node.app.tables.event_count()
        newest = newest_checkpoint(node.app, node.keyring)
        if newest is None or newest.size != events:
            raise SystemExit(f"no checkpoint covers the source's {events} events")
    finally:
        node.close()


def rows(url: str) -> list[tuple[object, ...]]:
    from ledger.crypto.keys import Keyring
    from ledger.store.application import LedgerApplication
    from ledger.store.merkle_log import stream_of

    app = LedgerApplication(url, keyring=Keyring(), create=False)
    try:
        found, after = [], 0
        while batch := app.tables.rows_after(after, 5000):
            found += [(stream_of(r[1]), r[2], r[3], bytes(r[4])) for r in batch]
            after = batch[-1][0]
        return found
    finally:
        app.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("LEDGER_PROGRESS_INTERVAL", "off")
    report: dict[str, Any] = {
        "script": "tools/bench_mirror.py",
        "machine": bench.machine_line(),
        "load_average_at_start": os.getloadavg(),
        "clients": args.clients,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "stores": {},
    }
    for kind in bench.stores(args.store):
        runs = []
        for repeat in range(args.repeats):
            print(f"mirror store {kind}: run {repeat + 1}/{args.repeats}", file=sys.stderr)
            runs.append(run(kind, args.clients, args.seconds))
        figures = {
            key: statistics.median(r[key] for r in runs)
            for key in (
                "source_events_per_s",
                "lag_events",
                "lag_seconds",
                "anchor_lag_events",
                "anchor_lag_seconds",
            )
        }
        report["stores"][kind] = {"median": figures, "runs": runs}
        print(
            f"\nmirror store {kind}: source writing {figures['source_events_per_s']:.0f} "
            f"events/s; mirror lag median {figures['lag_events']:.0f} events, "
            f"{figures['lag_seconds']:.2f} s; the source's own unanchored tail (baseline) "
            f"{figures['anchor_lag_events']:.0f} events, {figures['anchor_lag_seconds']:.2f} s"
        )
        for r in runs:
            print(
                f"  run: {r['source_events_per_s']:.0f} events/s, lag {r['lag_events']:.0f} "
                f"events / {r['lag_seconds']:.2f} s (anchor {r['anchor_lag_events']:.0f} / "
                f"{r['anchor_lag_seconds']:.2f} s), {r['samples']} samples, identical"
            )
    report["load_average_at_end"] = os.getloadavg()
    bench.RESULTS.mkdir(exist_ok=True)
    path = bench.RESULTS / "bench_mirror.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {path}; load average {report['load_average_at_end']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
