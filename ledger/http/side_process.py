"""A process `ledger serve` starts beside its HTTP workers (the anchor, the
writer): started with the server's environment, ready once it says so on its
standard output, ended when the server ends (however it ends), and asked to
stop with SIGTERM so it finishes what it has under way."""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO, Any, NoReturn


class SideProcess:
    """`module.main([<this pid>, *args])` in a child process, its standard output
    a pipe for its READY line.

    Forked from this process when it runs no other thread: the child starts
    with the modules this one imported (a fresh interpreter imports them
    again, about 0.2-0.3 s of CPU a process, three of them a server start).
    Otherwise (a thread could hold a lock the child would then wait on for
    ever) `python -m module`, a fresh interpreter."""

    def __init__(self, module: str, *args: str, env: dict[str, str] | None = None) -> None:
        argv = [str(os.getpid()), *args]
        self.process: subprocess.Popen[bytes] | ForkedChild
        if threading.active_count() == 1 and hasattr(os, "fork"):
            main = importlib.import_module(module).main
            self.process = ForkedChild(process_name(module), main, argv, env)
        else:
            self.process = subprocess.Popen(
                [sys.executable, "-m", module, *argv],
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
        assert self.process.returncode is not None
        return self.process.returncode


class ForkedChild:
    """`main(argv)` in a forked child, seen as `subprocess.Popen` shows a child:
    its stdout (the pipe), `poll`, `wait`, `send_signal`, `kill`, `returncode`.
    The child's standard input is /dev/null, its standard output the pipe;
    it ends with `main`'s exit code, running none of this process's exit
    handlers (they are the parent's to run)."""

    def __init__(
        self,
        name: str,
        main: Callable[[list[str]], int],
        argv: list[str],
        env: dict[str, str] | None,
    ) -> None:
        read, write = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # (else the child would print them again)
            stream.flush()
        # What the child inherits, frozen: its collections never walk (nor touch,
        # and so copy) this process's objects, only what it makes itself.
        frozen_before = gc.get_freeze_count()
        gc.freeze()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(read)
            _name_this_process(name)
            _run_child(main, argv, write, env)
        if not frozen_before:
            gc.unfreeze()
        os.close(write)
        self.pid = pid
        self.stdout: IO[bytes] | None = os.fdopen(read, "rb")
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"side process {self.pid}", timeout or 0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def process_name(module: str) -> str:
    """The name a forked side process of `module` goes by (`ps -o comm`: 15 bytes
    at most): ledger.http.writer_process -> ledger-writer."""
    return ("ledger-" + module.rpartition(".")[2].removesuffix("_process"))[:15]


def _name_this_process(name: str) -> None:
    """Linux: the name `ps -o comm`, `top` and `pgrep` show (15 bytes at most),
    since a forked child shows its parent's command line."""
    if sys.platform.startswith("linux"):
        pr_set_name = 15
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_name, name.encode()[:15], 0, 0, 0)


def _run_child(
    main: Callable[[list[str]], int], argv: list[str], write: int, env: dict[str, str] | None
) -> NoReturn:
    code = 1
    try:
        os.dup2(write, 1)
        os.close(write)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        # Its own standard streams on those descriptors, whatever this process had
        # put in their place (a test's capture, say).
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


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
