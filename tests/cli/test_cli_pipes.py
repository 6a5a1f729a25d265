"""`ledger ... | head`: a reader that closes the pipe early ends no command with
a traceback, and `simulate` still verifies what it recorded."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from uuid import UUID

import pytest

from tests.attacker import Attacker
from tests.cli.test_cli_bad_input import RIGHT, assert_one_error_line

SMALL = ["simulate", "--rounds", "2", "--players", "3", "--tables", "1"]


def ledger_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env["LEDGER_PASSPHRASE"] = RIGHT
    env["PYTHONUNBUFFERED"] = "1"  # every print reaches the pipe at once
    env["LEDGER_PROGRESS_INTERVAL"] = "off"  # stderr holds errors only, however slow the run
    return env


def ledger_into_closed_pipe(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run `ledger argv` with stdout a pipe whose reader is already gone: every
    write fails with EPIPE (deterministic, unlike racing `head`)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "ledger.cli.main", *argv],
            cwd=cwd,
            env=ledger_env(),
            stdin=subprocess.DEVNULL,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "argv",
    [SMALL, ["verify"], ["balances"], ["rounds"], ["paytable", "taixiu"], ["keys", "list"]],
    ids=lambda argv: argv[0],
)
def test_a_closed_stdout_is_not_an_error(
    stores: dict[str, Path], tmp_path: Path, argv: list[str]
) -> None:
    # A copy of the store `SMALL` made writing into a closed pipe (`stores`, once
    # for the file): each command runs on a store of its own.
    shutil.copytree(stores["good"], tmp_path, dirs_exist_ok=True)
    result = ledger_into_closed_pipe(tmp_path, *argv)
    assert result.stderr == ""
    assert result.returncode == 0


def test_simulate_still_verifies_when_stdout_is_gone(tmp_path: Path) -> None:
    # A store with a tampered event: simulate's verify step must find it, so a
    # run whose stdout is closed exits 1 with the one line naming it.
    assert ledger_into_closed_pipe(tmp_path, *SMALL).returncode == 0
    stream = flip_first_event(tmp_path / "ledger.db")
    result = ledger_into_closed_pipe(tmp_path, *SMALL)
    assert result.returncode == 1, result.stderr
    line = assert_one_error_line(result.stderr)
    assert stream in line


def first_stream(attacker: Attacker) -> tuple[str, int]:
    (stream, version), *_ = attacker.sql(
        f"SELECT originator_id, originator_version FROM {attacker.events} ORDER BY rowid LIMIT 1"
    )
    return str(UUID(hex=stream)), version


def flip_first_event(store: Path) -> str:
    """The last byte of the log's first event flipped, in the SQLite store
    `store`: its stream."""
    attacker = Attacker(f"sqlite:///{store}")
    try:
        stream, version = first_stream(attacker)
        state = attacker.row(stream, version)[4]
        attacker.set_state(stream, version, state[:-1] + bytes([state[-1] ^ 1]))
    finally:
        attacker.close()
    return stream


def test_piping_into_head(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f"{sys.executable} -m ledger.cli.main {' '.join(SMALL)} | head -1",
        ],
        cwd=tmp_path,
        env=ledger_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("created ledger-node key")
    assert len(result.stdout.splitlines()) == 1


# Issue 37, item 4: the exit code under a closed pipe on stdout, on stderr
# (`ledger verify 2>&1 | head -2`), and at interpreter exit, for each exit code.
# The command runs in a process of its own whose pipes' readers closed before it
# wrote anything; the runner records what `run_program` returned (or exited
# with) before the interpreter exits, then exits with it: the first says the
# command ended as itself (not on a BrokenPipeError), the process's own exit
# code that nothing buffered turned it into another at exit.
RUNNER = """
import sys
from ledger.cli.main import run_program
marker = sys.argv.pop(1)
try:
    code = run_program()
except SystemExit as exc:
    code = exc.code
with open(marker, "w") as out:
    out.write(str(code))
raise SystemExit(code)
"""


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A small store, and a copy of it with one event's bytes changed."""
    good = tmp_path_factory.mktemp("good")
    assert ledger_into_closed_pipe(good, *SMALL, "--seed", "7").returncode == 0
    tampered = tmp_path_factory.mktemp("tampered")
    for part in good.iterdir():
        target = tampered / part.name
        shutil.copytree(part, target) if part.is_dir() else shutil.copy2(part, target)
    flip_first_event(tampered / "ledger.db")
    return {"good": good, "tampered": tampered}


EXITS = {
    "0-verified": ("good", ["verify"], {}, 0),
    "1-tampered": ("tampered", ["verify"], {}, 1),
    "2-bad-input": ("good", ["balances", "nobody"], {}, 2),
    "2-usage": ("good", ["verify", "--workers", "0"], {}, 2),
    "3-could-not-check": ("good", ["verify"], {"LEDGER_PLUGINS_BLOCK": "taixiu"}, 3),
}


@pytest.mark.parametrize("buffered", [False, True], ids=["unbuffered", "buffered"])
@pytest.mark.parametrize("closed", ["stdout", "stderr", "both"])
@pytest.mark.parametrize("case", sorted(EXITS))
def test_the_exit_code_survives_closed_pipes(
    stores: dict[str, Path], tmp_path: Path, case: str, closed: str, buffered: bool
) -> None:
    store, argv, env, code = EXITS[case]
    environment = {**ledger_env(), **env}
    if buffered:
        del environment["PYTHONUNBUFFERED"]  # what is buffered is flushed at exit
    marker = tmp_path / "returned"
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run(
            [sys.executable, "-c", RUNNER, str(marker), *argv],
            cwd=stores[store],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=write if closed in ("stdout", "both") else subprocess.DEVNULL,
            stderr=write if closed in ("stderr", "both") else subprocess.PIPE,
            timeout=300,
        )
    finally:
        os.close(write)
    assert marker.read_text() == str(code), result.stderr
    assert result.returncode == code, result.stderr
    if closed == "stdout":  # stderr still open: the one error line, or nothing
        errors = result.stderr.decode()
        if code:
            assert_one_error_line(errors)
        else:
            assert errors == ""
