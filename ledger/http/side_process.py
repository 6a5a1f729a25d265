"""A process `ledger serve` starts beside its HTTP workers (the anchor, the
writer): started with the server's environment, ready once it says so on its
standard output, ended when the server ends (however it ends), and asked to
stop with SIGTERM so it finishes what it has under way."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import Any


class SideProcess:
    """`python -m module <this pid> args...`, its standard output a pipe for its READY line."""

    def __init__(self, module: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, str(os.getpid()), *args],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        self._ready: bool | None = None

    def wait_ready(self) -> bool:
        """Wait for its READY line (read once); False when it ended without one."""
        if self._ready is None:
            assert self.process.stdout is not None
            self._ready = bool(self.process.stdout.readline())
        return self._ready

    def stop(self, timeout: float = 60) -> int:
        """Ask it to finish and end; its exit code. One stopped within a second of
        starting is waited for until ready first: a stop signal before that would
        end it before it could finish anything."""
        self.wait_ready()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def end_with(parent: int) -> None:
    """Linux: SIGTERM when the serving process dies (kill -9 included)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the request took effect
        raise SystemExit(0)


class StopFlag:
    """Set by a stop signal. A plain attribute, not a `threading.Event`: a
    handler that takes a lock deadlocks when a second signal (the parent's
    death, Ctrl-C and the server's SIGTERM often come together) interrupts
    the first handler while it holds that lock."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


def stop_signals() -> StopFlag:
    """Set on SIGTERM or SIGINT (from now on, in this process); poll it."""
    stopped = StopFlag()

    def ask_to_stop(*_: Any) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, ask_to_stop)
    signal.signal(signal.SIGINT, ask_to_stop)
    return stopped


def say_ready(line: bytes) -> None:
    sys.stdout.buffer.write(line)
    sys.stdout.flush()
