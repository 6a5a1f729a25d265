"""A fourth game with no change to `ledger/` (issue 20, item 1): the card war
plugin in tests/plugins/card_war is installed from its own folder (into a
scratch directory), declares how it is played and how its bets group, and the
unchanged core simulates it (`ledger simulate --game card-war`), reports it
and re-settles every round (`ledger verify --level settlement`). Its name
appears nowhere in `ledger/`, and it passes the games contract."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.plugins.contract import GameContract
from tests.conftest import PASSPHRASE
from tests.plugin_site import install_plugin
from tests.reproducible import PROGRAM as REPRODUCIBLE

HERE = Path(__file__).parents[1]
PLUGIN = HERE / "plugins" / "card_war"
LEDGER = HERE.parent / "ledger"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_plugin(PLUGIN, tmp_path_factory)


def ledger(site: Path, *args: str, seed: int | None = None) -> subprocess.CompletedProcess[str]:
    """`ledger ARGS` with the site's plugins (with a `seed`, in a session that is
    the same every run: tests/reproducible.py)."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(site), str(HERE.parent)]),
        LEDGER_PASSPHRASE=PASSPHRASE.decode(),
    )
    command = ["-m", "ledger.cli.main"] if seed is None else [str(REPRODUCIBLE), str(seed)]
    return subprocess.run(
        [sys.executable, *command, *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.fixture(scope="module")
def simulated(site: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], str]:
    """A session of card war alone: two tables, one RNG and one physical."""
    where = tmp_path_factory.mktemp("store")
    store = ["--store", f"sqlite:///{where / 'ledger.db'}", "--keys", str(where / "keys")]
    argv = ("--game", "card-war", "--tables", "2", "--rounds", "24", "--players", "8")
    run = ledger(site, *store, "simulate", *argv, seed=5)
    assert run.returncode == 0, run.stderr
    return store, run.stdout


def test_simulate_plays_it_on_rng_and_physical_tables(simulated: tuple[list[str], str]) -> None:
    _, out = simulated
    assert "playing 24 rounds on 2 card-war tables" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("CW-")}
    assert set(rows) == {"CW-1", "CW-2"}
    assert rows["CW-1"][1:3] == ["card-war", "rng"]
    assert rows["CW-2"][1:3] == ["card-war", "device"]
    assert all(int(row[3 + 1]) == 12 for row in rows.values())  # rounds, each table's half
    turns = re.search(r"^turns: 2 tables \(card-war\); (\d+) moves at physical", out, re.M)
    assert turns and int(turns[1]) > 0  # the physical table's every move a device report
    assert re.search(r"; [1-9]\d* RNG card draws recomputed", out), out
    assert re.search(r"^OK: \d+ events in .* at level settlement", out, re.M), out
    payouts = re.search(r"11 payouts: (\d+) settlements re-settled .* \((\d+) bets\)", out)
    assert payouts and int(payouts[2]) > 0


def test_verify_re_settles_every_round(site: Path, simulated: tuple[list[str], str]) -> None:
    store, out = simulated
    settled = re.search(r"11 payouts: (\d+) settlements", out)
    assert settled
    run = ledger(site, *store, "verify", "--level", "settlement")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"11 payouts: {settled[1]} settlements re-settled" in run.stdout
    # Without the plugin the same store's rounds cannot be re-settled: said, not hidden.
    bare = ledger(Path("/nonexistent"), *store, "verify", "--level", "settlement")
    assert bare.returncode == 3, bare.stdout + bare.stderr
    assert "card-war" in bare.stdout + bare.stderr


def test_the_report_shows_its_families(
    site: Path, simulated: tuple[list[str], str], tmp_path: Path
) -> None:
    store, _ = simulated
    page = tmp_path / "report.html"
    run = ledger(site, *store, "report", str(page))
    assert run.returncode == 0, run.stderr
    text = html.unescape(re.sub(r"<[^>]+>", " ", page.read_text()))
    assert "card-war" in text
    # The family the game declares for seat bets (their label's kind is "seat").
    assert re.search(r"card-war\s+VND\s+against the dealer\s", text), text
    assert not re.search(r"card-war\s+VND\s+seat\s", text)


def test_its_name_appears_nowhere_in_the_core() -> None:
    for path in LEDGER.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".json", ".md", ".txt"):
            text = path.read_text(encoding="utf-8")
            assert "card-war" not in text and "card_war" not in text, path


sys.path.insert(0, str(PLUGIN))
from ledger_card_war import plugin as card_war_plugin  # noqa: E402


class TestCardWarContract(GameContract):
    plugin = card_war_plugin
    plugin_name = "card-war"
