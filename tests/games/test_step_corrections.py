"""Step corrections (settlement API 2, physical tables): an operator-signed
correction of what a dealer device misread at one action; the round is replayed
with the corrected draw, every settlement from that action on reversed with
compensating postings and re-settled, in one save; `verify` re-derives it."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.domain.money import in_play, wallet
from ledger.domain.round import Round
from ledger.domain.round_records import SETTLED
from ledger.errors import InvalidCommandError, VerificationError
from ledger.node import Node
from ledger.plugins import hookimpl
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import GameRegistry
from ledger.rng.server import RngServer
from tests.casino_support import (
    dealer_device,
    domain_events,
    event_count,
    operator_signer,
    table_of,
)
from tests.high_card import HighCard, high_card_games

LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}
GAMES = high_card_games()


def played(node: Node, casino: Casino) -> tuple[str, str, str, str]:
    """A physical high-card round, every card from the dealer device: the dealer's
    6 of clubs (card 20, action 1), seat 1 a king (51, action 2: ann's 1 000 and
    bob's 300 win), seat 2 a two (4, action 3: ann's 500 loses)."""
    device = dealer_device(node)
    table = table_of(casino, "high-card", LIMITS, currency="VND", name="HC", request_id="t")
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
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    for n, (actor, action, card) in enumerate(
        (("dealer", "deal", 20), ("seat:1", "draw", 51), ("seat:2", "draw", 4)), start=1
    ):
        report = device.act(round_id, n, actor, action, {}, [card])
        casino.act(request_id=f"a{n}", round_id=round_id, actor=actor, action=action, source=report)
    assert casino.round(round_id).status == SETTLED
    return table, ann, bob, round_id


def test_a_step_correction_reverses_every_later_settlement_and_verify_rederives_it(
    node: Node,
) -> None:
    casino = Casino(node.app, GAMES)
    table, ann, bob, round_id = played(node, casino)
    house = casino.table(table).house_account
    assert [casino.account(a).balance for a in (ann, bob)] == [10_500, 10_300]
    # The dealer's card was the king of clubs (48), misread as the 6: seat 1's
    # king of spades now pushes (same rank), seat 2's two still loses.
    results = casino.correct_step(
        request_id="fix",
        round_id=round_id,
        step=1,
        drawn=[48],
        reason="the camera shows the king of clubs",
        operator=operator_signer(node),
    )
    assert sorted(r["returned"] for r in results) == [0, 300, 1_000]
    assert [casino.account(a).balance for a in (ann, bob)] == [9_500, 10_000]
    assert casino.account(house).balance == 500  # keeps seat 2's stake, pays nothing
    game_round = casino.round(round_id)
    assert game_round.log[1]["action"]["drawn"] == [48] and game_round.status == SETTLED
    # One event, reversing the two settlements of actions 2 and 3 and re-settling.
    (corrected,) = [e for _, e in domain_events(node.app) if isinstance(e, Round.Corrected)]
    assert corrected.step == 1
    assert (corrected.wrong_outcome, corrected.right_outcome) == ({"cards": [20]}, {"cards": [48]})
    assert len(corrected.reversed_results) == 3 and sorted(corrected.settled_at.values()) == [
        2,
        2,
        3,
    ]
    totals: dict[str, int] = {}
    for leg in corrected.postings:
        totals[leg["account"]] = totals.get(leg["account"], 0) + leg["amount"]
    assert totals.get(in_play(round_id), 0) == 0 and sum(totals.values()) == 0
    assert totals[wallet(bob)] == -300  # gives back the win it no longer has
    # A retry records nothing and returns the first result.
    before = event_count(node.app)
    again = casino.correct_step(
        request_id="fix",
        round_id=round_id,
        step=1,
        drawn=[48],
        reason="the camera shows the king of clubs",
        operator=operator_signer(node),
    )
    assert again == results and event_count(node.app) == before
    report = verify_store(
        node.app, node.keys.keyring(), VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert report.resettled == 3  # two step settlements and the correction


@pytest.mark.parametrize(
    ("step", "drawn", "refused"),
    [
        (1, [51], "a card would be dealt twice"),
        (1, [20], "the corrected draw is the one already recorded"),
        (1, [52], r"bad correction: action 1 draws 1 cards \(0\.\.51\), got \[52\]"),
        (1, [3, 4], "bad correction"),
        (0, [1], "action 0 drew nothing to correct"),
        (7, [1], "has no action number 7"),
    ],
)
def test_a_bad_step_correction_is_refused_and_nothing_recorded(
    node: Node, step: int, drawn: list[int], refused: str
) -> None:
    casino = Casino(node.app, GAMES)
    _, ann, bob, round_id = played(node, casino)
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match=refused):
        casino.correct_step(
            request_id="fix",
            round_id=round_id,
            step=step,
            drawn=drawn,
            reason="misread",
            operator=operator_signer(node),
        )
    assert event_count(node.app) == before
    assert [casino.account(a).balance for a in (ann, bob)] == [10_500, 10_300]


def test_a_step_correction_needs_an_operator_key(node: Node) -> None:
    casino = Casino(node.app, GAMES)
    _, _, _, round_id = played(node, casino)
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="is not an operator key"):
        casino.correct_step(
            request_id="fix",
            round_id=round_id,
            step=1,
            drawn=[48],
            reason="misread",
            operator=dealer_device(node).signer,
        )
    assert event_count(node.app) == before


def test_a_step_correction_is_refused_on_an_rng_table(node: Node, tmp_path: Any) -> None:
    casino = Casino(node.app, GAMES)
    rng = RngServer(tmp_path / "seeds")
    table = casino.open_table(
        request_id="t", name="HC", game="high-card", kind="rng", currency="VND", limits=LIMITS
    )
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    ann = casino.open_account(request_id="ann", owner="ann", currency="VND")
    casino.deposit(request_id="dep", account_id=ann, amount=10_000)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=ann, bet={"bet": "seat:1"}, stake=100
    )
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    casino.act(request_id="d", round_id=round_id, actor="dealer", action="deal", rng=rng)
    casino.act(request_id="s", round_id=round_id, actor="seat:1", action="draw", rng=rng)
    assert casino.round(round_id).status == SETTLED
    dealt = casino.round(round_id).log[1]["action"]["drawn"]
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="an RNG result is computed, never corrected"):
        casino.correct_step(
            request_id="fix",
            round_id=round_id,
            step=1,
            drawn=[0 if dealt != [0] else 1],
            reason="we prefer another card",
            operator=operator_signer(node),
        )
    assert event_count(node.app) == before


class PaysDoubleOnAPush(HighCard):
    """A lying release (same id, same rules hash): a draw of the dealer's rank
    returns twice the stake instead of the stake."""

    def step(self, bets: Any, actions: Any) -> Any:
        step = super().step(bets, actions)
        if actions and actions[-1]["action"] == "draw":
            settle = {b: 2 * r if r == bets[b]["stake"] else r for b, r in step["settle"].items()}
            return {**step, "settle": settle}
        return step


def test_attack_a_correction_re_settled_by_a_lying_release(node: Node) -> None:
    class LyingPlugin:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(PaysDoubleOnAPush())

    lying = get_plugin_manager(
        load_entry_points=False, extra=[("high-card", LyingPlugin(), "1.0")]
    ).games()
    assert lying["high-card"].rules_hash == GAMES["high-card"].rules_hash
    _, _, _, round_id = played(node, Casino(node.app, GAMES))  # played honestly: no push
    Casino(node.app, lying).correct_step(
        request_id="fix",
        round_id=round_id,
        step=1,
        drawn=[48],
        reason="misread",
        operator=operator_signer(node),
    )
    keyring = node.keys.keyring()
    verify_store(
        node.app, keyring, VerifyOptions(level=Level.SETTLEMENT, games=lying)
    )  # signed, balanced
    with pytest.raises(VerificationError, match=r"returned (600|2000), the rules pay (300|1000)"):
        verify_store(node.app, keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))
