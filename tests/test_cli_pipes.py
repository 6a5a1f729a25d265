"""`ledger ... | head`: a reader that closes the pipe early ends no command with
a traceback, and `simulate` still verifies what it recorded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from uuid import UUID

import pytest

from tests.attacker import Attacker
from tests.test_cli_bad_input import RIGHT, assert_one_error_line

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
def test_a_closed_stdout_is_not_an_error(tmp_path: Path, argv: list[str]) -> None:
    assert ledger_into_closed_pipe(tmp_path, *SMALL).returncode == 0
    result = ledger_into_closed_pipe(tmp_path, *argv)
    assert result.stderr == ""
    assert result.returncode == 0


def test_simulate_still_verifies_when_stdout_is_gone(tmp_path: Path) -> None:
    # A store with a tampered event: simulate's verify step must find it, so a
    # run whose stdout is closed exits 1 with the one line naming it.
    assert ledger_into_closed_pipe(tmp_path, *SMALL).returncode == 0
    attacker = Attacker(f"sqlite:///{tmp_path / 'ledger.db'}")
    try:
        stream, version = first_stream(attacker)
        state = attacker.row(stream, version)[4]
        attacker.set_state(stream, version, state[:-1] + bytes([state[-1] ^ 1]))
    finally:
        attacker.close()
    result = ledger_into_closed_pipe(tmp_path, *SMALL)
    assert result.returncode == 1, result.stderr
    line = assert_one_error_line(result.stderr)
    assert stream in line


def first_stream(attacker: Attacker) -> tuple[str, int]:
    (stream, version), *_ = attacker.sql(
        f"SELECT originator_id, originator_version FROM {attacker.events} ORDER BY rowid LIMIT 1"
    )
    return str(UUID(hex=stream)), version


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
