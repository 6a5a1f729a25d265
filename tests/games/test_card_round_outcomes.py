"""In a card game every dealt card is part of the outcome (RULES §1.4), attacked
on both stores: no operator voids a round once its first card is dealt (RNG or
physical: the house may not choose deals by voiding those it dislikes); a
physical misdeal voids only through the dealer device's signed fault report,
and the fault and the void are significant events; an RNG draw made after its
seed was revealed (the round still in play at the reveal) fails verify."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.audit.significant import iter_significant
from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.domain.game_table import GameTable
from ledger.domain.round import Round
from ledger.domain.round_records import VOIDED
from ledger.errors import InvalidCommandError, VerificationError
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.server import RngServer
from tests.casino_support import dealer_device, event_count, operator_signer
from tests.games.test_xidach_rounds import DEAL, offered, seated, simple_move

GAMES = get_plugin_manager().games()
LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 50_000}


def rng_table(casino: Casino, rng: RngServer) -> str:
    table = casino.open_table(
        request_id="t", name="XD", game="xidach", kind="rng", currency="VND", limits=LIMITS
    )
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    return table


def dealt_rng_round(casino: Casino, rng: RngServer) -> str:
    """An RNG Xì dách round, betting closed and the cards dealt, still in play and
    no seat settled yet (a deal that ends the round at once, a dealer's natural,
    or settles a seat, a player's natural, is played again)."""
    table = rng_table(casino, rng)
    for attempt in range(20):
        round_id = casino.open_round(request_id=f"r{attempt}", table_id=table, dealer="D")
        for seat, stake in ((1, 100), (2, 200)):
            who = casino.open_account(
                request_id=f"p{attempt}-{seat}", owner=f"p{seat}", currency="VND"
            )
            casino.deposit(request_id=f"d{attempt}-{seat}", account_id=who, amount=10_000)
            casino.place_bet(
                request_id=f"b{attempt}-{seat}",
                round_id=round_id,
                account_id=who,
                bet={"bet": f"seat:{seat}"},
                stake=stake,
            )
        for action in ("close_betting", "deal"):
            done = casino.act(
                request_id=f"{action}{attempt}",
                round_id=round_id,
                actor="dealer",
                action=action,
                rng=rng,
            )
        if not done["over"] and not casino.round(round_id).settled_bets:
            return round_id
        finish(casino, rng, round_id, f"{attempt}-")
    raise AssertionError("twenty deals in a row ended at once or settled a seat")


def finish(casino: Casino, rng: RngServer, round_id: str, prefix: str) -> None:
    """Play a round to its end, so that the one returned is the only one in play
    (a seed's early reveal names the first round still in play on it)."""
    moves = 0
    while not (step := offered(casino, round_id))["over"]:
        actor, action = simple_move(step)
        casino.act(
            request_id=f"{prefix}end{moves}", round_id=round_id, actor=actor, action=action, rng=rng
        )
        moves += 1


def drawing_move(step: dict[str, Any]) -> tuple[str, str]:
    """A card drawn whenever one may be (a hit, the dealer's draw), else as usual."""
    moves = step["moves"]
    turn = step["state"]["turn"]
    actor = f"seat:{turn}" if turn is not None else "dealer"
    wanted = "hit" if turn is not None else "draw"
    return (actor, wanted) if wanted in moves.get(actor, {}) else simple_move(step)


def forced_void(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a node whose domain check is gone (or an attacker with its key) records."""
    original = Round.void

    def lenient(self: Round, reason: str, operator: Any) -> Any:
        self.drawn = 0
        return original(self, reason, operator)

    monkeypatch.setattr(Round, "void", lenient)


def test_an_operator_cannot_void_an_rng_card_round_after_the_deal(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, GAMES)
    rng = RngServer(tmp_path / "seeds")
    round_id = dealt_rng_round(casino, rng)
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match=r"has drawn its outcome .*may not void it"):
        casino.void_round(
            request_id="v", round_id=round_id, reason="bad deal", operator=operator_signer(node)
        )
    assert event_count(node.app) == before
    # An RNG round has no misdeal: its draws come from its seed, never faulty.
    with pytest.raises(InvalidCommandError, match="an RNG draw is never faulty"):
        casino.act(
            request_id="f",
            round_id=round_id,
            actor="dealer",
            action="fault",
            args={"reason": "misdeal"},
        )
    assert event_count(node.app) == before
    forced_void(monkeypatch)
    casino.void_round(
        request_id="v", round_id=round_id, reason="bad deal", operator=operator_signer(node)
    )
    monkeypatch.undo()
    assert casino.round(round_id).status == VOIDED
    with pytest.raises(
        VerificationError,
        match=rf"round {round_id} \(xidach\): an operator voided the round after it drew its "
        r"outcome \(1 draws",
    ):
        verify_store(
            node.app, node.keys.keyring(), VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
        )


def test_an_operator_may_void_a_card_round_before_its_first_card(
    node: Node, tmp_path: Path
) -> None:
    casino = Casino(node.app, GAMES)
    rng = RngServer(tmp_path / "seeds")
    table = rng_table(casino, rng)
    round_id, _ = seated(casino, table, {1: 100})
    casino.act(request_id="close", round_id=round_id, actor="dealer", action="close_betting")
    returns = casino.void_round(
        request_id="v", round_id=round_id, reason="dealer ill", operator=operator_signer(node)
    )
    assert [r["returned"] for r in returns] == [100]
    verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SETTLEMENT, games=GAMES))


def physical_dealt(node: Node, casino: Casino) -> tuple[str, Any]:
    table = casino.open_table(
        request_id="t", name="XDP", game="xidach", kind="physical", currency="VND", limits=LIMITS
    )
    round_id, _ = seated(casino, table, {1: 1_000, 2: 500})
    device = dealer_device(node)
    for number, (action, cards) in enumerate((("close_betting", []), ("deal", DEAL))):
        casino.act(
            request_id=action,
            round_id=round_id,
            actor="dealer",
            action=action,
            source=device.act(round_id, number, "dealer", action, {}, cards),
        )
    return round_id, device


def test_a_physical_misdeal_voids_only_through_the_devices_signed_fault(node: Node) -> None:
    casino = Casino(node.app, GAMES)
    round_id, device = physical_dealt(node, casino)
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="may not void it"):
        casino.void_round(
            request_id="v", round_id=round_id, reason="misdeal", operator=operator_signer(node)
        )
    # A fault the device did not sign is refused too.
    with pytest.raises(InvalidCommandError, match="only from a dealer device's signed report"):
        casino.act(
            request_id="f0",
            round_id=round_id,
            actor="dealer",
            action="fault",
            args={"reason": "card exposed"},
        )
    assert event_count(node.app) == before
    reason = {"reason": "card exposed"}
    result = casino.act(
        request_id="f",
        round_id=round_id,
        actor="dealer",
        action="fault",
        args=reason,
        source=device.act(round_id, 2, "dealer", "fault", reason, []),
    )
    assert result["void"] == "misdeal: card exposed" and result["over"]
    assert sorted(r["returned"] for r in result["settled"]) == [500, 1_000]  # every stake back
    assert casino.round(round_id).status == VOIDED
    report = verify_store(
        node.app, node.keys.keyring(), VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert report.device_reports == 3  # close, deal and the misdeal, signatures checked
    found = [
        (e.kind, e.stream)
        for e in iter_significant(node.app)
        if e.stream == round_id and e.kind in ("fault", "void", "interrupted-round-voided")
    ]
    assert found == [("fault", round_id), ("void", round_id)]


def test_an_rng_draw_after_its_seed_was_revealed_fails_verify(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, GAMES)
    rng = RngServer(tmp_path / "seeds")
    round_id = dealt_rng_round(casino, rng)
    table = str(casino.round(round_id).table_id)
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="still draw from seed"):
        casino.retire_seed(request_id="early", table_id=table, rng=rng)
    assert event_count(node.app) == before
    # Revealed anyway (the check skipped), while the round still deals from it.
    monkeypatch.setattr(
        GameTable, "reveal_seed", lambda self, seed_id, seed: self._seed_revealed(seed_id, seed)
    )
    seed_id = casino.retire_seed(request_id="early", table_id=table, rng=rng)
    monkeypatch.undo()
    steps = 0
    while not (step := offered(casino, round_id))["over"]:
        actor, action = drawing_move(step)
        done = casino.act(
            request_id=f"a{steps}", round_id=round_id, actor=actor, action=action, rng=rng
        )
        steps += 1
        if done["drawn"]:
            break
    else:
        pytest.fail("the round ended without another draw")
    # Found at the reveal itself, the round still in play there (its draws after it follow).
    with pytest.raises(
        VerificationError,
        match=rf"seed {seed_id} was revealed while round {round_id}, which deals from it, was "
        "still in play",
    ):
        verify_store(
            node.app, node.keys.keyring(), VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
        )
