"""Checkpointing with witnesses configured: does a witness delay the log?

Each run records the same events into a fresh store and times the
checkpointer's `catch_up` over them (batches of --batch events, so one
checkpoint per batch, each offered to the witnesses). Baseline: no witness
(`LEDGER_WITNESSES` empty). Subjects, interleaved run by run with it:

- *hung witness*: a socket that accepts and never answers (each submission
  waits out the 5 s time-out, in the submitter's thread);
- *live witness*: `ledger witness serve` in a process of its own on this
  machine (on 2 cores it competes with the checkpointer for CPU; a real
  witness runs elsewhere).

Ratio = subject rate / baseline rate (events checkpointed per second): 1.0
means the witness costs the checkpointer nothing. The cosignatures the live
witness made are counted, so a run that cosigned nothing is not reported as
a live one.

    .venv/bin/python tools/bench_witness.py [--store sqlite|postgres|both]
        [--events 5000] [--repeats 5] [--batch 250]
"""

from __future__ import annotations

import contextlib
import gc
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench

NAME = "bench_witness"


def _run(kind: str, workdir: Path, events: int, batch: int, witnesses: str) -> tuple[float, int]:
    from ledger.node import open_node
    from ledger.store.witnessing import WITNESSES_ENV, CosignatureTable

    os.environ[WITNESSES_ENV] = witnesses
    with bench.fresh_store(kind, workdir) as url:
        node = open_node(
            url, str(workdir / "keys"), passphrase=None, anchor_seconds=0, anchor_events=0
        )
        try:
            for table in bench.make_tables(events):
                node.app.save(table)
            checkpointer = node.checkpointer(batch_size=batch)
            gc.collect()
            started = time.perf_counter()
            checkpointer.catch_up()
            elapsed = time.perf_counter() - started
            if node.witnesses is not None:
                node.witnesses.close(wait=10)
            cosigned = len(CosignatureTable(node.app.tables).notes())
        finally:
            node.witnesses = None  # closed above; the hung one is not waited on again
            node.close()
    return events / elapsed, cosigned


@contextlib.contextmanager
def _served(directory: Path, port: int) -> Iterator[str]:
    """`ledger witness serve DIRECTORY` in a process of its own, until the block ends."""
    command = [sys.executable, "-m", "ledger.cli.main", "witness", "serve", str(directory)]
    server = subprocess.Popen([*command, "--port", str(port), "--unencrypted"])
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("the witness did not start")
        yield url
    finally:
        server.terminate()
        server.wait(10)


def main() -> int:
    p = bench.parser(__doc__.splitlines()[0], events=5_000, store="sqlite")
    p.add_argument("--batch", type=int, default=250, help="events per checkpoint (default 250)")
    args = p.parse_args()
    print(bench.machine_line())
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    from ledger.crypto.keys import Role
    from ledger.crypto.note import verifier_key
    from ledger.witness.config import WitnessConfig
    from tests.ports import free_port

    comparisons = []
    with bench.temp_dir() as workdir:
        keys = bench.make_keys(workdir)
        (log_key,) = keys.keyring.with_role(Role.CHECKPOINT)
        hung = socket.socket()
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)  # accepts (the kernel does), never answers
        for kind in bench.stores(args.store):
            hung_c = bench.Comparison(
                kind, "checkpointed events/s", "no witness", "hung witness", "events/s", None
            )
            live_c = bench.Comparison(
                kind, "checkpointed events/s", "no witness", "live witness", "events/s", None
            )
            cosigned_runs = []
            for run in range(args.repeats):
                bench.note(f"{kind} run {run + 1}/{args.repeats}")
                # A fresh witness each run: each run's log is a new one of the same origin.
                config = WitnessConfig.init(
                    workdir / f"witness-{kind}-{run}", "bench.example/w", None
                )
                config.add_log("casino-ledger", verifier_key(log_key.name, log_key.public_key))
                with _served(config.directory, free_port()) as url:
                    live = f"{url} {config.verifier_key()}"
                    hung_setting = (
                        f"http://127.0.0.1:{hung.getsockname()[1]} {config.verifier_key()}"
                    )
                    order = ["base", "hung", "live"] if run % 2 == 0 else ["live", "hung", "base"]
                    rates = {}
                    for variant in order:
                        setting = {"base": "", "hung": hung_setting, "live": live}[variant]
                        rate, cosigned = _run(kind, workdir, args.events, args.batch, setting)
                        rates[variant] = rate
                        if variant == "live":
                            cosigned_runs.append(cosigned)
                hung_c.add(rates["base"], rates["hung"])
                live_c.add(rates["base"], rates["live"])
                bench.note(
                    f"  none {rates['base']:,.0f}/s  hung {rates['hung']:,.0f}/s  "
                    f"live {rates['live']:,.0f}/s ({cosigned_runs[-1]} cosigned)"
                )
            if min(cosigned_runs) == 0:
                live_c.notes.append("a live run stored no cosignature: not a measurement")
            live_c.notes.append(f"cosigned checkpoints stored per live run: {cosigned_runs}")
            comparisons += [hung_c, live_c]
        hung.close()
    print()
    print(bench.comparison_table(comparisons))
    for c in comparisons:
        for line in c.notes:
            print(f"{c.store} {c.subject}: {line}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    path = bench.write_results(NAME, args, comparisons, extra={"batch": args.batch})
    if path:
        print(f"wrote {path.relative_to(bench.TOOLS.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
