"""Verification throughput and memory of `verify_store` against bare baselines.

One store of N sealed events (one Table stream per 10 events) is built once,
checkpointed by the Checkpointer (a signed checkpoint per 1,000 events), and
reused by every run. Each run measures the subject between two measures of
its baseline (before and after; the baseline is their mean), so that the
shared host's speed, which drifts by tens of percent over minutes, moves both
alike:

(b) verify_store(level=SIGNATURES, workers=cores) events/s
    vs a bare loop verifying the same Ed25519 signatures on one core
    (public key, ENVELOPE_DOMAIN + header, signature extracted beforehand),
    times the number of cores.                                 target >= 0.9x
(b') the same, against the bare loop run at once in `cores` processes (each
    on its share of the chunks): what the cores deliver together on a shared
    machine, where they may not scale to `cores` x one core.
(b1) verify_store(level=SIGNATURES, workers=1) vs the bare loop on one core:
    the ledger's own overhead, free of how well this machine's cores scale.
(c) verify_store(level=INTEGRITY, workers=cores) events/s
    vs the store's raw read rate: MerkleLogTables.rows_between over the same
    chunk ranges verify_store plans, in one process, rows not decoded.
                                                               target >= 0.8x
(c1) verify_store(level=INTEGRITY, workers=1) vs the same raw read.
(d) peak memory of `ledger verify --level signatures --workers cores` run in
    a subprocess: the sum of every process's own RSS high-water mark (VmHWM:
    main + workers + multiprocessing's helper), and the process tree's summed
    RSS sampled every 20 ms; the larger is judged.          target < 300 MB at 1,000,000 events

    .venv/bin/python tools/bench_verify.py [--store sqlite|postgres|both]
        [--events 200000] [--repeats 3] [--parts bcd]
    .venv/bin/python tools/bench_verify.py --events 1000000 --repeats 1
        (--store defaults to sqlite from 1,000,000 events on, else both)
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench

NAME = "bench_verify"
TARGET_SIGNATURES = 0.9  # issue 18: >= 0.9x the bare loop on every core
TARGET_INTEGRITY = 0.8  # issue 18: >= 0.8x a raw read of the same rows
MEMORY_LIMIT_MB = 300.0
SAVE_EVENTS = 1000  # events per save while building (100 streams of 10)

# --- building the store ----------------------------------------------------


def build(url: str, keys: bench.Keys, n: int, per_stream: int) -> dict[str, float]:
    """Seal n events into the empty store at `url` and checkpoint them all."""
    from ledger.crypto.envelope import SignerCheck
    from ledger.store.application import LedgerApplication
    from ledger.store.checkpointer import Checkpointer

    app = LedgerApplication(url, keyring=keys.keyring, signer=keys.node_signer)
    try:
        started = time.perf_counter()
        made = 0
        seed = 0
        with bench.progress("sealing", n) as advance:
            while made < n:
                size = min(SAVE_EVENTS, n - made)
                seed += 1
                batches = bench.table_batches(size, per_stream, seed=seed)
                app.save(*[event for batch in batches for event in batch])
                made += size
                advance(size)
        sealed = time.perf_counter() - started
        checkpointer = Checkpointer(
            app.tables,
            signer=keys.checkpoint_signer,
            signer_check=SignerCheck(keys.keyring),
            keyring=keys.keyring,
            batch_size=1000,
        )
        started = time.perf_counter()
        with bench.progress("checkpointing", n) as advance:
            checkpoint = checkpointer.catch_up(progress=advance)
        checkpointed = time.perf_counter() - started
        count, _ = app.tables.event_count()
        if count != n or checkpoint is None or checkpoint.size != n:
            raise SystemExit(f"built {count} events, checkpoint {checkpoint}: expected {n}")
    finally:
        app.close()
    return {"seal_seconds": sealed, "checkpoint_seconds": checkpointed}


# --- the measurements ------------------------------------------------------


def open_app(url: str, keys: bench.Keys) -> Any:
    from ledger.store.application import LedgerApplication

    return LedgerApplication(url, keyring=keys.keyring)


def verify_rate(url: str, keys: bench.Keys, level: Any, n: int, workers: int) -> float:
    from ledger.audit.verify import Sinks, VerifyOptions, verify_store

    app = open_app(url, keys)
    try:
        gc.collect()
        with bench.progress(f"verify {level.value}", n) as advance:
            started = time.perf_counter()
            report = verify_store(
                app,
                keys.keyring,
                VerifyOptions(level=level, workers=workers, games=_games(level)),
                sinks=Sinks(progress=advance),
            )
            elapsed = time.perf_counter() - started
    finally:
        app.close()
    if report.events != n:
        raise SystemExit(f"verify saw {report.events} events, expected {n}")
    if report.workers != workers:
        bench.note(f"verify used {report.workers} of {workers} workers ({n:,} events)")
    return n / elapsed


def chunk_ranges(url: str, keys: bench.Keys) -> list[tuple[int, int]]:
    """The (after_id, last_id) ranges verify_store plans, for the raw read."""
    from ledger.audit.log.chunks import CHUNK_LEAVES
    from ledger.audit.verify import Level, plan_chunks

    app = open_app(url, keys)
    try:
        sizes = sorted(c.size for c in app.tables.checkpoints())
        _, specs = plan_chunks(app, sizes, Level.INTEGRITY, CHUNK_LEAVES)
    finally:
        app.close()
    return [(s.after_id, s.last_id) for s in specs]


def raw_read_rate(url: str, keys: bench.Keys, ranges: list[tuple[int, int]], n: int) -> float:
    app = open_app(url, keys)
    try:
        rows_between = app.tables.rows_between
        gc.collect()
        read = 0
        with bench.progress("raw read", n) as advance:
            started = time.perf_counter()
            for after_id, last_id in ranges:
                rows = rows_between(after_id, last_id)
                read += len(rows)
                advance(len(rows))
            elapsed = time.perf_counter() - started
    finally:
        app.close()
    if read != n:
        raise SystemExit(f"raw read returned {read} rows, expected {n}")
    return n / elapsed


def signature_triples(
    url: str, keys: bench.Keys, ranges: list[tuple[int, int]]
) -> list[tuple[bytes, bytes, bytes]]:
    """(public key, signed message, signature) of every stored event."""
    from ledger.crypto.envelope import SignerCheck, open_envelope
    from ledger.store.merkle_log import stream_of

    check = SignerCheck(keys.keyring)
    app = open_app(url, keys)
    triples = []
    try:
        for after_id, last_id in ranges:
            for _, originator_id, version, _, state in app.tables.rows_between(after_id, last_id):
                stream = stream_of(originator_id)
                envelope = open_envelope(bytes(state), stream=stream, version=version)
                public = check.check_signer(envelope, stream=stream, version=version)
                triples.append((public, envelope.signed_message, envelope.signature))
    finally:
        app.close()
    return triples


def bare_verify_rate(triples: list[tuple[bytes, bytes, bytes]], workers: int) -> float:
    """One core's rate of libsodium verifies, as ledger.crypto.signing calls it, x cores."""
    from nacl.bindings import crypto_sign_open

    gc.collect()
    with bench.progress("bare Ed25519 loop", len(triples)) as advance:
        started = time.perf_counter()
        for public, message, signature in triples:
            crypto_sign_open(signature + message, public)
        elapsed = time.perf_counter() - started
        advance(len(triples))
    return len(triples) / elapsed * workers


def _bare_worker(
    url: str, keyring_json: str, ranges: list[tuple[int, int]], barrier: Any, results: Any
) -> None:
    from nacl.bindings import crypto_sign_open

    from ledger.crypto.keys import Keyring

    keys = bench.Keys(Path(), Keyring.from_json(keyring_json), None, None)
    triples = signature_triples(url, keys, ranges)
    gc.collect()
    barrier.wait()
    started = time.perf_counter()
    for public, message, signature in triples:
        crypto_sign_open(signature + message, public)
    results.put((len(triples), time.perf_counter() - started))


def parallel_bare_rate(
    url: str, keys: bench.Keys, ranges: list[tuple[int, int]], workers: int
) -> float:
    """The same bare loop run at once in `workers` processes over a split of the chunks:
    what this machine's cores really deliver together (no ideal-scaling assumption)."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers)
    results = context.Queue()
    shares = [ranges[i::workers] for i in range(workers)]
    processes = [
        context.Process(
            target=_bare_worker, args=(url, keys.keyring.to_json(), share, barrier, results)
        )
        for share in shares
    ]
    for process in processes:
        process.start()
    done = [results.get() for _ in processes]
    for process in processes:
        process.join()
    return sum(count for count, _ in done) / max(seconds for _, seconds in done)


# --- (d): peak memory of `ledger verify` in a subprocess -----------------------

# getrusage(RUSAGE_SELF).ru_maxrss is not usable here: Linux carries the
# parent's high-water mark across fork+exec, so the child would report this
# (large) benchmark process. VmHWM in /proc is per address space: exact.
_CHILD = """
import json, resource, sys
from ledger.cli.main import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
usage = {
    "code": code,
    "self_hwm_kb": hwm,
    "children_maxrss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
}
print("BENCH-RUSAGE " + json.dumps(usage), flush=True)
sys.exit(code)
"""


def _memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of one process, 0s if it is gone."""
    rss = hwm = 0
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm


def verify_memory(url: str, keys: bench.Keys, n: int, workers: int) -> dict[str, Any]:
    command = [
        sys.executable, "-c", _CHILD, "--store", url, "--keys", str(keys.path),
        "verify", "--level", "signatures", "--workers", str(workers),
    ]  # fmt: skip
    env = dict(os.environ)
    env.pop("LEDGER_PASSPHRASE", None)
    bench.note(f"`ledger verify --level signatures --workers {workers}` in a subprocess")
    started = time.perf_counter()
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    tree_peak = [0]
    hwm: dict[int, int] = {}  # each descendant's own high-water mark, last seen
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            total = 0
            for pid in bench.with_descendants([child.pid]):
                rss, high = _memory_kb(pid)
                total += rss
                if pid != child.pid and high:
                    hwm[pid] = max(hwm.get(pid, 0), high)
            tree_peak[0] = max(tree_peak[0], total)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = child.communicate()
    done.set()
    sampler.join()
    elapsed = time.perf_counter() - started
    marker = [line for line in out.splitlines() if line.startswith("BENCH-RUSAGE ")]
    if child.returncode != 0 or not marker:
        raise SystemExit(f"ledger verify failed ({child.returncode}):\n{out}\n{err}")
    usage = json.loads(marker[0].split(" ", 1)[1])
    summary = next(line for line in out.splitlines() if line.startswith("OK:"))
    if f"OK: {n} events" not in summary:
        raise SystemExit(f"unexpected verify summary: {summary}")
    main_mb = usage["self_hwm_kb"] / 1024
    others_mb = sorted((kb / 1024 for kb in hwm.values()), reverse=True)
    bound_mb = main_mb + sum(others_mb)
    sampled_mb = tree_peak[0] / 1024
    return {
        "peak_mb": max(bound_mb, sampled_mb),
        "bound_mb": bound_mb,
        "sampled_tree_peak_mb": sampled_mb,
        "main_hwm_mb": main_mb,
        "descendant_hwm_mb": others_mb,
        "children_ru_maxrss_mb": usage["children_maxrss_kb"] / 1024,
        "seconds": elapsed,
        "summary": summary,
    }


# --- main ------------------------------------------------------------------


def main() -> int:
    p = bench.parser(__doc__.splitlines()[0], events=200_000, repeats=3)
    p.set_defaults(store=None)
    p.add_argument("--parts", default="bcd", help="which of b, c, d to run (default bcd)")
    p.add_argument("--per-stream", type=int, default=10, help="events per stream (default 10)")
    args = p.parse_args()
    if args.store is None:
        args.store = "sqlite" if args.events >= 1_000_000 else "both"
    from ledger.audit.verify import Level

    workers = os.cpu_count() or 1
    parts = set(args.parts)
    print(bench.machine_line())
    print(
        f"verify {args.events:,} events ({args.per_stream} per stream, a checkpoint per 1,000), "
        f"workers = os.cpu_count() = {workers}, median of {args.repeats} runs, "
        "each between two measures of its baseline"
    )
    comparisons: list[bench.Comparison] = []
    measures: list[bench.Measure] = []
    builds: dict[str, dict[str, float]] = {}
    with bench.temp_dir() as workdir:
        keys = bench.make_keys(workdir)
        for kind in bench.stores(args.store):
            with bench.fresh_store(kind, workdir) as url:
                bench.note(f"{kind}: building {args.events:,} events")
                builds[kind] = build(url, keys, args.events, args.per_stream)
                builds[kind]["settle_seconds"] = bench.settle_store(url)
                b = builds[kind]
                print(
                    f"{kind}: built in {b['seal_seconds']:.1f} s sealing + "
                    f"{b['checkpoint_seconds']:.1f} s checkpointing, "
                    f"{b['settle_seconds']:.1f} s settling (VACUUM, CHECKPOINT)",
                    flush=True,
                )
                ranges = chunk_ranges(url, keys)
                scaled = bench.Comparison(
                    kind, "(b') verify signatures", f"bare Ed25519 in {workers} processes",
                    f"verify_store x{workers}", "events/s", TARGET_SIGNATURES,
                )  # fmt: skip
                sig_one = bench.Comparison(
                    kind, "(b1) verify signatures, 1 process", "bare Ed25519, 1 core",
                    "verify_store x1", "events/s", None,
                )  # fmt: skip
                integrity_one = bench.Comparison(
                    kind, "(c1) verify integrity, 1 process", "raw read (rows_between)",
                    "verify_store x1", "events/s", None,
                )  # fmt: skip
                sig = bench.Comparison(
                    kind, "(b) verify signatures", f"bare Ed25519 x{workers} cores",
                    f"verify_store x{workers}", "events/s", TARGET_SIGNATURES,
                )  # fmt: skip
                integrity = bench.Comparison(
                    kind, "(c) verify integrity", "raw read (rows_between)",
                    f"verify_store x{workers}", "events/s", TARGET_INTEGRITY,
                )  # fmt: skip
                memory = bench.Measure(
                    kind, f"(d) verify peak RSS @ {args.events:,}", "MB", MEMORY_LIMIT_MB
                )
                triples = signature_triples(url, keys, ranges) if "b" in parts else []
                for run in range(args.repeats):
                    bench.note(f"{kind}: run {run + 1}/{args.repeats}")
                    if "b" in parts:
                        # Sandwiched: bare, bare in parallel, verify, bare in parallel, bare.
                        bare_before = bare_verify_rate(triples, workers)
                        parallel_before = parallel_bare_rate(url, keys, ranges, workers)
                        full = verify_rate(url, keys, Level.SIGNATURES, args.events, workers)
                        parallel_after = parallel_bare_rate(url, keys, ranges, workers)
                        bare_after = bare_verify_rate(triples, workers)
                        bare = (bare_before + bare_after) / 2
                        parallel = (parallel_before + parallel_after) / 2
                        one = verify_rate(url, keys, Level.SIGNATURES, args.events, 1)
                        bare_one = bare_verify_rate(triples, 1)
                        sig_one.add((bare_after / workers + bare_one) / 2, one)
                        sig.add(bare, full)
                        scaled.add(parallel, full)
                        bench.note(
                            f"  (b) bare {bare_before:,.0f} / {bare_after:,.0f}/s (in parallel "
                            f"{parallel_before:,.0f} / {parallel_after:,.0f}/s)"
                            f"  verify {full:,.0f}/s"
                        )
                    if "c" in parts:
                        raw_before = raw_read_rate(url, keys, ranges, args.events)
                        full = verify_rate(url, keys, Level.INTEGRITY, args.events, workers)
                        raw_after = raw_read_rate(url, keys, ranges, args.events)
                        one = verify_rate(url, keys, Level.INTEGRITY, args.events, 1)
                        raw_last = raw_read_rate(url, keys, ranges, args.events)
                        integrity.add((raw_before + raw_after) / 2, full)
                        integrity_one.add((raw_after + raw_last) / 2, one)
                        bench.note(
                            f"  (c) raw {raw_before:,.0f} / {raw_after:,.0f}/s"
                            f"  verify {full:,.0f}/s"
                        )
                    if "d" in parts:
                        used = verify_memory(url, keys, args.events, workers)
                        memory.runs.append(used["peak_mb"])
                        memory.details.setdefault("runs", []).append(used)
                        bench.note(
                            f"  (d) peak {used['peak_mb']:.0f} MB (bound {used['bound_mb']:.0f}"
                            f", sampled {used['sampled_tree_peak_mb']:.0f})"
                        )
                del triples
                comparisons += [
                    c for c in (sig, scaled, sig_one, integrity, integrity_one) if c.baseline_runs
                ]
                if memory.runs:
                    measures.append(memory)
    print()
    if comparisons:
        print(bench.comparison_table(comparisons))
        for c in comparisons:
            if c.metric.startswith("(b')"):
                ideal = next(
                    x for x in comparisons if x.store == c.store and x.metric.startswith("(b)")
                )
                print(
                    f"  {c.store}: the bare loop in {workers} processes ran at "
                    f"{c.baseline_median / ideal.baseline_median:.2f} of one core x {workers} "
                    "(this machine's real parallel scaling during the run)"
                )
        print()
    if measures:
        print(bench.measure_table(measures))
        for m in measures:
            for i, used in enumerate(m.details["runs"], 1):
                others = " + ".join(f"{mb:.0f}" for mb in used["descendant_hwm_mb"]) or "0"
                print(
                    f"  {m.store} run {i}: VmHWM main {used['main_hwm_mb']:.0f} MB + "
                    f"descendants {others} MB = {used['bound_mb']:.0f} MB; sampled "
                    f"process-tree peak {used['sampled_tree_peak_mb']:.0f} MB; "
                    f"verify took {used['seconds']:.1f} s"
                )
        if args.events < 1_000_000:
            print("  (the memory target is set for 1,000,000 events: run --events 1000000)")
    name = NAME if args.events < 1_000_000 else f"{NAME}_{args.events // 1_000_000}M"
    path = bench.write_results(name, args, comparisons, measures, extra={"builds": builds})
    if path:
        print(f"\nwrote {path.relative_to(bench.TOOLS.parent)}")
    return 0


def _games(level: Any) -> Any:
    """The installed games at level settlement (loaded inside the run timed, as
    verify loaded them itself before it took them as an argument); none below."""
    from ledger.audit.verify import Level
    from ledger.plugins.manager import get_plugin_manager

    return get_plugin_manager().games() if level is Level.SETTLEMENT else None


if __name__ == "__main__":
    raise SystemExit(main())
