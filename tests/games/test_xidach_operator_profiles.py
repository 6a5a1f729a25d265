"""An operator's own Xì dách profile, configured without code (issue 10, item 1):
a JSON file in the directory $LEDGER_XIDACH_PROFILES names is listed by
`ledger games` with its own rules hash, a round is played and settled under
it through the casino, and `ledger verify` re-settles that round where the same
profile is installed (and says it cannot where it is not). A bad file stops
every command with one line naming it, before anything is recorded."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from ledger_xidach.game import XiDach
from ledger_xidach.profile_files import PROFILES_ENV
from ledger_xidach.rules import XiDachRules

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.cli.main import main
from ledger.crypto.keystore import KeyDirectory
from ledger.domain.round_records import SETTLED
from ledger.games.replay import replay
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import LoadedGame, rules_hash
from ledger.rng.server import RngServer
from tests.casino_support import event_count
from tests.conftest import PASSPHRASE
from tests.games.test_xidach_rounds import LIMITS, seated, simple_move

PLUGIN = f"casino-ledger-xidach {version('casino-ledger-xidach')}"
VIP: dict[str, Any] = {
    "id": "xidach-vip",
    "options": {
        "ace_rule": "one-or-ten",
        "xi_dach_tens": False,
        "min_score": 15,
        "seats": 7,
        "win_pays": [1, 1],
        "xi_ban_pays": [3, 1],
        "xi_dach_pays": [2, 1],
        "dealer_bust_pays_all_at": 27,
    },
}


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "xidach-profiles"
    directory.mkdir()
    (directory / "vip.json").write_text(json.dumps(VIP))
    monkeypatch.setenv(PROFILES_ENV, str(directory))
    return directory


def test_ledger_games_lists_it_with_its_own_rules_hash(
    profiles: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["games"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    hashes = {game_id: row[row.index("rules") + 1] for game_id, row in rows.items()}
    vip = XiDach("xidach-vip", XiDachRules.from_profile(VIP["options"]))
    assert hashes["xidach-vip"] == rules_hash(vip.rules)
    assert len(set(hashes.values())) == len(hashes)  # no other game shares it
    assert " ".join(rows["xidach-vip"][1:3]) == PLUGIN
    assert "7 bets" in " ".join(rows["xidach-vip"])  # seat:1..seat:7, from the file


def offered(games: dict[str, LoadedGame], casino: Casino, round_id: str) -> dict[str, Any]:
    game_round = casino.round(round_id)
    return replay(games[game_round.game], dict(game_round.bets), game_round.log)[1]


def test_a_round_under_it_settles_and_verify_resettles_it_with_the_same_profile(
    node: Node,
    keys: KeyDirectory,
    profiles: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    games = get_plugin_manager().games()
    casino = Casino(node.app, games)
    rng = RngServer(tmp_path / "seeds")
    table = casino.open_table(
        request_id="t", name="VIP", game="xidach-vip", kind="rng", currency="VND", limits=LIMITS
    )
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    stakes = {1: 100, 4: 400, 7: 700}  # seat 7 exists only in this profile
    round_id, players = seated(casino, table, stakes)
    returned: dict[str, int] = {}
    steps = 0
    while not (step := offered(games, casino, round_id))["over"]:
        actor, action = simple_move(step)
        done = casino.act(
            request_id=f"a{steps}", round_id=round_id, actor=actor, action=action, rng=rng
        )
        returned |= {r["bet_id"]: r["returned"] for r in done["settled"]}
        steps += 1
    game_round = casino.round(round_id)
    assert game_round.status == SETTLED and set(returned) == set(game_round.bets)
    assert game_round.rules_hash == games["xidach-vip"].rules_hash
    for seat, who in players.items():
        back = step["state"]["seats"][str(seat)]["returned"]
        assert casino.account(who).balance == 10_000 - stakes[seat] + back
    house = casino.account(casino.table(table).house_account).balance
    assert house == sum(stakes.values()) - sum(returned.values())  # money conserved
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=games)
    )
    assert report.resettled >= 1 and "NOT CHECKED" not in report.summary()

    def verify() -> tuple[int, str, str]:
        capsys.readouterr()
        argv = ["--store", node.app.store_url, "--keys", str(keys.path), "verify"]
        code = main([*argv, "--level", "settlement", "--workers", "1"])
        out, err = capsys.readouterr()
        return code, out, err

    # The command line finds the profile through the same setting...
    code, out, err = verify()
    assert (code, err) == (0, "") and out.startswith("OK: ")
    assert f"{report.resettled} settlements re-settled" in out
    # ...and without it, it says it cannot re-settle that round (never an OK).
    monkeypatch.delenv(PROFILES_ENV)
    code, out, err = verify()
    assert code == 3 and "OK" not in out
    assert f"cannot re-settle round {round_id}: it opened with xidach-vip" in err
    # A bad file beside it: one line naming it, exit 2, and the store unchanged.
    monkeypatch.setenv(PROFILES_ENV, str(profiles))
    (profiles / "zz.json").write_text(json.dumps({**VIP, "id": "xidach"}))
    before = event_count(node.app)
    code, out, err = verify()
    assert (code, out) == (2, "")
    assert err == (
        f"ledger: error: plugin {PLUGIN}: xì dách profile {profiles / 'zz.json'}: "
        "game id xidach is already shipped with the plugin\n"
    )
    assert event_count(node.app) == before


def test_a_bad_profile_stops_simulate_before_keys_or_store_are_made(
    profiles: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = profiles / "vip.json"
    bad.write_text(json.dumps({**VIP, "options": {**VIP["options"], "seats": 10}}))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name in ("LEDGER_KEYS", "LEDGER_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    assert main(["simulate", "--rounds", "2", "--players", "2", "--tables", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"ledger: error: plugin {PLUGIN}: xì dách profile {bad}: "
        "seats must be an integer 1..9: 10\n"
    )
    assert list(work.iterdir()) == []  # no keys made, no store created
