"""Verification workers are forked where that is safe (Linux, one thread in
the calling process: no lock held by another thread is copied into them),
forked by a fork server while other threads run (Linux), else spawned; every
kind runs the chunks it claims."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.log import log_source, parallel
from ledger.audit.log.chunks import ChunkSpec
from ledger.audit.log.parallel import WorkerPlan, run_chunks
from ledger.node import Node


def _no_init() -> None:
    return None


def _ran_by(spec: ChunkSpec) -> Any:
    """A stand-in chunk result: which process ran the chunk."""
    return (spec.first_leaf, os.getpid())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is chosen on Linux only")
def test_workers_fork_only_while_one_thread_runs() -> None:
    if threading.active_count() == 1:
        assert parallel.start_method() == "fork"
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert parallel.start_method() == "forkserver"
    finally:
        stop.set()
        other.join()


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_workers_started_either_way_run_every_chunk(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if method != "spawn" and not sys.platform.startswith("linux"):
        pytest.skip("fork and the fork server are used on Linux only")
    monkeypatch.setattr(parallel, "start_method", lambda: method)
    specs = [ChunkSpec(n, n, n + 1, (), False) for n in range(12)]
    plan = WorkerPlan(_no_init, (), _ran_by)
    ran_in: set[int] = set()
    results = list(
        run_chunks(specs, _ran_by, plan=plan, processes=2, caller_works=False, ran_in=ran_in)
    )
    assert [first for first, _ in results] == list(range(12))
    assert os.getpid() not in {pid for _, pid in results}  # every chunk ran in a worker
    assert ran_in == {pid for _, pid in results}  # the processes that ran chunks, named


# Run in a fresh interpreter: a fork server runs until its process ends, with
# the modules of the first `prepare`, so this suite's process may have one already.
FORK_SERVER_SCRIPT = """
import json, os, sys, threading
from ledger.audit.log import parallel
from ledger.audit.log.chunks import ChunkSpec
from tests.http_api.test_worker_start import _imported_at_init, _ran_by_with_parent

stop = threading.Event()
threading.Thread(target=stop.wait, daemon=True).start()  # as a store's pool does
parallel.prepare(["ledger.audit.verify"])  # started now, importing it in its own process
plan = parallel.WorkerPlan(_imported_at_init, (), _ran_by_with_parent, ("ledger.audit.verify",))
specs = [ChunkSpec(n, n, n + 1, (), False) for n in range(6)]
results = list(parallel.run_chunks(specs, _ran_by_with_parent, plan=plan, processes=3,
                                   caller_works=False))
print(json.dumps({"caller": os.getpid(), "results": results,
                  "imported_here": "ledger.audit.verify" in sys.modules}))
"""

_verify_imported_before_init = False


def _imported_at_init() -> None:
    global _verify_imported_before_init
    _verify_imported_before_init = "ledger.audit.verify" in sys.modules


def _ran_by_with_parent(spec: ChunkSpec) -> Any:
    """(leaf, pid, parent pid, whether the verifier was imported before init)."""
    return (spec.first_leaf, os.getpid(), os.getppid(), _verify_imported_before_init)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server: Linux only")
def test_a_fork_server_forks_the_workers_with_its_modules_already_imported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FORK_SERVER_SCRIPT],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    caller, results = found["caller"], found["results"]
    assert [leaf for leaf, *_ in results] == list(range(6))
    assert caller not in {pid for _, pid, _, _ in results}  # every chunk ran in a worker
    parents = {parent for _, _, parent, _ in results}
    assert len(parents) == 1 and caller not in parents  # forked by the server, not the caller
    assert all(preloaded for *_, preloaded in results)  # imported before the worker began
    assert found["imported_here"] is False  # by the server: the caller never imported it


def _die_before_the_first_chunk(*_: object) -> None:
    os._exit(3)  # as a worker that cannot import what it needs


def test_a_worker_that_dies_at_once_leaves_its_share_to_the_caller_and_is_not_counted() -> None:
    specs = [ChunkSpec(n, n, n + 1, (), False) for n in range(8)]
    plan = WorkerPlan(_die_before_the_first_chunk, (), _ran_by)
    ran_in: set[int] = set()
    results = list(run_chunks(specs, _ran_by, plan=plan, processes=2, ran_in=ran_in))
    assert [first for first, _ in results] == list(range(8))
    assert ran_in == {os.getpid()}  # only the caller verified: one process, not two


def test_the_ok_line_counts_the_processes_that_verified_chunks(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Imported here: the fork server script above imports this module, and
    # checks that its caller never imported the verifier.
    from ledger.audit.verify import Level, VerifyOptions, verify_store
    from tests.audit.test_tamper import record

    record(node)
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SIGNATURES, workers=2, chunk_leaves=4)
    )
    # On 57 events the caller may verify every chunk before the worker has started.
    assert report.workers in (1, 2)
    monkeypatch.setattr(log_source, "init_worker", _die_before_the_first_chunk)
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SIGNATURES, workers=2, chunk_leaves=4)
    )
    assert report.workers == 1 and "(1 worker)" in report.summary()
