"""The repository holds source only: no virtualenv, build output or local data."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def git_checkout() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.fail("the repository tests need git and a git checkout")


@pytest.mark.usefixtures("git_checkout")
def test_no_tracked_path_is_ignored() -> None:
    tracked_but_ignored = _git("ls-files", "-ci", "--exclude-standard").split()
    assert tracked_but_ignored == []


@pytest.mark.usefixtures("git_checkout")
@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        "venv/lib/site.py",
        "plugins/taixiu/build/lib/x.py",
        "tests/plugins/atlantic_city/build/lib/ledger_atlantic_city/plugin.py",
        "plugins/taixiu/ledger_taixiu.egg-info/PKG-INFO",
        "ledger/__pycache__/x.cpython-311.pyc",
        "dist/casino_ledger-0.1.0.tar.gz",
        "ledger.db",
        "keys/keyring.json",
        "rng-seeds/0123456789abcdef.seed",
    ],
)
def test_local_output_is_ignored(path: str) -> None:
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, check=False
    )
    assert result.returncode == 0, f"{path} is not ignored"
