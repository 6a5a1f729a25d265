"""The first run on a terminal (issue 19, item 4): `ledger simulate` asks for the
passphrase once, twice ("Again:") only when it makes keys with it, and never
shows what is typed; `tools/bootstrap.py simulate` asks before it installs
(so nothing is typed while pip runs) and shows progress while it does."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECRET = "correct-horse-first-run"


def on_a_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, int]:
    """Run `argv` on a pseudo-terminal, answering every passphrase prompt:
    (exit code, everything it wrote, the number of prompts)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, on the terminal
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    seen, prompts, deadline = b"", 0, time.monotonic() + 600
    answered = 0
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            prompts = seen.count(b"Key passphrase: ") + seen.count(b"Again: ")
            while answered < prompts:
                os.write(fd, SECRET.encode() + b"\n")
                answered += 1
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace"), prompts


def _env() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if not k.startswith("LEDGER_") and k not in ("CI",)
    } | {"TERM": "dumb"}


def test_simulate_asks_once_and_twice_only_when_it_makes_keys(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "ledger.cli.main", "simulate", "--rounds", "1", "--players", "2"]
    code, seen, prompts = on_a_terminal(argv, tmp_path, _env())
    assert code == 0, seen
    assert prompts == 2 and seen.count("Again: ") == 1, seen  # keys made: asked twice
    assert SECRET not in seen  # nothing echoed
    code, seen, prompts = on_a_terminal(argv, tmp_path, _env())
    assert code == 0, seen
    assert prompts == 1 and "Again: " not in seen, seen  # keys there: asked once


def test_bootstrap_asks_before_installing(tmp_path: Path) -> None:
    """The passphrase is asked before set-up, so nothing is typed (and echoed)
    while pip runs, and once: the session it starts does not ask again."""
    argv = [sys.executable, str(ROOT / "tools" / "bootstrap.py"), "simulate", "--rounds", "1"]
    env = _env() | {
        "LEDGER_KEYS": str(tmp_path / "keys"),
        "LEDGER_STORE": f"sqlite:///{tmp_path}/ledger.db",
    }
    code, seen, prompts = on_a_terminal(argv, tmp_path, env)
    assert code == 0, seen
    assert prompts == 2 and seen.count("Again: ") == 1, seen  # new keys: asked twice, once
    before = seen[: seen.index("Key passphrase: ")]
    assert "installing" not in before and "creating .venv" not in before, seen
    assert SECRET not in seen
    assert "OK: " in seen  # the session ran and verified


def test_bootstrap_help_explains_and_sets_nothing_up() -> None:
    def bootstrap(job: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(ROOT / "tools" / "bootstrap.py"), job]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    helped, unknown = bootstrap("--help"), bootstrap("frobnicate")
    assert helped.returncode == 0 and "bootstrap.py test [ARGS]" in helped.stdout
    assert unknown.returncode == 2
    said = "bootstrap: unknown job 'frobnicate' (simulate, test or setup; --help)\n"
    assert unknown.stderr == said
    for done in (helped, unknown):  # neither set anything up
        assert "installing" not in done.stderr and "creating .venv" not in done.stderr


def test_bootstrap_help_into_a_pipe_closed_early_is_no_traceback() -> None:
    """`bootstrap.py --help | head -3`: the reader stops reading, and the help
    ends quietly with exit 0 (it was a BrokenPipeError traceback)."""
    reader, writer = os.pipe()
    os.close(reader)  # nothing will read: the first write fails with EPIPE
    try:
        argv = [sys.executable, str(ROOT / "tools" / "bootstrap.py"), "--help"]
        done = subprocess.run(argv, stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(writer)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
