"""Verification workers are forked where that is safe (Linux, one thread in
the calling process: no lock held by another thread is copied into them),
else spawned; both kinds run the chunks they claim."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import pytest

from ledger.audit import parallel
from ledger.audit.chunks import ChunkSpec
from ledger.audit.parallel import WorkerPlan, run_chunks


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
        assert parallel.start_method() == "spawn"
    finally:
        stop.set()
        other.join()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_started_either_way_run_every_chunk(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if method == "fork" and not sys.platform.startswith("linux"):
        pytest.skip("fork is used on Linux only")
    monkeypatch.setattr(parallel, "start_method", lambda: method)
    specs = [ChunkSpec(n, n, n + 1, (), False) for n in range(12)]
    plan = WorkerPlan(_no_init, (), _ran_by)
    results = list(run_chunks(specs, _ran_by, plan=plan, processes=2, caller_works=False))
    assert [first for first, _ in results] == list(range(12))
    assert os.getpid() not in {pid for _, pid in results}  # every chunk ran in a worker
