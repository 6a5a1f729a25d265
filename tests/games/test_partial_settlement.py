"""Settlement API 2 through the casino: actions recorded as `Round.ActionRecorded`,
bets settled a few at a time by step-indexed `Round.Settled`, cards dealt from
the round's committed deck (RNG) or a dealer device's signed report (physical),
and `verify` re-deriving all of it, on both stores."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino, attestation
from ledger.domain.round_records import SETTLED
from ledger.errors import InvalidCommandError, VerificationError
from ledger.node import Node
from ledger.plugins import hookimpl
from ledger.plugins.contract import GameContract
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import GameRegistry
from ledger.rng.deck import shuffled_deck
from ledger.rng.dice import throw
from ledger.rng.server import RngServer
from tests.casino_support import dealer_device, event_count, table_of
from tests.high_card import HighCard, HighCardPlugin, high_card_games, rank
from tests.installed import installed_games

LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}
GAMES = high_card_games()


class TestHighCardContract(GameContract):
    plugin: ClassVar[Any] = HighCardPlugin()
    plugin_name = "high-card"


def players(casino: Casino, table: str) -> tuple[str, str, str]:
    """Two players with 10 000 each, and a round on `table` with three bets:
    ann on seat 1 (1 000) and on seat 2 (500), bob on seat 1 (300)."""
    ann = casino.open_account(request_id="ann", owner="ann", currency="VND")
    bob = casino.open_account(request_id="bob", owner="bob", currency="VND")
    for who in (ann, bob):
        casino.deposit(request_id=f"dep-{who}", account_id=who, amount=10_000)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    for i, (who, seat, stake) in enumerate(((ann, 1, 1_000), (ann, 2, 500), (bob, 1, 300))):
        casino.place_bet(
            request_id=f"b{i}",
            round_id=round_id,
            account_id=who,
            bet={"bet": f"seat:{seat}"},
            stake=stake,
        )
    return ann, bob, round_id


def pays(card: int, dealer: int, stake: int) -> int:
    return 2 * stake if rank(card) > rank(dealer) else stake if card // 4 == dealer // 4 else 0


def test_rng_cards_settle_seat_by_seat_and_verify(node: Node, tmp_path: Any) -> None:
    casino = Casino(node.app, GAMES)
    rng = RngServer(tmp_path / "seeds")
    table = casino.open_table(
        request_id="t", name="HC", game="high-card", kind="rng", currency="VND", limits=LIMITS
    )
    seed_id = casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    ann, bob, round_id = players(casino, table)
    deck = shuffled_deck(rng.seed(seed_id), round_id)

    casino.act(request_id="a0", round_id=round_id, actor="dealer", action="close_betting")
    dealt = casino.act(request_id="a1", round_id=round_id, actor="dealer", action="deal", rng=rng)
    assert dealt["drawn"] == [deck[0]] and dealt["settled"] == []
    # Seat 1 draws: its two bets (ann's and bob's) settle now, seat 2's stays standing.
    first = casino.act(request_id="a2", round_id=round_id, actor="seat:1", action="draw", rng=rng)
    assert first["drawn"] == [deck[1]] and not first["over"]
    assert sorted(r["stake"] for r in first["settled"]) == [300, 1_000]
    for result in first["settled"]:
        assert result["returned"] == pays(deck[1], deck[0], result["stake"])
    game_round = casino.round(round_id)
    assert game_round.status != SETTLED and len(game_round.settled_bets) == 2
    assert casino.account(bob).balance == 10_000 - 300 + pays(deck[1], deck[0], 300)
    # Seat 2 surrenders: half its stake back, and the round is over.
    last = casino.act(request_id="a3", round_id=round_id, actor="seat:2", action="surrender")
    assert last["over"] and [r["returned"] for r in last["settled"]] == [250]
    assert casino.round(round_id).status == SETTLED
    assert casino.account(ann).balance == 10_000 - 1_500 + pays(deck[1], deck[0], 1_000) + 250
    # A retried request returns the first result and records nothing.
    before = event_count(node.app)
    assert (
        casino.act(request_id="a3", round_id=round_id, actor="seat:2", action="surrender") == last
    )
    assert event_count(node.app) == before

    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert report.settlement is not None and report.resettled == 2
    assert (report.settlement.rng_cards, report.settlement.rng_cards_pending) == (0, 2)
    assert "NOT CHECKED: 2 RNG card draws whose seed is not revealed yet" in report.summary()
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert report.settlement is not None
    assert (report.settlement.rng_cards, report.settlement.rng_cards_pending) == (2, 0)
    assert "2 RNG card draws recomputed from their round's shuffled deck" in report.summary()
    assert "NOT CHECKED" not in report.summary()
    assert "2 settlements re-settled" in report.summary()


def test_illegal_actions_are_refused_and_nothing_is_recorded(node: Node) -> None:
    casino = Casino(node.app, GAMES)
    table = table_of(casino, "high-card", LIMITS, currency="VND", name="HC", request_id="t")
    _, _, round_id = players(casino, table)
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="takes no arguments"):
        casino.act(
            request_id="e", round_id=round_id, actor="dealer", action="close_betting", args={"x": 1}
        )
    for actor, action in (("seat:1", "draw"), ("dealer", "deal"), ("seat:3", "stand")):
        with pytest.raises(
            InvalidCommandError, match=rf"round {round_id} \(high-card\): {actor} may not {action}"
        ):
            casino.act(request_id=f"x-{action}", round_id=round_id, actor=actor, action=action)
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    # A physical table's card comes only from a dealer device's signed report.
    with pytest.raises(InvalidCommandError, match="only from a dealer device's signed report"):
        casino.act(request_id="d", round_id=round_id, actor="dealer", action="deal")
    assert event_count(node.app) == before + 2  # only the close (and its request record)


def test_device_cards_and_a_card_dealt_twice(node: Node) -> None:
    casino = Casino(node.app, GAMES)
    device = dealer_device(node)
    table = table_of(casino, "high-card", LIMITS, currency="VND", name="HC", request_id="t")
    ann, bob, round_id = players(casino, table)
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    report = device.act(round_id, 1, "dealer", "deal", {}, [20])  # a 6 of clubs
    casino.act(request_id="d", round_id=round_id, actor="dealer", action="deal", source=report)
    before = event_count(node.app)
    again = device.act(round_id, 2, "seat:1", "draw", {}, [20])
    with pytest.raises(InvalidCommandError, match="card 20 was already dealt"):
        casino.act(request_id="s1", round_id=round_id, actor="seat:1", action="draw", source=again)
    # A report signed for another step, or altered after signing, is refused.
    stale = device.act(round_id, 1, "seat:1", "draw", {}, [51])
    with pytest.raises(InvalidCommandError, match="dealer device report refused"):
        casino.act(request_id="s2", round_id=round_id, actor="seat:1", action="draw", source=stale)
    altered = {**device.act(round_id, 2, "seat:1", "draw", {}, [0]), "drawn": [51]}
    with pytest.raises(InvalidCommandError, match="dealer device report refused"):
        casino.act(
            request_id="s3", round_id=round_id, actor="seat:1", action="draw", source=altered
        )
    assert event_count(node.app) == before
    king = device.act(round_id, 2, "seat:1", "draw", {}, [51])
    casino.act(request_id="s4", round_id=round_id, actor="seat:1", action="draw", source=king)
    two = device.act(round_id, 3, "seat:2", "draw", {}, [4])
    casino.act(request_id="s5", round_id=round_id, actor="seat:2", action="draw", source=two)
    assert casino.account(bob).balance == 10_000 + 300  # the king beats the 6
    assert casino.account(ann).balance == 10_000 + 1_000 - 500  # the 2 loses
    verified = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert verified.device_reports == 3 and verified.resettled == 2


def test_a_physical_decision_after_the_close_needs_the_devices_report(node: Node) -> None:
    """Once bets are locked, a decision (here seat 2 surrendering) at a physical
    table is what its dealer device saw and signed; the node cannot state it."""
    casino = Casino(node.app, GAMES)
    device = dealer_device(node)
    table = table_of(casino, "high-card", LIMITS, currency="VND", name="HC", request_id="t")
    _, _, round_id = players(casino, table)
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    deal = device.act(round_id, 1, "dealer", "deal", {}, [20])
    casino.act(request_id="d", round_id=round_id, actor="dealer", action="deal", source=deal)
    draw = device.act(round_id, 2, "seat:1", "draw", {}, [51])
    casino.act(request_id="s1", round_id=round_id, actor="seat:1", action="draw", source=draw)
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="surrender comes only from a dealer device"):
        casino.act(request_id="s2", round_id=round_id, actor="seat:2", action="surrender")
    assert event_count(node.app) == before
    report = device.act(round_id, 3, "seat:2", "surrender", {}, [])
    casino.act(
        request_id="s3", round_id=round_id, actor="seat:2", action="surrender", source=report
    )
    verified = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert verified.device_reports == 3


class SettlesSeatTwoEarly(HighCard):
    """A lying release (same id, same rules hash): seat 1's draw also settles seat
    2's bet, as a loss."""

    def step(self, bets: Any, actions: Any) -> Any:
        step = super().step(bets, actions)
        if actions and actions[-1]["actor"] == "seat:1":
            extra = {b: 0 for b, v in bets.items() if v["bet"]["seat"] == 2}
            return {**step, "settle": {**step["settle"], **extra}, "moves": {}, "over": True}
        return step


class PaysDouble(HighCard):
    """A lying release: a surrender returns the whole stake, not half."""

    def step(self, bets: Any, actions: Any) -> Any:
        step = super().step(bets, actions)
        if actions and actions[-1]["action"] == "surrender":
            return {**step, "settle": {b: 2 * r for b, r in step["settle"].items()}}
        return step


@pytest.mark.parametrize(
    "liar,caught",
    [
        (SettlesSeatTwoEarly, r"the game's step settles \[.*\]"),
        (PaysDouble, r"returned 500, the rules pay 250"),
    ],
)
def test_attack_a_validly_signed_settlement_of_the_wrong_bets_or_amount(
    node: Node, tmp_path: Any, liar: type[HighCard], caught: str
) -> None:
    class LyingPlugin:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(liar())

    lying = get_plugin_manager(
        load_entry_points=False, extra=[("high-card", LyingPlugin(), "1.0")]
    ).games()
    assert lying["high-card"].rules_hash == GAMES["high-card"].rules_hash
    casino = Casino(node.app, lying)
    rng = RngServer(tmp_path / "seeds")
    table = casino.open_table(
        request_id="t", name="HC", game="high-card", kind="rng", currency="VND", limits=LIMITS
    )
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    _, _, round_id = players(casino, table)
    casino.act(request_id="a0", round_id=round_id, actor="dealer", action="close_betting")
    casino.act(request_id="a1", round_id=round_id, actor="dealer", action="deal", rng=rng)
    casino.act(request_id="a2", round_id=round_id, actor="seat:1", action="draw", rng=rng)
    if casino.round(round_id).status != SETTLED:
        casino.act(request_id="a3", round_id=round_id, actor="seat:2", action="surrender")
    # Every event is sealed by the node and the money balances: only re-deriving
    # each partial settlement with the real rules catches it.
    verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=lying))
    with pytest.raises(VerificationError, match=caught):
        verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))


def test_taixiu_through_act_pays_as_before(node: Node, tmp_path: Any) -> None:
    games = get_plugin_manager().games()
    casino = Casino(node.app, games)
    rng = RngServer(tmp_path / "seeds")
    table = casino.open_table(
        request_id="t", name="TX", game="taixiu", kind="rng", currency="VND", limits=LIMITS
    )
    seed_id = casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    player = casino.open_account(request_id="p", owner="p", currency="VND")
    casino.deposit(request_id="dep", account_id=player, amount=10_000)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    for i, bet in enumerate(("big", "small", "any_triple")):
        casino.place_bet(
            request_id=f"b{i}", round_id=round_id, account_id=player, bet={"bet": bet}, stake=100
        )
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    with pytest.raises(InvalidCommandError, match="never faulty"):
        casino.act(
            request_id="f",
            round_id=round_id,
            actor="dealer",
            action="fault",
            args={"reason": "cocked"},
        )
    done = casino.act(
        request_id="throw", round_id=round_id, actor="dealer", action="throw", rng=rng
    )
    dice = list(throw(rng.seed(seed_id), round_id, 0))
    assert done["drawn"] == dice and done["over"]
    # The returns the game's paytable gives for these dice, bet by bet (as before).
    expected = games["taixiu"].step(
        {b: dict(v) for b, v in casino.round(round_id).bets.items()},  # type: ignore[misc]
        [
            {"actor": "dealer", "action": "close_betting", "args": {}, "drawn": []},
            {"actor": "dealer", "action": "throw", "args": {}, "drawn": dice},
        ],
    )["settle"]
    assert {r["bet_id"]: r["returned"] for r in done["settled"]} == expected
    assert casino.account(player).balance == 10_000 - 300 + sum(expected.values())
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=installed_games())
    )
    assert (report.rng_dice, report.resettled) == (1, 1)


def test_attack_a_node_dealing_cards_not_from_the_committed_deck(
    node: Node, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The node itself (with its signing key) deals from another deck: every event
    is validly sealed, and verify recomputes the deck once the seed is revealed."""

    casino = Casino(node.app, GAMES)
    rng = RngServer(tmp_path / "seeds")
    table = casino.open_table(
        request_id="t", name="HC", game="high-card", kind="rng", currency="VND", limits=LIMITS
    )
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    _, _, round_id = players(casino, table)
    honest = attestation.shuffled_deck
    dealt: list[int] = []

    def rotated(seed: bytes, rid: str) -> list[int]:
        # Rotated by one, the deck differs from the committed one at every position.
        deck = honest(seed, rid)
        dealt[:] = [*deck[1:], deck[0]]
        return list(dealt)

    monkeypatch.setattr(attestation, "shuffled_deck", rotated)
    casino.act(request_id="a0", round_id=round_id, actor="dealer", action="close_betting")
    casino.act(request_id="a1", round_id=round_id, actor="dealer", action="deal", rng=rng)
    casino.act(request_id="a2", round_id=round_id, actor="seat:1", action="draw", rng=rng)
    casino.act(request_id="a3", round_id=round_id, actor="seat:2", action="surrender")
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    wrong = rf"round {round_id}: cards \[{dealt[0]}\] at deck positions \[0\]"
    with pytest.raises(VerificationError, match=wrong):
        verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))


def test_attack_a_card_report_the_device_did_not_sign(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that skips the device check records an altered report: verify checks
    the device's signature over the action it names."""
    casino = Casino(node.app, GAMES)
    device = dealer_device(node)
    table = table_of(casino, "high-card", LIMITS, currency="VND", name="HC", request_id="t")
    _, _, round_id = players(casino, table)
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    monkeypatch.setattr(attestation, "check_device", lambda context, source, fact: None)
    altered = {**device.act(round_id, 1, "dealer", "deal", {}, [0]), "drawn": [51]}
    casino.act(request_id="d", round_id=round_id, actor="dealer", action="deal", source=altered)
    with pytest.raises(VerificationError, match="bad dealer-device signature"):
        verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))


def test_taixiu_device_faults_through_act_follow_its_policy(node: Node) -> None:
    """Two faulty throws reported by the device void a taixiu round (its rules),
    every stake back; verify re-derives the void from the recorded actions."""
    casino = Casino(node.app, get_plugin_manager().games())
    device = dealer_device(node)
    table = casino.open_table(
        request_id="t", name="TX", game="taixiu", kind="physical", currency="VND", limits=LIMITS
    )
    player = casino.open_account(request_id="p", owner="p", currency="VND")
    casino.deposit(request_id="dep", account_id=player, amount=10_000)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "big"}, stake=700
    )
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    with pytest.raises(InvalidCommandError, match="only from a dealer device's signed report"):
        casino.act(
            request_id="f0",
            round_id=round_id,
            actor="dealer",
            action="fault",
            args={"reason": "cocked"},
        )
    for step in (1, 2):
        report = device.act(round_id, step, "dealer", "fault", {"reason": "cocked"}, [])
        done = casino.act(
            request_id=f"f{step}",
            round_id=round_id,
            actor="dealer",
            action="fault",
            args={"reason": "cocked"},
            source=report,
        )
    assert done["void"] and done["over"]
    assert [r["returned"] for r in done["settled"]] == [700]
    assert casino.account(player).balance == 10_000
    verified = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=installed_games())
    )
    assert verified.device_reports == 2 and verified.settlement is not None
    assert verified.settlement.faults == 2
