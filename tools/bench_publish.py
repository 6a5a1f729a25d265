"""Benchmark: `ledger publish` to NATS JetStream against `ledger export` of the
same store, and the publisher's lag behind a log that grows under a burst.

Issue 41 asks for publishing at >= 0.5x the export's events/s, and the lag
under a burst stated. Both commands only read the store, so each pair runs on
the store given, in child processes of the installed CLI, the order
alternating pair by pair; each publish goes to a stream of its own on the
broker (deleted after), so it publishes the whole log.

The lag: `ledger publish --follow` beside `ledger simulate` writing into a
small SQLite store as fast as it can (the burst); every 0.1 s the log's size
and the stream's last message are read, and the lag is their difference. Reported: the
burst's events/s, the largest lag (events) and its median, and how long
after the burst's last event the stream holds it.

    .venv/bin/python tools/bench_publish.py --store sqlite:////path/ledger.db --keys DIR [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_export import Run, count_events, run_ledger, save_summary

TOOLS = Path(__file__).resolve().parent
LEDGER = Path(sys.executable).parent / "ledger"


def _stream_last(url: str, stream: str) -> int:
    """The stream's message count (0 when it is not there yet)."""

    async def look() -> int:
        import nats

        client = await nats.connect(url)
        try:
            return int((await client.jetstream().stream_info(stream)).state.messages)
        except Exception:
            return 0
        finally:
            await client.close()

    return asyncio.run(look())


def _delete(url: str, stream: str) -> None:
    async def delete() -> None:
        import nats

        client = await nats.connect(url)
        try:
            await client.jetstream().delete_stream(stream)
        except Exception:
            pass
        finally:
            await client.close()

    asyncio.run(delete())


def _publish(store: str, keys: str, url: str, events: int) -> Run:
    stream = f"BENCH{uuid.uuid4().hex[:8].upper()}"
    argv = ["--store", store, "--keys", keys, "publish", "--to", url, "--stream", stream]
    try:
        return run_ledger("publish", [*argv, "--prefix", stream.lower()], events)
    finally:
        _delete(url, stream)


def _export(store: str, keys: str, scratch: Path, events: int) -> Run:
    shutil.rmtree(scratch / "bundle", ignore_errors=True)
    return run_ledger(
        "export", ["--store", store, "--keys", keys, "export", str(scratch / "bundle")], events
    )


def _lag(url: str, scratch: Path, rounds: int) -> dict[str, Any]:
    """The follower's lag while `ledger simulate` writes a burst (module doc)."""
    env = os.environ | {"LEDGER_PROGRESS_INTERVAL": "off"}
    store_path = scratch / "lag.db"
    base = [str(LEDGER), "--store", f"sqlite:///{store_path}", "--keys", str(scratch / "lag-keys")]
    subprocess.run([*base, "simulate", "--rounds", "1"], env=env, check=True, capture_output=True)
    stream = f"LAG{uuid.uuid4().hex[:8].upper()}"
    follower = subprocess.Popen(
        [*base, "publish", "--to", url, "--stream", stream, "--prefix", stream.lower(), "--follow"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    db = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)

    def size() -> int:
        return int(db.execute("SELECT COUNT(*) FROM stored_events").fetchone()[0])

    try:
        while _stream_last(url, stream) < size():
            time.sleep(0.1)
        before = size()
        writer = subprocess.Popen(
            [*base, "simulate", "--rounds", str(rounds), "--players", "60"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        started = time.monotonic()
        samples: list[tuple[float, int, int]] = []  # (seconds, log size, stream's messages)
        while True:
            logged, streamed = size(), _stream_last(url, stream)
            samples.append((time.monotonic() - started, logged, streamed))
            if writer.poll() is not None and streamed >= size():
                break
            time.sleep(0.1)
        final = samples[-1][1]
        logged_at = next(t for t, logged, _ in samples if logged >= final)
        streamed_at = next(t for t, _, streamed in samples if streamed >= final)
        lags = [logged - streamed for t, logged, streamed in samples if t <= logged_at]
        return {
            "burst_events": final - before,
            "burst_events_per_s": (final - before) / max(logged_at, 1e-9),
            "lag_max_events": max(lags),
            "lag_median_events": statistics.median(lags),
            "on_the_stream_after_the_last_event_s": max(streamed_at - logged_at, 0.0),
        }
    finally:
        follower.terminate()
        follower.wait()
        _delete(url, stream)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="a store URL (only read)")
    parser.add_argument("--keys", required=True)
    parser.add_argument("--url", default="nats://127.0.0.1:4222")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--burst-rounds", type=int, default=60)
    parser.add_argument("--name", default="bench_publish", help="tools/results/NAME.json")
    args = parser.parse_args()
    events = count_events(args.store, args.keys)
    print(f"store: {events} events; {args.runs} pairs", flush=True)
    exports: list[Run] = []
    publishes: list[Run] = []
    scratch = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    try:
        for number in range(args.runs):
            if number % 2 == 0:
                exports.append(_export(args.store, args.keys, scratch, events))
                publishes.append(_publish(args.store, args.keys, args.url, events))
            else:
                publishes.append(_publish(args.store, args.keys, args.url, events))
                exports.append(_export(args.store, args.keys, scratch, events))
        lag = _lag(args.url, scratch, args.burst_rounds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ratios = [p.rate / e.rate for p, e in zip(publishes, exports, strict=True)]
    summary: dict[str, Any] = {
        "events": events,
        "export_events_per_s": statistics.median(r.rate for r in exports),
        "publish_events_per_s": statistics.median(r.rate for r in publishes),
        "publish_over_export_rate": statistics.median(ratios),
        "ratios": ratios,
        "publish_peak_rss_mb": max(r.peak_rss_mb for r in publishes),
        "lag": lag,
        "runs": [
            {"export": vars(e), "publish": vars(p)} for e, p in zip(exports, publishes, strict=True)
        ],
        "machine": f"{os.cpu_count()} cores",
    }
    save_summary(args.name, summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
