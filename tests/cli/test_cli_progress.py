"""Progress off a terminal (issue 8, item 11): with stderr a pipe, long commands
print a plain progress line every LEDGER_PROGRESS_INTERVAL seconds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.cli.test_cli_bad_input import RIGHT


def ledger(cwd: Path, interval: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env |= {"LEDGER_PASSPHRASE": RIGHT, "LEDGER_PROGRESS_INTERVAL": interval}
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli.main", *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,  # stderr is a pipe, not a terminal
        text=True,
        timeout=300,
    )


def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    # Interval 0: a line at every step, so the test needs no clock.
    result = ledger(tmp_path, "0", "simulate", "--rounds", "3", "--players", "3", "--tables", "1")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    playing = [ln for ln in lines if ln.startswith("ledger: playing: ")]
    assert [ln.split()[2] for ln in playing] == ["1/3", "2/3", "3/3"]
    assert all(
        re.fullmatch(r"ledger: playing: \d/3 rounds, [\d,]+ events, \d+ s elapsed", ln)
        for ln in playing
    ), playing
    for label in ("checkpointing", "projecting", "verifying"):
        assert any(re.match(rf"ledger: {label}: [\d,/]+ events, \d+ s elapsed", ln) for ln in lines)
    assert "\r" not in result.stderr  # no bar off a terminal

    for argv in (["verify"], ["projections", "rebuild"]):
        result = ledger(tmp_path, "0", *argv)
        assert result.returncode == 0, result.stderr
        assert result.stderr.startswith(("ledger: verifying: ", "ledger: projecting: "))

    # Off: silence.
    result = ledger(tmp_path, "off", "verify")
    assert (result.returncode, result.stderr) == (0, "")


def test_a_bad_interval_is_one_line(tmp_path: Path) -> None:
    assert ledger(tmp_path, "off", "simulate", "--rounds", "2", "--players", "2").returncode == 0
    result = ledger(tmp_path, "soon", "verify")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "ledger: error: LEDGER_PROGRESS_INTERVAL is seconds (0..86400) or 'off', not 'soon'"
    ]
