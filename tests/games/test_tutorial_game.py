"""docs/tutorial-game.md runs as a reader follows it (issue 41, item 1): its
files are saved where it says, its commands run one after the other in one
empty directory, and what each prints is what the page says it does. The
one change: `pip install` puts the package into a directory of its own on
PYTHONPATH (tests/plugin_site.py), not into this virtualenv, which the rest
of the suite shares."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.doc_pages import blocks, run_block, user_env
from tests.plugin_site import contract_test_count

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial-game.md"
FILE = re.compile(r"\A# file: (\S+)\n")
INSTALL = "python -m pip install ./chanle"


def test_every_step_of_the_tutorial_runs(tmp_path: Path) -> None:
    work, site = tmp_path / "work", tmp_path / "site"
    work.mkdir()
    env = user_env("tutorial passphrase") | {"PYTHONPATH": f"{site}:{ROOT}"}
    saved: list[str] = []
    outputs: list[str] = []
    for lang, body in blocks(PAGE):
        named = FILE.match(body)
        if named:
            path = work / named[1]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
            saved.append(named[1])
            continue
        if INSTALL in body:
            body = body.replace(
                INSTALL,
                "python -m pip install --quiet --no-deps --no-build-isolation "
                f"--disable-pip-version-check --target {site} ./chanle",
            )
        out = run_block(lang, body, work, env)
        if out is not None:
            outputs.append(out)
    assert saved == [
        "chanle/pyproject.toml",
        "chanle/ledger_chanle/__init__.py",
        "chanle/ledger_chanle/game.py",
        "chanle/ledger_chanle/plugin.py",
        "chanle/tests/test_contract.py",
    ]
    installed, tested, simulated, opened, played = outputs

    listed, table = installed.split("\n", 1)
    assert re.fullmatch(r"chanle +casino-ledger-chanle 0\.1\.0 .* 2 bets .*", listed), listed
    # 105 of 216 throws have an even total and are not a triple: each returns 2.
    rows = [line.split()[:3] for line in table.splitlines()[2:]]
    assert rows == [["chan", "1:1", "35/36"], ["le", "1:1", "35/36"]]

    expected = contract_test_count() + 1  # GameContract's and its own
    assert re.search(rf"^{expected} passed", tested, re.M), tested

    tables = [line.split()[:3] for line in simulated.splitlines() if line.startswith("CH-")]
    assert tables == [["CH-1", "chanle", "rng"], ["CH-2", "chanle", "device"]], simulated
    assert re.search(r"^OK: \d+ events .* at level settlement", simulated, re.M), simulated
    assert opened == ""

    lines = played.splitlines()
    assert lines[0].startswith("recorded dealer close_betting in round")
    thrown = re.fullmatch(
        r"recorded dealer throw in round \S+, drew \[(\d), (\d), (\d)\]", lines[1]
    )
    assert thrown, lines[1]
    dice = [int(d) for d in thrown.groups()]
    won = sum(dice) % 2 == 0 and len(set(dice)) > 1  # chan, and no triple
    assert re.search(r"^round \S+: 1 bet settled$", played, re.M), played
    balance = re.search(r"^balance +([\d,]+)$", played, re.M)
    assert balance and balance[1] == ("510,000" if won else "490,000"), played
    assert lines[-1].startswith("OK: ") and "at level settlement" in lines[-1]


def test_the_tutorial_s_package_is_clean_by_the_project_s_linter(tmp_path: Path) -> None:
    for _, body in blocks(PAGE):
        named = FILE.match(body)
        if named and named[1].endswith(".py"):
            path = tmp_path / named[1]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
    rules = ["--line-length", "100", "--select", "E,F,W,I,B,UP,SIM,RUF"]
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", *rules, "."],
        cwd=tmp_path / "chanle",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
