"""tools/bootstrap.py's apt-get install of what the suite needs from Debian:
said before, only the missing packages, nothing they merely recommend, no
upgrade of what is installed (the commands it would run, recorded, not run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.house.tool_modules import tool

bootstrap = tool("bootstrap")

# What `apt-get install -s` prints: one package new, one upgraded (a dependency
# the new one needs newer), and the lines around them.
SIMULATION = """\
NOTE: This is only a simulation!
Inst libopus0 (1.3.1-3 Debian:12.15/oldstable [amd64])
Inst libudev1 [252.30-1~deb12u2] (252.39-1~deb12u2 Debian:12.15/oldstable [amd64])
Inst chromium (156.0.8078.114-1~deb12u1 Debian-Security:12/oldstable-security [amd64])
Conf libopus0 (1.3.1-3 Debian:12.15/oldstable [amd64])
Conf chromium (156.0.8078.114-1~deb12u1 Debian-Security:12/oldstable-security [amd64])
"""


def test_the_install_takes_no_recommends_and_upgrades_nothing_listed() -> None:
    command = bootstrap.apt_install(["chromium", "postgresql"])
    assert command[:2] == ["apt-get", "install"]
    assert "--no-install-recommends" in command and "--no-upgrade" in command
    assert "-y" in command  # nobody to answer in CI
    assert command[-2:] == ["chromium", "postgresql"]  # these, and nothing else named
    assert not any(word.startswith("--install-") or word == "upgrade" for word in command)


def test_the_simulation_tells_new_from_upgraded() -> None:
    assert bootstrap.simulated(SIMULATION) == (["libopus0", "chromium"], ["libudev1"])
    assert bootstrap.simulated("") == ([], [])


def _record(
    monkeypatch: pytest.MonkeyPatch, missing: dict[str, str], simulation: str = SIMULATION
) -> list[list[str]]:
    ran: list[list[str]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        ran.append(command)
        print(f"RAN {' '.join(command)}", file=sys.stderr)  # in order with what is said
        out = simulation if "-s" in command else ""
        return subprocess.CompletedProcess(command, 0, stdout=out, stderr="")

    monkeypatch.setattr(bootstrap, "missing_system_packages", lambda: dict(missing))
    monkeypatch.setattr(bootstrap.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(bootstrap.os, "geteuid", lambda: 0)
    monkeypatch.setattr(bootstrap.subprocess, "run", run)
    return ran


def test_it_says_what_and_why_then_updates_simulates_and_installs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = {"chromium": "the report's browser test", "postgresql": "the fault tests"}
    ran = _record(monkeypatch, missing)
    bootstrap.install_system_packages()
    wanted = bootstrap.apt_install(["chromium", "postgresql"])
    assert ran == [
        ["apt-get", "update", "-qq"],
        [*wanted[:2], "-s", *wanted[2:]],  # the same install, simulated
        wanted,
    ]
    said = capsys.readouterr().err.splitlines()
    installing = said.index(f"RAN {' '.join(wanted)}")
    before = said[:installing]
    assert "only these" in before[0] and "nothing they merely recommend" in before[0]
    assert "bootstrap:   chromium: the report's browser test" in before
    assert "bootstrap:   postgresql: the fault tests" in before
    assert "bootstrap: apt-get installs 2: libopus0 chromium" in before
    assert "bootstrap: and upgrades 1: libudev1" in before


def test_a_machine_that_has_it_all_runs_no_apt(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran = _record(monkeypatch, {})
    bootstrap.install_system_packages()
    assert ran == [] and capsys.readouterr().err == ""


def test_only_what_is_missing_is_asked_for(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A machine with its own Go but not golang.org/x/mod's sources gets the
    sources only, not Debian's Go beside its own."""
    on_path = {"chromium", "go", "gcc"}
    monkeypatch.setattr(
        bootstrap.shutil, "which", lambda name: f"/usr/bin/{name}" if name in on_path else None
    )
    monkeypatch.setattr(bootstrap, "GO_SUMDB", tmp_path / "absent")
    monkeypatch.setattr(bootstrap, "sanitizer_packages", lambda: [])
    missing = bootstrap.missing_system_packages()
    assert "golang-go" not in missing and "chromium" not in missing
    assert "golang-golang-x-mod-dev" in missing
    monkeypatch.setattr(bootstrap, "GO_SUMDB", tmp_path)  # now there
    on_path.discard("go")
    missing = bootstrap.missing_system_packages()
    assert "golang-go" in missing and "golang-golang-x-mod-dev" not in missing
