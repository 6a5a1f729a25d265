"""A game's rules and code over time (issue 41, item 3): releases of one
plugin, each installed from its own folder as an operator installs them.

The coin toss of tests/plugins/coin_releases is shipped as 1.0.0 (revision 1,
a win pays 2x), then as one of: 1.2.0, new rules data under the same game id
(pays 3x) that still rebuilds revision 1 from rules data; 2.0.0, a proper
rules version bump (revision 2 keeps a commission; revision 1 still rebuilt);
2.0.0 without revision 1 (the old rules dropped); 1.1.0, revision 1 paid with
the commission (a payout change under the same rules data). Rounds played
under 1.0.0 must still verify at store level under every release that keeps
their rules, and `ledger games check` (and `ledger serve` before it starts)
names every recorded round a release would strand or re-judge.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from uuid import UUID

import pytest

from ledger.audit.games.release_check import pinned_uses
from ledger.crypto.keystore import KeyDirectory
from ledger.domain.round import Round
from ledger.store.application import LedgerApplication
from tests.plugin_site import install_plugin
from tests.ports import free_port

HERE = Path(__file__).parents[1]
PLUGIN = HERE / "plugins" / "coin_releases"
PASSPHRASE = "a passphrase for the test keys"

REVISION_1 = {"game": "coin", "revision": 1, "pays": 2}
RELEASES: dict[str, tuple[str, dict[str, object]]] = {
    "first": ("1.0.0", {"installs": REVISION_1, "rebuilds": [1], "silent_change": False}),
    "new-rules": (
        "1.2.0",
        {"installs": {**REVISION_1, "pays": 3}, "rebuilds": [1], "silent_change": False},
    ),
    "bumped": (
        "2.0.0",
        {"installs": {**REVISION_1, "revision": 2}, "rebuilds": [1, 2], "silent_change": False},
    ),
    "dropped": (
        "2.0.0",
        {"installs": {**REVISION_1, "revision": 2}, "rebuilds": [2], "silent_change": False},
    ),
    "silent": ("1.1.0", {"installs": REVISION_1, "rebuilds": [1], "silent_change": True}),
}


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each release, written into a copy of the plugin's folder and installed."""
    installed = {}
    for name, (version, release) in RELEASES.items():
        folder = tmp_path_factory.mktemp(f"release-{name}") / PLUGIN.name
        shutil.copytree(PLUGIN, folder, ignore=shutil.ignore_patterns("build", "*.egg-info"))
        project = folder / "pyproject.toml"
        project.write_text(
            project.read_text().replace('version = "1.0.0"', f'version = "{version}"')
        )
        (folder / "ledger_coin" / "release.json").write_text(json.dumps(release))
        installed[name] = install_plugin(folder, tmp_path_factory)
    return installed


class Operator:
    """One store and keys directory, and `ledger` run with one release installed."""

    def __init__(self, sites: dict[str, Path], tmp_path: Path) -> None:
        self.sites = sites
        self.store = f"sqlite:///{tmp_path / 'ledger.db'}"
        self.keys = tmp_path / "keys"

    def ledger(self, release: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(self.sites[release]), str(HERE.parent)]),
            LEDGER_PASSPHRASE=PASSPHRASE,
            LEDGER_PLUGINS_ALLOW="coin",
        )
        env.pop("LEDGER_PLUGINS_BLOCK", None)
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "ledger.cli.main",
                "--store",
                self.store,
                "--keys",
                str(self.keys),
                *args,
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )

    def play(self, release: str, rounds: int) -> None:
        argv = ("--game", "coin", "--tables", "1", "--rounds", str(rounds), "--players", "3")
        played = self.ledger(release, "simulate", *argv)
        assert played.returncode == 0, played.stderr

    def settled(self) -> list[str]:
        """The ids of every settled round, in log order."""
        keyring = KeyDirectory(self.keys).keyring()
        app = LedgerApplication(self.store, keyring=keyring, create=False)
        try:
            return [round_id for use in pinned_uses(app) for round_id in use.settled]
        finally:
            app.close()

    def results(self) -> dict[str, list[tuple[int, int]]]:
        """Per rules hash, the (stake, returned) of every winning bet settled."""
        keyring = KeyDirectory(self.keys).keyring()
        app = LedgerApplication(self.store, keyring=keyring, create=False)
        try:
            found: dict[str, list[tuple[int, int]]] = {}
            for use in pinned_uses(app):
                for round_id in use.settled:
                    game_round = app.repository.get(UUID(round_id))
                    assert isinstance(game_round, Round)
                    found.setdefault(use.rules_hash, []).extend(
                        (r["stake"], r["returned"]) for r in game_round.results if r["returned"]
                    )
            return found
        finally:
            app.close()


@pytest.fixture
def operator(sites: dict[str, Path], tmp_path: Path) -> Operator:
    """Rounds played under 1.0.0, and `ledger games check` run with it installed
    (the rules data it records are what a later release re-settles with)."""
    operator = Operator(sites, tmp_path)
    operator.play("first", 6)
    checked = operator.ledger("first", "games", "check")
    assert checked.returncode == 0, checked.stderr
    assert re.search(
        r"recorded the rules of coin \(rules \w{12}, ledger-coin 1\.0\.0\)", checked.stdout
    )
    return operator


def rules_hash_of(check: str, release: str) -> str:
    """The rules hash a `games check` line says `release` installs or builds."""
    found = re.search(
        rf"coin rules (\w{{12}}) \(settlement API 2\): .*ledger-coin {release}", check
    )
    assert found is not None, check
    return found.group(1)


def test_new_rules_under_the_same_game_id_leave_old_rounds_verifiable(
    operator: Operator,
) -> None:
    verified = operator.ledger("new-rules", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "6 settlements re-settled with their own game and rules" in verified.stdout
    check = operator.ledger("new-rules", "games", "check")
    assert check.returncode == 0, check.stderr
    assert "6 rounds; ledger-coin 1.2.0 (built from the store's rules register's data)" in (
        check.stdout
    )
    assert "recorded the rules of coin" in check.stdout  # its own rules (pays 3), for later
    assert check.stdout.rstrip().endswith("this release strands and re-judges none")
    recalled = operator.ledger("new-rules", "recall", operator.settled()[0])
    assert recalled.returncode == 0, recalled.stdout + recalled.stderr
    assert (
        "settled again" in recalled.stdout and "the game's rules and payouts" not in recalled.stdout
    )


def test_without_the_rules_recorded_the_old_rounds_could_not_be_checked(
    sites: dict[str, Path], tmp_path: Path
) -> None:
    """What the register is for: rounds whose rules no one recorded (no `games
    check` or `serve` under the release that played them) are stranded by new
    rules under their game id, and the check says which release to reinstall."""
    operator = Operator(sites, tmp_path)
    operator.play("first", 2)
    verified = operator.ledger("new-rules", "verify")
    assert verified.returncode == 3, verified.stdout + verified.stderr
    check = operator.ledger("new-rules", "games", "check")
    assert check.returncode == 1
    (line,) = check.stderr.splitlines()
    assert line.startswith("ledger: error: this release would strand 2 recorded rounds of coin")
    assert "the store's rules register holds no rules data for them" in line
    assert "reinstall the plugin release that played them (1.0.0)" in line
    again = operator.ledger("first", "games", "check")  # reinstalled: its rules recorded
    assert again.returncode == 0, again.stderr
    assert operator.ledger("new-rules", "games", "check").returncode == 0


def test_a_release_that_drops_the_old_rules_names_the_stranded_rounds(
    operator: Operator,
) -> None:
    check = operator.ledger("dropped", "games", "check")
    assert check.returncode == 1
    (line,) = check.stderr.splitlines()
    pinned = rules_hash_of(operator.ledger("first", "games", "check").stdout, "1.0.0")
    assert line.startswith(
        f"ledger: error: this release would strand 6 recorded rounds of coin rules {pinned} "
        "(settlement API 2): installed: ledger-coin 2.0.0"
    )
    assert "no installed plugin builds a game from the rules data the store records" in line
    assert "reinstall ledger-coin 1.0.0" in line
    verified = operator.ledger("dropped", "verify")
    assert verified.returncode == 3  # what the check warned of: could not check
    served = operator.ledger("dropped", "serve", "--port", str(free_port()))
    assert served.returncode == 1
    assert served.stderr.splitlines()[-1] == line  # refused before any worker starts
    assert "serving the ledger API" not in served.stderr


def test_a_release_paying_otherwise_under_the_same_rules_names_the_re_judged_round(
    operator: Operator,
) -> None:
    check = operator.ledger("silent", "games", "check", "--sample", "6")
    assert check.returncode == 1
    lines = check.stderr.splitlines()
    assert lines, check.stdout
    rounds = set()
    for line in lines:
        found = re.fullmatch(
            r"ledger: error: this release would re-judge recorded rounds of coin \(rules \w{12}, "
            r"played with 1\.0\.0\): round (\S+) paid (\d+) on bet \S+, the installed code "
            r"\(ledger-coin 1\.1\.0\) pays (\d+); a payout change needs a new rules version "
            r"\(docs/plugins\.md\)",
            line,
        )
        assert found is not None, line
        paid, pays = int(found.group(2)), int(found.group(3))
        stake = paid // 2  # revision 1 paid 2x; 1.1.0 keeps 5% of the winnings, rounded up
        assert pays == paid - -(-stake // 20)
        rounds.add(found.group(1))
    won = sum(1 for stake, returned in operator.results().popitem()[1] if returned == 2 * stake)
    assert won > 0 and len(rounds) == len(lines)  # one line per re-judged round named
    served = operator.ledger("silent", "serve", "--port", str(free_port()))
    assert served.returncode == 1 and "would re-judge recorded rounds of coin" in served.stderr
    verified = operator.ledger("silent", "verify")
    assert verified.returncode == 1 and "[rule-broken]" in verified.stdout


def test_a_proper_rules_version_bump_settles_old_rounds_old_and_new_rounds_new(
    operator: Operator,
) -> None:
    check = operator.ledger("bumped", "games", "check")
    assert check.returncode == 0, check.stderr
    operator.play("bumped", 6)
    verified = operator.ledger("bumped", "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "12 settlements re-settled with their own game and rules" in verified.stdout
    check = operator.ledger("bumped", "games", "check")
    assert check.returncode == 0, check.stderr
    old = rules_hash_of(check.stdout, "2.0.0 \\(built from the store's rules register's data\\)")
    new = rules_hash_of(check.stdout, "2.0.0 \\(installed\\)")
    assert old != new
    results = operator.results()
    assert {hash_[:12] for hash_ in results} <= {old, new}
    by_rules = {hash_[:12]: paid for hash_, paid in results.items()}
    assert by_rules.get(old) and by_rules.get(new)
    assert all(returned == 2 * stake for stake, returned in by_rules[old])  # revision 1
    assert all(returned == 2 * stake - -(-stake // 20) for stake, returned in by_rules[new])
    # A bundle made now carries both versions' rules (the old from the register).
    exported = operator.ledger("bumped", "export", str(operator.keys.parent / "bundle"))
    assert exported.returncode == 0, exported.stderr
    carried = [
        json.loads(line)
        for line in (operator.keys.parent / "bundle" / "games.jsonl").read_text().splitlines()
    ]
    assert sorted((g["rules"]["revision"], g["plugin_version"]) for g in carried) == [
        (1, "1.0.0"),
        (2, "2.0.0"),
    ]
    bundle = operator.ledger("bumped", "verify", "--bundle", str(operator.keys.parent / "bundle"))
    assert bundle.returncode == 0, bundle.stdout + bundle.stderr
    page = operator.ledger("bumped", "report", str(operator.keys.parent / "out.html"), "--verify")
    assert page.returncode == 0, page.stdout + page.stderr


@pytest.mark.parametrize("argv", [["--sample", "-1"], ["--sample", "x"], ["nonsense"]])
def test_bad_input_to_the_check_is_one_line_and_writes_nothing(
    sites: dict[str, Path], tmp_path: Path, argv: list[str]
) -> None:
    operator = Operator(sites, tmp_path)
    refused = operator.ledger("first", "games", "check", *argv)
    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    assert line.startswith("ledger: error:") and refused.stdout == ""
    assert not (tmp_path / "ledger.db").exists() and not operator.keys.exists()
