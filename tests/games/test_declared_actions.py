"""No action name known to the core (issue 41, item 2): Bầu Cua
(tests/plugins/bau_cua) closes betting with `no_more_bets`, shakes with `lac`
and reports a throw it could not use with `misthrow`. It declares them
(`close_action`, `fault_action`, `draws`), and the core reads them: it is
simulated (`ledger simulate`), played over the Python API and over HTTP (the
close-betting, faults, outcome and draw aliases, and `act`), and verified;
every refused move names the game's own moves."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.domain.round import Round
from ledger.domain.stored_names import FAULT_MARK
from ledger.errors import InvalidCommandError, VerificationError
from ledger.http.app import Service, create_app
from ledger.http.tokens import ApiRole, TokenStore
from ledger.node import Node
from ledger.plugins.contract import GameContract
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.server import RngServer
from tests.asgi_client import InThreadClient
from tests.casino_support import dealer_device
from tests.conftest import PASSPHRASE
from tests.http_support import Api, all_games
from tests.plugin_site import install_plugin

HERE = Path(__file__).parents[1]
PLUGIN = HERE / "plugins" / "bau_cua"
LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}

sys.path.insert(0, str(PLUGIN))
from ledger_bau_cua import plugin as bau_cua_plugin  # noqa: E402

GAMES = get_plugin_manager(
    load_entry_points=False, extra=[("bau-cua", bau_cua_plugin, "0.1.0")]
).games()


class TestBauCuaContract(GameContract):
    plugin = bau_cua_plugin


def actions_of(node: Node, round_id: str) -> list[tuple[str, dict[str, Any]]]:
    """Each recorded action's name and source, read back from the store."""
    return [
        (event.action, event.source)
        for event in node.app.repository.event_store.get(UUID(round_id))
        if isinstance(event, Round.ActionRecorded)
    ]


def verified(node: Node) -> str:
    options = VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    return verify_store(node.app, node.keys.keyring(), options).summary()


@pytest.fixture
def casino(node: Node) -> Casino:
    return Casino(node.app, GAMES)


def table_of(casino: Casino, kind: str) -> tuple[str, str]:
    player = casino.open_account(request_id=f"acc-{kind}", owner="an", currency="VND")
    casino.deposit(request_id=f"dep-{kind}", account_id=player, amount=50_000)
    table = casino.open_table(
        request_id=f"t-{kind}", name="BC", game="bau-cua", kind=kind, currency="VND", limits=LIMITS
    )
    return table, player


def test_the_python_api_plays_its_own_moves_at_a_physical_table(node: Node, casino: Casino) -> None:
    device = dealer_device(node)
    table, player = table_of(casino, "physical")
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b1", round_id=round_id, account_id=player, bet={"bet": "cua"}, stake=100
    )
    casino.close_betting(request_id="c1", round_id=round_id)  # the alias: its no_more_bets
    fault = device.fault(round_id, 0, "a die left the plate")
    answer = casino.record_fault(
        request_id="f1", round_id=round_id, reason="a die left the plate", source=fault
    )
    assert answer == {"faults": 1, "then": "throw again"}
    # The outcome fills its one play move (`lac`), not the misthrow beside it.
    outcome = {"dice": [2, 2, 5]}  # two crabs: 100 back and 200 won
    casino.record_outcome(
        request_id="o1",
        round_id=round_id,
        outcome=outcome,
        source=device.throw(round_id, 1, outcome),
    )
    played = casino.round(round_id)
    assert (played.status, played.faults, played.draws) == ("settled", 1, 2)
    assert [r["returned"] for r in played.results] == [300]
    recorded = actions_of(node, round_id)
    assert [name for name, _ in recorded] == ["no_more_bets", "misthrow", "lac"]
    assert recorded[1][1]["fault"] is True and recorded[1][1]["signed"] == "fault"
    assert "fault" not in recorded[2][1]
    # `act` of the misthrow, in an action report: a fault the same way.
    again = casino.open_round(request_id="r2", table_id=table, dealer="D")
    casino.act(request_id="c2", round_id=again, actor="dealer", action="no_more_bets")
    for step, reason in ((1, "the bowl lifted early"), (2, "a die left the plate")):
        report = device.act(again, step, "dealer", "misthrow", {"reason": reason}, [])
        casino.act(
            request_id=f"m{step}",
            round_id=again,
            actor="dealer",
            action="misthrow",
            args={"reason": reason},
            source=report,
        )
    voided = casino.round(again)
    assert (voided.status, voided.faults) == ("voided", 2)  # its rules: void after two
    assert verified(node).startswith("OK")


def test_refusals_name_the_games_own_moves(node: Node, casino: Casino, tmp_path: Path) -> None:
    rng = RngServer(tmp_path / "seeds")
    table, player = table_of(casino, "rng")
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    with pytest.raises(
        InvalidCommandError, match=r"dealer may not close_betting now \(dealer may no_more_bets\)"
    ):
        casino.act(request_id="x", round_id=round_id, actor="dealer", action="close_betting")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "ga"}, stake=100
    )
    casino.close_betting(request_id="c", round_id=round_id)
    # At an RNG table the misthrow is nobody's move: not offered, refused, not named.
    with pytest.raises(InvalidCommandError, match=r"\(dealer may lac\)$") as late:
        casino.place_bet(
            request_id="late", round_id=round_id, account_id=player, bet={"bet": "ga"}, stake=10
        )
    assert "misthrow" not in str(late.value)
    with pytest.raises(InvalidCommandError, match="an RNG draw is never faulty"):
        casino.act(
            request_id="m",
            round_id=round_id,
            actor="dealer",
            action="misthrow",
            args={"reason": "cocked"},
        )
    drawn = casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    assert set(drawn) == {"dice"} and all(1 <= d <= 6 for d in drawn["dice"])
    assert [name for name, _ in actions_of(node, round_id)] == ["no_more_bets", "lac"]
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    assert "1 RNG dice draws recomputed" in verified(node)


def test_a_device_reporting_a_value_outside_the_declared_range_is_refused(
    node: Node, casino: Casino
) -> None:
    device = dealer_device(node)
    table, _ = table_of(casino, "physical")
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.close_betting(request_id="c", round_id=round_id)
    report = device.act(round_id, 1, "dealer", "lac", {}, [1, 7, 2])
    with pytest.raises(InvalidCommandError, match=r"lac draws 3 dice \(1\.\.6\), got \[1, 7, 2\]"):
        casino.act(request_id="l", round_id=round_id, actor="dealer", action="lac", source=report)
    outcome = {"dice": [0, 3, 4]}  # as an outcome, to the outcome alias: refused alike
    with pytest.raises(InvalidCommandError, match=r"lac draws 3 dice \(1\.\.6\)$"):
        casino.record_outcome(
            request_id="o",
            round_id=round_id,
            outcome=outcome,
            source=device.throw(round_id, 0, outcome),
        )
    assert [name for name, _ in actions_of(node, round_id)] == ["no_more_bets"]


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    tokens = TokenStore(node.keys.path)
    games = {**all_games(), **GAMES}
    service = Service(node.app, games, RngServer(tmp_path / "seeds"), tokens)
    found = Api(node, service, InThreadClient(create_app(service)))
    for role in ApiRole:
        if role is not ApiRole.TABLE_DEVICE:
            found.tokens[role.value], _ = tokens.create(role)
    return found


def test_http_plays_it_through_the_aliases_and_act(api: Api) -> None:
    device = dealer_device(api.node)
    # A physical table: /close-betting, /faults (its misthrow), /outcome (its lac).
    table = api.table("bau-cua")
    round_id = api.round(table)
    bet = {"account_id": api.wallet(1_000), "bet": {"bet": "nai"}, "stake": 100}
    api.ok(f"/v1/rounds/{round_id}/bets", bet)
    assert api.ok(f"/v1/rounds/{round_id}/close-betting") == {"closed": round_id}
    refused = api.post(f"/v1/rounds/{round_id}/draw")  # no seed: a physical table
    assert refused.status_code == 400 and "a physical table" in refused.text, refused.text
    fault = {
        "reason": "the bowl lifted early",
        "source": device.fault(round_id, 0, "the bowl lifted early"),
    }
    assert api.ok(f"/v1/rounds/{round_id}/faults", fault) == {
        "fault": {"faults": 1, "then": "throw again"}
    }
    outcome = {"dice": [6, 6, 6]}
    report = device.throw(round_id, 1, outcome)
    api.ok(f"/v1/rounds/{round_id}/outcome", {"outcome": outcome, "source": report})
    view = api.get(f"/v1/rounds/{round_id}").json()
    assert view["status"] == "settled" and view["faults"] == 1
    assert [r["returned"] for r in view["results"]] == [400]  # three deer: 100 + 3 * 100
    # An RNG table: /draw is its lac; /act of the misthrow is refused there.
    rng_table = api.table("bau-cua", kind="rng")
    api.ok(f"/v1/tables/{rng_table}/seeds")
    rng_round = api.round(rng_table)
    api.ok(f"/v1/rounds/{rng_round}/close-betting")
    misthrow = {"actor": "dealer", "action": "misthrow", "args": {"reason": "cocked"}}
    refused = api.post(f"/v1/rounds/{rng_round}/act", misthrow)
    assert refused.status_code == 400 and "never faulty" in refused.text, refused.text
    drawn = api.ok(f"/v1/rounds/{rng_round}/draw")["drawn"]
    assert set(drawn) == {"dice"} and len(drawn["dice"]) == 3
    assert api.get(f"/v1/rounds/{rng_round}").json()["status"] == "settled"


# `ledger simulate` and `ledger verify`, with the plugin installed as a third party's.


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_plugin(PLUGIN, tmp_path_factory)


def ledger(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(site), str(HERE.parent)]),
        LEDGER_PASSPHRASE=PASSPHRASE.decode(),
    )
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_simulate_plays_and_verify_re_settles_it(site: Path, tmp_path: Path) -> None:
    store = ["--store", f"sqlite:///{tmp_path / 'ledger.db'}", "--keys", str(tmp_path / "keys")]
    argv = ("--game", "bau-cua", "--tables", "2", "--rounds", "40", "--players", "6")
    run = ledger(site, *store, "simulate", *argv, "--fault-rate", "40", "--seed", "3")
    assert run.returncode == 0, run.stderr
    faults = re.search(r"faulty draws: (\d+)", run.stdout)
    assert faults and int(faults[1]) > 0, run.stdout  # misthrows at the physical table
    assert re.search(r"^OK: \d+ events in .* at level settlement", run.stdout, re.M), run.stdout
    checked = ledger(site, *store, "verify", "--level", "settlement")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("OK"), checked.stdout


def test_verify_catches_a_move_marked_a_fault_the_game_does_not_call_one(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that records a move as a faulty draw (its source's mark) when the
    game's fault is another move: `ledger verify` reads the game's declaration."""
    device = dealer_device(node)
    table, _ = table_of(casino, "physical")
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.close_betting(request_id="c", round_id=round_id)
    record = Round.record_action

    def marked(self: Round, action: Any, source: dict[str, Any], step: Any) -> int:
        return record(self, action, {**source, FAULT_MARK: True}, step)

    monkeypatch.setattr(Round, "record_action", marked)
    report = device.act(round_id, 1, "dealer", "lac", {}, [1, 2, 3])
    casino.act(request_id="l", round_id=round_id, actor="dealer", action="lac", source=report)
    monkeypatch.undo()
    assert [source.get("fault") for _, source in actions_of(node, round_id)] == [None, True]
    with pytest.raises(VerificationError, match="lac is recorded as a faulty draw, but the game"):
        verified(node)
