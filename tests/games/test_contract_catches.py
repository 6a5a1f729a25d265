"""The contract tests catch what the core now relies on (issue 41, item 2): the
`GameContract` suite, run as a plugin author runs it (pytest, in a process of
its own), fails each deliberately broken plugin of tests/games/broken_plugins.py
in the test that names its fault, with that fault in the message, and passes
the honest control."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BAU_CUA = ROOT / "tests" / "plugins" / "bau_cua"

SUITE = """
from ledger.plugins.contract import GameContract
from tests.games import broken_plugins as broken


class TestHonest(GameContract):
    plugin = broken.Honest()


class TestRenamedClose(GameContract):
    plugin = broken.RenamedClose()


class TestRenamedFault(GameContract):
    plugin = broken.RenamedFault()


class TestDefaultForAnyRules(GameContract):
    plugin = broken.DefaultForAnyRules()


class TestRelabelsItsDefault(GameContract):
    plugin = broken.RelabelsItsDefault()


class TestAcceptsUnknownOptions(GameContract):
    plugin = broken.AcceptsUnknownOptions()
"""

# Per broken plugin: the contract test that must fail, and what it must say.
EXPECTED = {
    "TestRenamedClose": (
        "test_its_close_action_closes_betting",
        "declares close_action 'close_betting' but its first step does not offer it",
    ),
    "TestRenamedFault": (
        "test_its_fault_action_is_a_move_it_offers",
        "misthrow {} is refused (a misthrow needs a reason): is it the game's fault? its "
        "fault_action is 'fumble'",
    ),
    "TestDefaultForAnyRules": (
        "test_game_from_rules_plays_as_each_of_its_games",
        "ledger_game_from_rules ignores the rules data",
    ),
    "TestRelabelsItsDefault": (
        "test_game_from_rules_plays_as_each_of_its_games",
        "the hook ignores the rules data it is given",
    ),
    "TestAcceptsUnknownOptions": (
        "test_game_from_rules_refuses_an_option_it_does_not_know",
        "accepts rules with an option it does not know ('contract-unknown-option')",
    ),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    """Each contract test's outcome: "" when it passed, else its failure text."""
    where = tmp_path_factory.mktemp("contract")
    (where / "test_broken_contract.py").write_text(SUITE, encoding="utf-8")
    report = where / "report.xml"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BAU_CUA), str(ROOT)]))
    # Its own config (none): the suite's options (xdist's among them) are not an author's.
    options = ["-q", "-p", "no:cacheprovider", "--rootdir", str(where), "-c", os.devnull]
    subprocess.run(
        [sys.executable, "-m", "pytest", *options, f"--junitxml={report}", str(where)],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found: dict[tuple[str, str], str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        cls = case.get("classname", "").rsplit(".", 1)[-1]
        problems = [e for e in case if e.tag in ("failure", "error", "skipped")]
        text = " ".join((e.get("message") or "") + (e.text or "") for e in problems)
        found[(cls, case.get("name", ""))] = text if problems else ""
    return found


def test_the_honest_plugin_passes_every_contract_test(
    outcomes: dict[tuple[str, str], str],
) -> None:
    honest = {name: text for (cls, name), text in outcomes.items() if cls == "TestHonest"}
    assert len(honest) >= 12 and "test_game_from_rules_plays_as_each_of_its_games" in honest
    assert all(text == "" for text in honest.values()), honest


@pytest.mark.parametrize("broken", sorted(EXPECTED))
def test_each_broken_plugin_fails_for_its_reason(
    outcomes: dict[tuple[str, str], str], broken: str
) -> None:
    test, reason = EXPECTED[broken]
    assert (broken, test) in outcomes, sorted(outcomes)
    assert reason in outcomes[(broken, test)], outcomes[(broken, test)]
