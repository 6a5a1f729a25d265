"""Workers verify at most a fixed number of chunks ahead of the one the caller
takes next: when the caller (the settlement pass) is slower than they are,
they wait instead of piling up results, so memory stays flat however long the
log (a 286,000-event settlement run held 21 MB of waiting results before)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ledger.audit.log.chunks import ChunkSpec
from ledger.audit.log.parallel import AHEAD_PER_PROCESS, WorkerPlan, run_chunks


def _no_init() -> None:
    return None


def _claimed_at(spec: ChunkSpec) -> Any:
    """A stand-in chunk: when it was started (the clock is system-wide)."""
    return (spec.first_leaf, time.monotonic())


def test_workers_wait_for_a_slow_caller_instead_of_running_ahead() -> None:
    specs = [ChunkSpec(n, n, n + 1, (), False) for n in range(3 * 4 * AHEAD_PER_PROCESS)]
    plan = WorkerPlan(_no_init, (), _claimed_at)
    started: dict[int, float] = {}
    asked: list[float] = []  # when the caller asked for each chunk's result
    results = run_chunks(specs, _claimed_at, plan=plan, processes=2, caller_works=False)
    for _ in specs:
        asked.append(time.monotonic())
        first_leaf, at = next(results)
        started[first_leaf] = at
        time.sleep(0.02)  # a caller slower than its workers
    results.close()
    assert sorted(started) == list(range(len(specs)))
    window = AHEAD_PER_PROCESS * 2
    # Chunk k's token is the one chunk k - window gave back once taken, after
    # the caller asked for it: chunk k cannot start before that.
    early = [k for k in range(window, len(specs)) if started[k] < asked[k - window]]
    assert early == []
    # And the window is used: workers do run ahead of the caller.
    assert any(started[k] < asked[k - 1] for k in range(1, len(specs)))


def _up(flag: str) -> None:
    """A worker's start: it says it is up (a worker may take long to start)."""
    Path(flag).touch()


def _by_worker(spec: ChunkSpec) -> Any:
    return (spec.first_leaf, "worker")


def test_a_busy_caller_takes_the_workers_results_between_its_chunks(tmp_path: Path) -> None:
    """Results left in the queue keep their tokens: a caller that only read the
    queue once it could claim no chunk left its worker waiting for tokens and
    verified most chunks itself; taking what is ready between
    its own chunks keeps the worker busy. The caller's first chunk lasts until
    the worker is up, however long a loaded machine takes to start it."""
    flag = tmp_path / "worker-up"

    def by_caller(spec: ChunkSpec) -> Any:
        deadline = time.monotonic() + 120
        while not flag.exists():
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.01)
        time.sleep(0.3)  # the caller's own chunks are slow
        return (spec.first_leaf, "caller")

    specs = [ChunkSpec(n, n, n + 1, (), False) for n in range(20)]
    plan = WorkerPlan(_up, (str(flag),), _by_worker)
    done = list(run_chunks(specs, by_caller, plan=plan, processes=2, caller_works=True))
    assert [leaf for leaf, _ in done] == list(range(20))  # in order, whoever verified each
    by_caller_leaves = [leaf for leaf, who in done if who == "caller"]
    # Its first, then one each time the worker has used its window of tokens
    # (2 or 3 in all; one more for a slow worker); leaving the results in the
    # queue, it verified 7 or 8.
    assert len(by_caller_leaves) <= 4, by_caller_leaves
