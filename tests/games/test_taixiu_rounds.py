"""The installed Tài Xỉu plugin through the casino: settlement by the seed's
paytable, and each profile's faulty-dice policy (docs/rules.md §1.2)."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.cli.main import main
from ledger.domain.round_records import BETTING, CLOSED, SETTLED, VOIDED
from ledger.errors import InvalidCommandError, VerificationError
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from tests.casino_support import event_count, seen, seen_faulty

LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}


@pytest.fixture
def games() -> Any:
    found = get_plugin_manager().games()
    assert {"taixiu", "sicbo-void"} <= set(found), "the taixiu plugin is not installed"
    return found


def table_with_players(
    casino: Casino, game_id: str, kind: str = "physical"
) -> tuple[str, list[str]]:
    players = []
    for name in ("an", "binh"):
        account = casino.open_account(request_id=f"acc-{name}", owner=name, currency="VND")
        casino.deposit(request_id=f"dep-{name}", account_id=account, amount=100_000)
        players.append(account)
    table = casino.open_table(
        request_id="table",
        name="TX1",
        game=game_id,
        kind=kind,
        currency="VND",
        limits=LIMITS,
    )
    return table, players


def test_a_taixiu_round_pays_the_seed_paytable(node: Node, games: Any) -> None:
    casino = Casino(node.app, games)
    table, (an, binh) = table_with_players(casino, "taixiu")
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D1")
    bets = [
        (an, "small", 1_000),  # 1-2-3 is small: 1:1
        (an, "single:2", 500),  # one 2: 1:1
        (binh, "big", 1_000),  # loses
        (binh, "combination:1-3", 200),  # 5:1
        (binh, "total:6", 100),  # 14:1
        (an, "any_triple", 100),  # loses
    ]
    for i, (who, bet, stake) in enumerate(bets):
        casino.place_bet(
            request_id=f"b{i}", round_id=round_id, account_id=who, bet={"bet": bet}, stake=stake
        )
    casino.close_betting(request_id="c", round_id=round_id)
    casino.record_outcome(
        request_id="o",
        round_id=round_id,
        outcome={"dice": [3, 1, 2]},
        source=seen(node, casino, round_id, {"dice": [3, 1, 2]}),
    )
    returned = sorted(r["returned"] for r in casino.round(round_id).results)
    assert returned == sorted([2_000, 1_000, 0, 1_200, 1_500, 0])
    assert casino.account(an).balance == 100_000 - 1_600 + 3_000
    assert casino.account(binh).balance == 100_000 - 1_300 + 2_700
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=games)
    )
    assert report.resettled == 1


def test_taixiu_locks_bets_after_a_fault_and_voids_on_the_second(node: Node, games: Any) -> None:
    casino = Casino(node.app, games)
    table, (an, binh) = table_with_players(casino, "taixiu")
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D1")
    bet = casino.place_bet(
        request_id="b1", round_id=round_id, account_id=an, bet={"bet": "big"}, stake=2_000
    )
    casino.place_bet(
        request_id="b2", round_id=round_id, account_id=binh, bet={"bet": "small"}, stake=3_000
    )
    casino.close_betting(request_id="c", round_id=round_id)
    first = casino.record_fault(
        request_id="f1",
        round_id=round_id,
        reason="die not flat",
        source=seen_faulty(node, casino, round_id, "die not flat"),
    )
    assert first == {"faults": 1, "then": "throw again"}
    assert casino.round(round_id).status == CLOSED
    count = event_count(node.app)
    with pytest.raises(
        InvalidCommandError,
        match=r"is not taking bets \(it is closed\): a player may not withdraw a bet",
    ):
        casino.withdraw_bet(request_id="w", round_id=round_id, account_id=an, bet_id=bet)
    with pytest.raises(InvalidCommandError, match="a player may not place a bet now"):
        casino.place_bet(
            request_id="b3", round_id=round_id, account_id=an, bet={"bet": "small"}, stake=100
        )
    assert event_count(node.app) == count
    second = casino.record_fault(
        request_id="f2",
        round_id=round_id,
        reason="dice stacked",
        source=seen_faulty(node, casino, round_id, "dice stacked"),
    )
    assert second == {"faults": 2, "then": "voided"}
    assert casino.round(round_id).status == VOIDED
    assert [casino.account(a).balance for a in (an, binh)] == [100_000, 100_000]
    verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=games))


def test_sicbo_void_reopens_betting_and_voids_after_three_faults(node: Node, games: Any) -> None:
    casino = Casino(node.app, games)
    table, (an, binh) = table_with_players(casino, "sicbo-void")
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D1")
    bet = casino.place_bet(
        request_id="b1", round_id=round_id, account_id=an, bet={"bet": "big"}, stake=2_000
    )
    casino.close_betting(request_id="c1", round_id=round_id)
    assert (
        casino.record_fault(
            request_id="f1",
            round_id=round_id,
            reason="one bounce",
            source=seen_faulty(node, casino, round_id, "one bounce"),
        )["then"]
        == "betting reopened"
    )
    assert casino.round(round_id).status == BETTING
    casino.withdraw_bet(request_id="w1", round_id=round_id, account_id=an, bet_id=bet)
    casino.place_bet(
        request_id="b2",
        round_id=round_id,
        account_id=binh,
        bet={"bet": "specific_triple:6"},
        stake=100,
    )
    for n in (2, 3):
        casino.close_betting(request_id=f"c{n}", round_id=round_id)
        outcome = casino.record_fault(
            request_id=f"f{n}",
            round_id=round_id,
            reason="cocked",
            source=seen_faulty(node, casino, round_id, "cocked"),
        )
        assert outcome["faults"] == n
    assert outcome["then"] == "voided"
    assert [casino.account(a).balance for a in (an, binh)] == [100_000, 100_000]


def test_a_good_throw_after_a_fault_settles(node: Node, games: Any) -> None:
    casino = Casino(node.app, games)
    table, (an, _) = table_with_players(casino, "taixiu")
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D1")
    casino.place_bet(
        request_id="b1",
        round_id=round_id,
        account_id=an,
        bet={"bet": "specific_triple:6"},
        stake=100,
    )
    casino.close_betting(request_id="c", round_id=round_id)
    casino.record_fault(
        request_id="f1",
        round_id=round_id,
        reason="not flat",
        source=seen_faulty(node, casino, round_id, "not flat"),
    )
    casino.record_outcome(
        request_id="o",
        round_id=round_id,
        outcome={"dice": [6, 6, 6]},
        source=seen(node, casino, round_id, {"dice": [6, 6, 6]}),
    )
    assert casino.round(round_id).status == SETTLED
    assert casino.account(an).balance == 100_000 - 100 + 15_100


@pytest.mark.parametrize(
    "dice", [[0, 1, 2], [1, 2, 7], [1, 2], [1, 2, 3, 4], [1.0, 2, 3], [True, 2, 3], "123"]
)
def test_bad_dice_are_refused_and_record_nothing(node: Node, games: Any, dice: Any) -> None:
    casino = Casino(node.app, games)
    table, (an, _) = table_with_players(casino, "taixiu")
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D1")
    casino.place_bet(
        request_id="b1", round_id=round_id, account_id=an, bet={"bet": "big"}, stake=100
    )
    casino.close_betting(request_id="c", round_id=round_id)
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError):
        casino.record_outcome(
            request_id="o",
            round_id=round_id,
            outcome={"dice": dice},
            source=seen(node, casino, round_id, {"dice": [1, 2, 3]}),
        )
    assert event_count(node.app) == count


def test_a_throw_for_a_round_not_awaiting_one_is_refused(node: Node, games: Any) -> None:
    casino = Casino(node.app, games)
    table, (an, _) = table_with_players(casino, "taixiu")
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D1")
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="is not awaiting an outcome"):
        casino.record_outcome(
            request_id="o", round_id=round_id, outcome={"dice": [1, 2, 3]}, source={}
        )
    with pytest.raises(InvalidCommandError, match="nobody may fault now"):
        casino.record_fault(request_id="f", round_id=round_id, reason="x", source={})
    with pytest.raises(InvalidCommandError, match="unknown bet"):
        casino.place_bet(
            request_id="b",
            round_id=round_id,
            account_id=an,
            bet={"bet": "total:3"},
            stake=100,
        )
    assert event_count(node.app) == count


def settled_round(
    node: Node, casino: Casino, players: list[str], table: str, dice: list[int]
) -> str:
    an, binh = players
    round_id = casino.open_round(request_id="r-c", table_id=table, dealer="D1")
    casino.place_bet(
        request_id="bc1", round_id=round_id, account_id=an, bet={"bet": "small"}, stake=1_000
    )
    casino.place_bet(
        request_id="bc2", round_id=round_id, account_id=binh, bet={"bet": "big"}, stake=2_000
    )
    casino.close_betting(request_id="cc", round_id=round_id)
    casino.record_outcome(
        request_id="oc",
        round_id=round_id,
        outcome={"dice": dice},
        source=seen(node, casino, round_id, {"dice": dice}),
    )
    return round_id


def test_a_correction_reverses_and_resettles(node: Node, games: Any) -> None:
    from ledger.crypto.keys import Role
    from tests.conftest import PASSPHRASE

    casino = Casino(node.app, games)
    table, players = table_with_players(casino, "taixiu")
    round_id = settled_round(
        node, casino, players, table, [1, 2, 3]
    )  # recorded wrongly: small wins
    assert [casino.account(a).balance for a in players] == [101_000, 98_000]
    node.keys.create("op", Role.OPERATOR, PASSPHRASE)
    operator = node.keys.signer(Role.OPERATOR, PASSPHRASE)
    results = casino.correct(
        request_id="fix",
        round_id=round_id,
        outcome={"dice": [4, 5, 6]},
        reason="the camera shows 4-5-6",
        operator=operator,
    )
    assert {r["returned"] for r in results} == {0, 4_000}
    assert [casino.account(a).balance for a in players] == [99_000, 102_000]
    game = casino.round(round_id)
    assert game.log[-1]["action"]["drawn"] == [4, 5, 6] and game.status == SETTLED
    house = casino.account(casino.table(table).house_account)
    assert house.balance == 1_000 - 2_000  # now takes the small stake, pays the big win
    keyring = node.keys.keyring()  # with the operator key made after the node opened
    report = verify_store(node.app, keyring, VerifyOptions(level=Level.SETTLEMENT, games=games))
    assert report.resettled == 2  # the settlement and its correction, each re-derived


def test_a_correction_needs_an_operator_key(node: Node, games: Any) -> None:
    from ledger.crypto.keys import Role
    from tests.conftest import PASSPHRASE

    casino = Casino(node.app, games)
    table, players = table_with_players(casino, "taixiu")
    round_id = settled_round(node, casino, players, table, [1, 2, 3])
    node.keys.create("dealer", Role.DEALER_DEVICE, PASSPHRASE)
    dealer = node.keys.signer(Role.DEALER_DEVICE, PASSPHRASE, name="dealer")
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="is not an operator key"):
        casino.correct(
            request_id="fix",
            round_id=round_id,
            outcome={"dice": [4, 5, 6]},
            reason="x",
            operator=dealer,
        )
    assert event_count(node.app) == count


# Fault policies re-derived by verify from the events and the round's own rules
# data: a buggy node that breaks them, with valid signatures, is caught.


def faulty_round(node: Node, casino: Casino, game_id: str, faults: int) -> tuple[str, list[str]]:
    table, players = table_with_players(casino, game_id)
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D1")
    casino.place_bet(
        request_id="b1", round_id=round_id, account_id=players[0], bet={"bet": "big"}, stake=500
    )
    for n in range(faults):
        if casino.round(round_id).status == BETTING:
            casino.close_betting(request_id=f"c{n}", round_id=round_id)
        casino.record_fault(
            request_id=f"f{n}",
            round_id=round_id,
            reason="cocked",
            source=seen_faulty(node, casino, round_id, "cocked"),
        )
    return round_id, players


def policy_broken(node: Node, games: Any, *needles: str) -> None:
    with pytest.raises(VerificationError) as caught:
        verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=games))
    for needle in needles:
        assert needle in str(caught.value), str(caught.value)


@pytest.mark.parametrize(("game_id", "faults"), [("taixiu", 2), ("sicbo-void", 3)])
def test_verify_rederives_the_fault_policy(
    node: Node, games: Any, game_id: str, faults: int
) -> None:
    casino = Casino(node.app, games)
    round_id, _ = faulty_round(node, casino, game_id, faults)
    assert casino.round(round_id).status == VOIDED
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=games)
    )
    assert report.settlement is not None
    assert (report.settlement.rounds, report.settlement.faults) == (1, faults)
    assert report.settlement.device_reports == faults
    assert f"1 rounds re-derived (step order, voids, fault policy: {faults} faulty draws)" in (
        report.summary()
    )


def test_attack_taixiu_reopens_betting_after_a_fault(
    node: Node, games: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, games)
    monkeypatch.setattr(games["taixiu"].game, "reopens", True)
    round_id, (an, _) = faulty_round(node, casino, "taixiu", 1)
    assert casino.round(round_id).status == BETTING  # the node reopened it
    casino.place_bet(
        request_id="late", round_id=round_id, account_id=an, bet={"bet": "small"}, stake=100
    )
    monkeypatch.undo()
    policy_broken(
        node,
        games,
        f"round {round_id} (taixiu): betting reopened after a faulty draw",
        "its game kept bets locked after the faulty draw",
    )


def test_attack_sicbo_void_voids_after_two_faults(
    node: Node, games: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, games)
    monkeypatch.setattr(games["sicbo-void"].game, "void_after", 2)
    round_id, _ = faulty_round(node, casino, "sicbo-void", 2)
    assert casino.round(round_id).status == VOIDED
    monkeypatch.undo()
    policy_broken(
        node,
        games,
        f"round {round_id} (sicbo-void): betting kept locked after a faulty draw",
        "its game reopened betting after the faulty draw",
    )


def test_attack_taixiu_throws_a_third_time(
    node: Node, games: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, games)
    monkeypatch.setattr(games["taixiu"].game, "void_after", 99)
    round_id, _ = faulty_round(node, casino, "taixiu", 2)
    casino.record_outcome(
        request_id="o",
        round_id=round_id,
        outcome={"dice": [4, 5, 6]},
        source=seen(node, casino, round_id, {"dice": [4, 5, 6]}),
    )
    monkeypatch.undo()
    policy_broken(
        node, games, f"round {round_id} (taixiu): throw after 2 faulty draws: its rules void"
    )


def test_attack_sicbo_void_throws_again_without_reopening(
    node: Node, games: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, games)
    monkeypatch.setattr(games["sicbo-void"].game, "reopens", False)
    round_id, _ = faulty_round(node, casino, "sicbo-void", 1)
    casino.record_outcome(
        request_id="o",
        round_id=round_id,
        outcome={"dice": [4, 5, 6]},
        source=seen(node, casino, round_id, {"dice": [4, 5, 6]}),
    )
    monkeypatch.undo()
    policy_broken(
        node,
        games,
        f"round {round_id} (sicbo-void): betting kept locked after a faulty draw, but its "
        "rules say: its game reopened betting",
    )


def test_the_policy_comes_from_the_rounds_rules_data_not_its_name(node: Node, games: Any) -> None:
    casino = Casino(node.app, games)
    round_id, _ = faulty_round(node, casino, "taixiu", 1)

    # The same id, version and rules hash, but a game whose step reopens betting:
    # verify asks the game it is given, so the honest round fails.
    game = copy.copy(games["taixiu"].game)
    game.reopens = True
    lying = {**games, "taixiu": dataclasses.replace(games["taixiu"], game=game)}
    casino.record_outcome(
        request_id="o",
        round_id=round_id,
        outcome={"dice": [4, 5, 6]},
        source=seen(node, casino, round_id, {"dice": [4, 5, 6]}),
    )
    verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=games))
    policy_broken(
        node, lying, f"round {round_id} (taixiu): betting kept locked after a faulty draw"
    )


def test_verify_without_the_rounds_plugin_cannot_check(
    node: Node, games: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    casino = Casino(node.app, games)
    round_id, _ = faulty_round(node, casino, "taixiu", 2)
    monkeypatch.setenv("LEDGER_PLUGINS_BLOCK", "taixiu")
    code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), "verify"])
    out, err = capsys.readouterr()
    assert code == 3  # cannot re-derive: its own exit code
    assert out.startswith("FAILED: 1 finding (1 not-checked)")
    assert err.count("\n") == 1 and "OK" not in err
    assert f"cannot re-settle round {round_id}: it opened with taixiu" in err
    assert "installed: none; plugins blocked by LEDGER_PLUGINS_BLOCK: taixiu" in err
    monkeypatch.delenv("LEDGER_PLUGINS_BLOCK")
    assert main(["--store", node.app.store_url, "--keys", str(node.keys.path), "verify"]) == 0
