"""tools/bootstrap.py's install of the packages: with uv (put into the
virtualenv by pip) where it can be had, with pip where uv cannot be installed
or fails (the commands it would run, recorded, not run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.house.test_bootstrap_apt import bootstrap

PACKAGES = ["-e", "/src[dev]", "-e", "/src/plugins/taixiu"]


def recorded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, uv_installs: bool, uv_works: bool
) -> list[list[str]]:
    """The commands `install` runs, each answered as asked."""
    commands: list[list[str]] = []
    monkeypatch.setattr(bootstrap, "UV", tmp_path / "uv")  # not there until pip puts it there

    def quietly(command: list[str]) -> bool:
        commands.append(command)
        return uv_installs

    def installer(command: list[str], progress: tuple[str, ...], name: str) -> bool:
        commands.append(command)
        return uv_works if name == "uv" else True

    monkeypatch.setattr(bootstrap, "run_quietly", quietly)
    monkeypatch.setattr(bootstrap, "run_install", installer)
    return commands


def test_uv_installs_when_pip_can_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    commands = recorded(monkeypatch, tmp_path, uv_installs=True, uv_works=True)
    bootstrap.install(Path("/v/bin/python"), PACKAGES, compiled=False)
    pip = ["/v/bin/python", "-m", "pip", "install", "--disable-pip-version-check"]
    uv = [str(tmp_path / "uv"), "pip", "install", "--python", "/v/bin/python"]
    assert commands == [[*pip, "--quiet", "uv"], [*uv, *PACKAGES]]
    commands.clear()
    bootstrap.install(Path("/v/bin/python"), PACKAGES, compiled=True)
    assert commands[-1] == [*uv, "--compile-bytecode", *PACKAGES]


@pytest.mark.parametrize("uv_installs", [False, True])
def test_pip_installs_when_uv_cannot(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, uv_installs: bool
) -> None:
    commands = recorded(monkeypatch, tmp_path, uv_installs=uv_installs, uv_works=False)
    bootstrap.install(Path("/v/bin/python"), PACKAGES, compiled=False)
    pip = ["/v/bin/python", "-m", "pip", "install", "--disable-pip-version-check"]
    assert commands[-1] == [*pip, *PACKAGES, "--no-compile"]
    assert len(commands) == (3 if uv_installs else 2)  # pip's of uv, uv's if installed, pip's
