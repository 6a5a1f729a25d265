"""A server's side processes (`ledger.http.side_process`): forked from a
process that runs no other thread (the modules it imported shared, named
`ledger-<name>` for `ps`), started as `python -m module` from one that does;
either way ready once it says so, given its arguments and environment, its
standard input empty and its standard output the pipe (whatever the parent
had put in place of its own), stopped with SIGTERM, its exit code returned."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ledger.http.side_process import ForkedChild, SideProcess

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.side_child"


def _check(side: SideProcess) -> None:
    assert side.wait_ready()
    assert side.process.stdout is not None
    said = side.process.stdout.readline().decode()
    assert said == "args=['one', 'two'] setting=given stdin=''\n", said
    assert side.stop(timeout=30) == 3


def _in_a_new_interpreter(script: str) -> subprocess.CompletedProcess[str]:
    """`script` run where no other thread runs (a pytest worker runs several)."""
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_from_a_process_with_one_thread_the_child_is_forked_and_named() -> None:
    script = (
        "import io, sys\n"
        "from ledger.http.side_process import ForkedChild, SideProcess\n"
        "sys.stdout = io.StringIO()  # a capture in the parent's place: not the child's output\n"
        f"side = SideProcess({MODULE!r}, 'one', 'two', env={{'SIDE_SETTING': 'given'}})\n"
        "assert isinstance(side.process, ForkedChild), side.process\n"
        "assert side.wait_ready()\n"
        "name = open(f'/proc/{side.process.pid}/comm').read().strip()\n"
        "said = side.process.stdout.readline().decode()\n"
        "code = side.stop(timeout=30)\n"
        "sys.__stdout__.write(repr((name, said, code)))\n"
    )
    done = _in_a_new_interpreter(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout == repr(
        ("ledger-side_chi", "args=['one', 'two'] setting=given stdin=''\n", 3)
    )


def test_from_a_process_with_threads_it_is_a_fresh_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        side = SideProcess(MODULE, "one", "two", env={**os.environ, "SIDE_SETTING": "given"})
        assert not isinstance(side.process, ForkedChild)
        assert side.wait_ready()  # (its command line is read once it runs)
        command = Path(f"/proc/{side.process.pid}/cmdline").read_bytes().split(b"\0")
        assert [b"-m", MODULE.encode()] == command[1:3]
        _check(side)
    finally:
        stop.set()
        other.join()


def test_a_child_that_fails_ends_with_an_exit_code_and_its_traceback() -> None:
    script = (
        "import sys\n"
        "from ledger.http.side_process import ForkedChild\n"
        "def main(argv):\n"
        "    raise RuntimeError('broken on purpose')\n"
        "child = ForkedChild('ledger-broken', main, [], None)\n"
        "print(child.stdout.read(), child.wait(timeout=30))\n"
    )
    done = _in_a_new_interpreter(script)
    assert done.stdout == "b'' 1\n", done.stdout + done.stderr
    assert "RuntimeError: broken on purpose" in done.stderr
