"""Run verification chunks on every core, the calling process included.

Chunks are claimed from a shared counter, so a fast process takes more of
them and a worker that is slow to start costs nothing: the caller works
meanwhile. Results come back in log order, as the merge needs them. A
process claims a chunk only with one of a fixed number of tokens, each given
back when its chunk's result has been taken: workers faster than the caller
(the settlement pass) wait instead of piling up results, so memory stays
flat however long the log.

Workers are forked where that is safe (Linux, and this process running one
thread: no lock another thread holds is copied), so a worker is ready in
milliseconds with the modules this process has imported. A process that runs
other threads (a PostgreSQL store's connection pool) has them forked by a
fork server instead: a process of its own, started by fork and exec, that
imports what the workers need once (`WorkerPlan.modules`) and forks each from
its one thread, so a worker is ready in milliseconds there too. `prepare`
starts it early, while the caller does other work (the verifier, before it
reads the keys and checkpoints of a log longer than one chunk: a shorter one
runs no worker); a later verification in the same process finds it running.
Elsewhere (not Linux) workers are spawned, a fresh interpreter importing the
store layer, which takes a large part of a second (under load, more) before
its first chunk.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
import threading
import traceback
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from typing import Any

from ledger.audit.log.chunks import ChunkResult, ChunkSpec

_POLL_SECONDS = 1.0
AHEAD_PER_PROCESS = 4  # chunks a process may verify ahead of the one the caller takes next


def _claim(counter: Synchronized[int], total: int) -> int | None:
    with counter.get_lock():
        index = counter.value
        if index >= total:
            return None
        counter.value = index + 1
        return index


@dataclass(frozen=True)
class WorkerPlan:
    """What a worker process runs: `init(*args)` once, then `work(spec)` per chunk.

    Both are module-level functions, so a spawned process imports them by name;
    `modules`, what they import, a fork server imports once for every worker."""

    init: Callable[..., None]
    args: tuple[Any, ...]
    work: Callable[[ChunkSpec], ChunkResult]
    modules: tuple[str, ...] = ()


def _worker_main(
    plan: WorkerPlan,
    specs: Sequence[ChunkSpec],
    counter: Synchronized[int],
    tokens: Any,
    results: Any,
) -> None:
    try:
        plan.init(*plan.args)
        while True:
            tokens.acquire()
            index = _claim(counter, len(specs))
            if index is None:
                tokens.release()
                return
            results.put((index, os.getpid(), plan.work(specs[index])))
    except BaseException:  # report every failure; the caller raises it
        results.put((-1, os.getpid(), traceback.format_exc(limit=5)))


def start_method() -> str:
    """How workers start: "fork" where it is safe, "forkserver" on Linux while
    other threads run, else "spawn" (see the module doc)."""
    if not sys.platform.startswith("linux"):
        return "spawn"
    return "fork" if threading.active_count() == 1 else "forkserver"


def prepare(modules: Sequence[str]) -> None:
    """Start the fork server now, importing `modules`, if workers will need it
    (this process runs other threads). It imports them in its own process
    while the caller goes on, and runs until this process ends. Nothing
    happens where workers fork or spawn, or when it is running already (its
    modules are the first caller's: a worker imports anything else itself)."""
    if start_method() != "forkserver":
        return
    from multiprocessing import forkserver

    forkserver.set_forkserver_preload(list(modules))  # (a running server keeps its own)
    forkserver.ensure_running()


def run_chunks(
    specs: Sequence[ChunkSpec],
    run_here: Callable[[ChunkSpec], ChunkResult],
    *,
    plan: WorkerPlan,
    processes: int,
    caller_works: bool = True,
    meanwhile: Callable[[], None] | None = None,
    ran_in: set[int] | None = None,
) -> Generator[ChunkResult, None, None]:
    """Yield each chunk's result in order, using `processes` processes in all;
    with `caller_works` False, `processes` workers and the caller free for
    its own work between results (the settlement pass, as chunks arrive).
    `meanwhile`, work of the caller's own that needs no chunk, runs once the
    workers have started (the proofs between checkpoints): it is not a serial
    phase before or after them. `ran_in` gets the id of every process that
    ran a chunk: how many did, not how many were asked for (a worker that
    dies before its first chunk leaves the others its share)."""
    ran_in = ran_in if ran_in is not None else set()
    if processes <= 1 or len(specs) <= 1:
        if meanwhile is not None:
            meanwhile()
        for spec in specs:
            ran_in.add(os.getpid())
            yield run_here(spec)
        return
    method = start_method()
    if method == "forkserver":
        prepare(plan.modules)
    context: Any = multiprocessing.get_context(method)  # (typeshed: no Process on the base)
    counter: Synchronized[int] = context.Value("q", 0)
    tokens = context.Semaphore(AHEAD_PER_PROCESS * processes)  # chunks claimed, not yet taken
    results = context.Queue()
    workers = [
        context.Process(
            target=_worker_main,
            args=(plan, specs, counter, tokens, results),
            daemon=True,
        )
        for _ in range(processes - 1 if caller_works else processes)
    ]
    # A fork server answers once it has imported its modules: its workers are
    # started from a thread meanwhile, and the caller goes on with its chunks.
    starting = _Starting(workers, in_thread=method == "forkserver")
    finished: dict[int, ChunkResult] = {}
    next_index = 0
    try:
        if meanwhile is not None:
            meanwhile()
        while next_index < len(specs):
            if next_index in finished:
                result = finished.pop(next_index)
                tokens.release()  # taken: another chunk may be claimed
                yield result
                next_index += 1
                continue
            if caller_works and _take_ready(results, finished, ran_in):
                continue  # a worker's result may be next in order: its token goes back first
            index = None
            if caller_works and tokens.acquire(block=False):
                index = _claim(counter, len(specs))
                if index is None:
                    tokens.release()
            if index is not None:
                finished[index] = run_here(specs[index])
                ran_in.add(os.getpid())
            else:
                index, result = _receive(results, starting, ran_in)
                finished[index] = result
    finally:
        with counter.get_lock():
            counter.value = len(specs)  # nothing more to claim: workers wind down
        for worker in starting.started():
            worker.terminate()
            worker.join()
        results.close()


class _Starting:
    """The workers, started here or from a thread; `started()` waits for that."""

    def __init__(self, workers: list[Any], *, in_thread: bool) -> None:
        self.workers = workers
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if in_thread:
            self._thread = threading.Thread(target=self._start, name="verify-workers")
            self._thread.start()
        else:
            self._start()

    def _start(self) -> None:
        try:
            for worker in self.workers:
                worker.start()
        except BaseException as exc:  # reported by `alive` when no worker runs
            self.error = exc

    def alive(self) -> bool:
        if self._thread is not None and self._thread.is_alive():
            return True  # still starting them
        if self.error is not None:
            raise RuntimeError(f"verification workers could not start: {self.error}")
        return any(worker.is_alive() for worker in self.workers)

    def started(self) -> list[Any]:
        if self._thread is not None:
            self._thread.join()
        return [worker for worker in self.workers if worker.pid is not None]


def _take_ready(results: Any, finished: dict[int, ChunkResult], ran_in: set[int]) -> bool:
    """Move the results workers have sent into `finished`, without waiting.

    The caller takes them between its own chunks: left in the queue while it
    verifies chunk after chunk, they kept their tokens, and a worker ran out of
    tokens and waited (up to a chunk's time, 0.3 s at level signatures)."""
    took = False
    while True:
        try:
            index, pid, result = results.get_nowait()
        except queue.Empty:
            return took
        if index < 0:
            raise RuntimeError(f"a verification worker failed:\n{result}")
        finished[index] = result
        ran_in.add(pid)
        took = True


def _receive(results: Any, starting: _Starting, ran_in: set[int]) -> tuple[int, ChunkResult]:
    while True:
        try:
            index, pid, result = results.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            if not starting.alive():
                raise RuntimeError("every verification worker stopped early") from None
            continue
        if index < 0:
            raise RuntimeError(f"a verification worker failed:\n{result}")
        ran_in.add(pid)
        return index, result
