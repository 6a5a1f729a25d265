"""A bundle is self-contained for rules (issue 18, item 3), on both stores.

Rounds under an operator's own Xì dách profile are exported with the
profile's rules data in games.jsonl; an auditor whose machine has the
Xì dách plugin but not the profile file verifies the bundle at level
settlement, and those rounds are re-settled with the game the plugin builds
from the bundle's rules data (`ledger_game_from_rules`), once the data are
checked to hash to the rules hash the rounds pinned. Rules data that do not
hash to it fail; with no installed plugin building a game from them, the
rounds cannot be re-settled (exit 3, never an OK); a directory with no
manifest.json is bad input (exit 2).
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from ledger_xidach.profile_files import PROFILES_ENV

from ledger.casino import Casino
from ledger.cli.main import main
from ledger.domain.round_records import SETTLED
from ledger.export.verify_bundle import verify_bundle
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import rules_hash
from ledger.rng.server import RngServer
from tests.games.test_xidach_operator_profiles import VIP, offered
from tests.games.test_xidach_rounds import LIMITS, seated, simple_move

PLUGIN = f"casino-ledger-xidach {version('casino-ledger-xidach')}"


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "xidach-profiles"
    directory.mkdir()
    (directory / "vip.json").write_text(json.dumps(VIP))
    monkeypatch.setenv(PROFILES_ENV, str(directory))
    for name in ("LEDGER_PLUGINS_ALLOW", "LEDGER_PLUGINS_BLOCK"):
        monkeypatch.delenv(name, raising=False)
    return directory


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def vip_round(node: Node, tmp_path: Path) -> str:
    """A round played and settled under the operator's profile xidach-vip, under a checkpoint."""
    games = get_plugin_manager().games()
    casino = Casino(node.app, games)
    rng = RngServer(tmp_path / "seeds")
    table = casino.open_table(
        request_id="t", name="VIP", game="xidach-vip", kind="rng", currency="VND", limits=LIMITS
    )
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    round_id, _ = seated(casino, table, {1: 100, 4: 400, 7: 700})  # seat 7: this profile's
    steps = 0
    while not (step := offered(games, casino, round_id))["over"]:
        actor, action = simple_move(step)
        casino.act(request_id=f"a{steps}", round_id=round_id, actor=actor, action=action, rng=rng)
        steps += 1
    assert casino.round(round_id).status == SETTLED
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    node.checkpointer().catch_up()
    return round_id


@pytest.fixture
def bundles(
    node: Node,
    profiles: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> dict[str, Path]:
    """A whole-log and a one-round bundle, exported where the profile is installed;
    from then on it is not (the auditor's machine)."""
    round_id = vip_round(node, tmp_path)
    store = ["--store", node.app.store_url, "--keys", str(node.keys.path)]
    made = {"whole": tmp_path / "whole", "round": tmp_path / "round"}
    code, _, err = run(capsys, *store, "export", str(made["whole"]))
    assert code == 0, err
    code, _, err = run(capsys, *store, "export", str(made["round"]), "--round", round_id)
    assert code == 0, err
    monkeypatch.delenv(PROFILES_ENV)
    assert "xidach-vip" not in get_plugin_manager().games()
    return made


def vip_profile_line(bundle: Path) -> tuple[int, dict[str, Any]]:
    games = read_lines(bundle / "games.jsonl")
    (number,) = [i for i, g in enumerate(games) if g["game"] == "xidach-vip"]
    return number, games[number]


def test_rounds_under_a_profile_not_installed_re_settle_from_the_bundles_rules(
    bundles: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for kind, bundle in bundles.items():
        _, vip = vip_profile_line(bundle)
        assert vip["rules"]["seats"] == 7 and rules_hash(vip["rules"]) == vip["rules_hash"]
        code, out, err = run(capsys, "verify", "--bundle", str(bundle), "--level", "settlement")
        assert (code, err) == (0, ""), (kind, out, err)
        assert out.startswith("OK (bundle, ")
        resettled = re.search(r"(\d+) settlements re-settled", out)
        assert resettled is not None and int(resettled[1]) >= 1, out
        assert (
            f"xidach-vip (rules {vip['rules_hash'][:12]}) is not installed here: its game was "
            f"built from the rules data in games.jsonl by {PLUGIN}"
        ) in out
        # The Python API says the same.
        report = verify_bundle(bundle, plugins=get_plugin_manager())
        assert report.built == [line for line in out.splitlines() if "not installed here" in line]
    # With no game counted as installed, every round's game is built from the rules data.
    report = verify_bundle(bundles["round"], games={}, plugins=get_plugin_manager())
    resettled = re.search(r"(\d+) settlements re-settled", report.summary())
    assert len(report.built) == 1 and resettled is not None and int(resettled[1]) >= 1


def test_rules_data_that_do_not_hash_to_the_rules_hash_fail(
    bundles: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for bundle in bundles.values():
        games = read_lines(bundle / "games.jsonl")
        number, _ = vip_profile_line(bundle)
        vip = games[number]
        vip["rules"]["xi_dach_pays"] = [3, 1]  # valid rules, richer than the rounds were played by
        write_lines(bundle / "games.jsonl", games)
        code, out, err = run(capsys, "verify", "--bundle", str(bundle), "--level", "settlement")
        assert (code, out) == (1, ""), err
        assert err == (
            f"ledger: error: bundle games.jsonl line {number + 1}: the rules of 'xidach-vip' do "
            f"not hash to its rules hash {vip['rules_hash'][:12]}\n"
        )
        # Hashed again to match: not the rules the rounds pinned, so those are missing.
        vip["rules_hash"] = rules_hash(vip["rules"])
        write_lines(bundle / "games.jsonl", games)
        code, out, err = run(capsys, "verify", "--bundle", str(bundle), "--level", "settlement")
        assert code == 1 and "games.jsonl: the rules of xidach-vip" in err and "missing" in err


def test_with_no_plugin_building_the_game_the_rounds_cannot_be_re_settled(
    bundles: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_PLUGINS_BLOCK", "xidach")
    code, out, err = run(capsys, "verify", "--bundle", str(bundles["round"]))
    assert code == 3 and "OK" not in out
    assert "cannot re-settle round" in err and "it opened with xidach-vip" in err
    assert "no installed plugin builds a game from the rules data at hand" in err
    # Below level settlement no game is needed.
    code, out, err = run(
        capsys, "verify", "--bundle", str(bundles["round"]), "--level", "signatures"
    )
    assert code == 0, err
    assert "not installed here" not in out


def test_a_directory_with_no_manifest_is_bad_input(
    bundles: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for bundle in (bundles["round"], tmp_path / "seeds"):
        (bundle / "manifest.json").unlink(missing_ok=True)
        code, out, err = run(capsys, "verify", "--bundle", str(bundle))
        assert (code, out) == (2, "")
        assert err == (
            f"ledger: error: {bundle} holds no manifest.json: it is not an export bundle "
            "(`ledger export DIR` writes one)\n"
        )
