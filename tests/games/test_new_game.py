"""`ledger new-game NAME` (issue 41, item 1): the package it renders installs
as a third party's would, passes its own contract tests out of the box, is
listed by `ledger games`, played by `ledger simulate` and re-settled by
`ledger verify`. A bad NAME, or a target that exists, is one line and exit 2
with nothing written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ledger.plugins.template import MAX_NAME, TEMPLATE, template_files
from tests.conftest import PASSPHRASE
from tests.plugin_site import contract_test_count, install_plugin

ROOT = Path(__file__).resolve().parents[2]
NAME = "lucky-dice"


def run(
    cwd: Path,
    *args: str,
    site: Path | None = None,
    program: tuple[str, ...] | None = None,
    extra_path: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`ledger ARGS` (or `python PROGRAM ARGS`) in `cwd`, the site's plugins installed."""
    paths = [str(p) for p in (site, extra_path, ROOT) if p is not None]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(paths),
        LEDGER_PASSPHRASE=PASSPHRASE.decode(),
        LEDGER_PROGRESS_INTERVAL="off",
    )
    env.pop("LEDGER_STORE", None)
    env.pop("LEDGER_KEYS", None)
    command = program or ("-m", "ledger.cli.main")
    return subprocess.run(
        [sys.executable, *command, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("new-game")
    done = run(where, "new-game", NAME)
    assert done.returncode == 0, done.stderr
    assert f"wrote {NAME}/: game {NAME}, distribution casino-ledger-{NAME}" in done.stdout
    return where / NAME


@pytest.fixture(scope="module")
def site(rendered: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_plugin(rendered, tmp_path_factory)


def test_it_renders_the_package_an_author_starts_from(rendered: Path) -> None:
    files = sorted(str(p.relative_to(rendered)) for p in rendered.rglob("*") if p.is_file())
    module = "ledger_lucky_dice"
    assert files == [
        "README.md",
        f"{module}/__init__.py",
        f"{module}/game.py",
        f"{module}/plugin.py",
        "pyproject.toml",
        "tests/test_contract.py",
    ]
    project = tomllib.loads((rendered / "pyproject.toml").read_text())
    assert project["project"]["name"] == f"casino-ledger-{NAME}"
    assert project["project"]["entry-points"]["casino_ledger"] == {NAME: f"{module}.plugin"}
    game = (rendered / module / "game.py").read_text()
    # What the core will read from the game (issue 41, item 2), declared already.
    assert "close_action: str = CLOSE" in game and 'CLOSE: Final = "close_betting"' in game
    assert "fault_action: str | None = FAULT" in game
    assert 'draws: Mapping[str, DrawRange] = {"dice": {"low": 1, "high": FACES}}' in game


def test_its_code_is_clean_by_the_linter_it_configures(rendered: Path) -> None:
    for check in (["check"], ["format", "--check"]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *check, "."],
            cwd=rendered,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_its_contract_tests_pass_out_of_the_box(rendered: Path, site: Path) -> None:
    tests = run(rendered, "-q", "-p", "no:cacheprovider", site=site, program=("-m", "pytest"))
    assert tests.returncode == 0, tests.stdout + tests.stderr
    expected = contract_test_count() + 1  # GameContract's and its own
    assert re.search(rf"^{expected} passed", tests.stdout, re.M), tests.stdout


def test_ledger_games_lists_it_and_prices_it(tmp_path: Path, site: Path) -> None:
    listed = run(tmp_path, "games", site=site)
    assert listed.returncode == 0, listed.stderr
    (line,) = [line for line in listed.stdout.splitlines() if line.startswith(f"{NAME} ")]
    assert f"casino-ledger-{NAME} 0.1.0" in line and "3 bets" in line
    table = run(tmp_path, "paytable", NAME, site=site)
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split()[1:3] for line in table.stdout.splitlines()[2:]}
    # low and high: 105 of 216 throws win 2 each; a triple: 6 of 216 win 31 each.
    assert rows == {"low": ["1:1", "35/36"], "high": ["1:1", "35/36"], "triple": ["30:1", "31/36"]}


def test_simulate_plays_it_and_verify_re_settles_every_round(tmp_path: Path, site: Path) -> None:
    argv = ("--game", NAME, "--tables", "2", "--rounds", "16", "--players", "6")
    played = run(tmp_path, "simulate", *argv, "--fault-rate", "40", site=site)
    assert played.returncode == 0, played.stderr
    rows = [line.split()[:3] for line in played.stdout.splitlines() if line.startswith("LD-")]
    assert rows == [["LD-1", NAME, "rng"], ["LD-2", NAME, "device"]]
    checked = run(tmp_path, "verify", site=site)
    assert checked.returncode == 0, checked.stderr
    payouts = re.search(r"(\d+) settlements re-settled with their own game", checked.stdout)
    assert payouts and int(payouts[1]) > 0, checked.stdout
    assert re.search(r"[1-9]\d* RNG dice draws recomputed", checked.stdout), checked.stdout


@pytest.mark.parametrize(
    "name",
    ["My-Dice", "my_dice", "1dice", "my--dice", "-dice", "dice-", "dé", "my dice", "a" * 41],
)
def test_a_name_that_is_not_a_package_name_is_refused_and_nothing_written(
    tmp_path: Path, name: str
) -> None:
    done = run(tmp_path, "new-game", "--", name)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"ledger: error: not a game name: {name!r}")
    assert "PEP 503" in line and f"at most {MAX_NAME} characters" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["directory", "empty directory", "file"])
def test_a_target_that_exists_is_refused_and_left_as_it_was(tmp_path: Path, kind: str) -> None:
    target = tmp_path / NAME
    if kind == "file":
        target.write_text("mine")
    else:
        target.mkdir()
        if kind == "directory":
            (target / "notes.txt").write_text("mine")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    done = run(tmp_path, "new-game", NAME)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line == (
        f"ledger: error: cannot write the new game's package to {NAME}: it already exists"
    )
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    if kind == "file":
        assert target.read_text() == "mine"


@pytest.mark.parametrize(
    ("name", "clash"),
    [
        ("taixiu", "game taixiu is installed (casino-ledger-taixiu 1.0.0)"),
        ("sicbo-void", "game sicbo-void is installed (casino-ledger-taixiu 1.0.0)"),
        (NAME, f"game {NAME} is installed (casino-ledger-{NAME} 0.1.0)"),
        ("mine", "a module ledger_mine is importable here"),
    ],
)
def test_a_name_already_taken_here_is_refused_and_nothing_written(
    tmp_path: Path, site: Path, name: str, clash: str
) -> None:
    """A package under the name of an installed game (or module) would clash
    with it once installed: the shipped games, the one installed above, and a
    module of the package's name on the path."""
    packages, work = tmp_path / "packages", tmp_path / "work"
    (packages / "ledger_mine").mkdir(parents=True)
    (packages / "ledger_mine" / "__init__.py").write_text("")
    work.mkdir()
    done = run(work, "new-game", name, site=site, extra_path=packages)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line == f"ledger: error: game name {name} is taken: {clash}; choose another"
    assert list(work.iterdir()) == []


def test_the_template_ships_with_the_ledger_package() -> None:
    """Every template file is package data pyproject.toml declares, so an
    installed ledger (a wheel) renders the same package as this tree."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = {
        path
        for pattern in declared["package-data"]["ledger"]
        for path in (ROOT / "ledger").glob(pattern)
    }
    template = ROOT / "ledger" / "plugins" / TEMPLATE
    files = {template / path for path in template_files()}
    assert len(files) == 6
    assert files <= shipped, files - shipped
    assert {p for p in template.rglob("*") if p.is_file()} == files  # nothing left out
