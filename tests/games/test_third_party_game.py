"""An operator adds a game by installing a package: the Atlantic City Sic
Bo plugin in tests/plugins/atlantic_city is installed from its own folder (into
a scratch directory), and the unchanged core lists it, prices it and settles
with it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin_site import install_plugin
from tests.reproducible import PROGRAM as REPRODUCIBLE

HERE = Path(__file__).parents[1]
PLUGIN = HERE / "plugins" / "atlantic_city"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_plugin(PLUGIN, tmp_path_factory)


def ledger(site: Path, *args: str, seed: int | None = None) -> subprocess.CompletedProcess[str]:
    """`ledger ARGS` with the site's plugins (with a `seed`, in a session that is
    the same every run: tests/reproducible.py)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(HERE.parent)]))
    command = ["-m", "ledger.cli.main"] if seed is None else [str(REPRODUCIBLE), str(seed)]
    return subprocess.run(
        [sys.executable, *command, *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_the_installed_plugin_is_listed(site: Path) -> None:
    listed = ledger(site, "games")
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith("atlantic-city"))
    assert "ledger-atlantic-city-sicbo 0.3.0" in line
    assert "50 bets" in line


def test_its_paytable_has_the_atlantic_city_returns(site: Path) -> None:
    table = ledger(site, "paytable", "atlantic-city")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[2:]}
    assert rows["specific_triple:1"][1:3] == ["180:1", "181/216"]
    assert rows["any_triple"][1:3] == ["30:1", "31/36"]  # 6 of 216 win 31 each
    assert rows["total:4"][1:3] == ["60:1", "61/72"]  # 3 of 216 win 61 each
    assert rows["specific_double:2"][1:3] == ["10:1", "22/27"]  # 16 of 216 win 11 each


def test_blocking_it_by_environment_hides_it(site: Path) -> None:
    env_args = ("games",)
    os.environ["LEDGER_PLUGINS_BLOCK"] = "atlantic-city"
    try:
        listed = ledger(site, *env_args)
    finally:
        del os.environ["LEDGER_PLUGINS_BLOCK"]
    assert listed.returncode == 0
    assert "atlantic-city" not in listed.stdout
    assert "taixiu" in listed.stdout


def test_simulate_plays_it_as_its_base_game_declares(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Built on the taixiu plugin's DiceGame, it inherits its families and how a
    # one-draw round is played: the core simulates it with no word about it.
    monkeypatch.setenv("LEDGER_PASSPHRASE", "a passphrase for the test keys")
    store = ["--store", f"sqlite:///{tmp_path / 'ledger.db'}", "--keys", str(tmp_path / "keys")]
    argv = ("--game", "atlantic-city", "--tables", "2", "--rounds", "10", "--players", "6")
    run = ledger(site, *store, "simulate", *argv, "--fault-rate", "50", seed=3)
    assert run.returncode == 0, run.stderr
    rows = [line.split()[:3] for line in run.stdout.splitlines() if line.startswith("AC-")]
    assert rows == [["AC-1", "atlantic-city", "rng"], ["AC-2", "atlantic-city", "device"]]
    family_table = run.stdout.split("\nbet family ")[1].splitlines()
    assert [line.split("  ")[0] for line in family_table[1:4]] == [
        "small/big",
        "single",
        "specific triple",
    ]
    assert re.search(r"^OK: \d+ events in .* at level settlement", run.stdout, re.M), run.stdout
