"""A test plugin installed from its folder into a directory of its own, as a
third party's would be (put on PYTHONPATH by the tests that run it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def install_plugin(plugin: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    # Built from a copy: pip builds a local folder in place (build/, *.egg-info),
    # and two runs of the suite (or two workers) must not build in one folder.
    source = tmp_path_factory.mktemp("source") / plugin.name
    shutil.copytree(plugin, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    options = ["--quiet", "--no-deps", "--no-build-isolation", "--target", str(target)]
    subprocess.run([*installer(), *options, str(source)], check=True)
    return target


def installer() -> list[str]:
    """uv's `pip install` where the virtualenv has it (tools/bootstrap.py puts it
    there): the same install in a third of pip's CPU (0.6 s against 1.5 s a
    package), which the suite pays a dozen times; pip where it has not."""
    uv = Path(sys.executable).parent / "uv"
    if uv.exists():
        return [str(uv), "pip", "install", "--no-cache", "--python", sys.executable]
    return [sys.executable, "-m", "pip", "install", "--disable-pip-version-check"]


def contract_test_count() -> int:
    """How many tests a plugin's subclass of the contract tests inherits."""
    from ledger.plugins.contract import GameContract

    return len([name for name in dir(GameContract) if name.startswith("test_")])
