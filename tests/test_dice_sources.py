"""Where dice come from: the RNG's committed seed (recomputed by verify once
revealed) or a dealer device's signed report."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.audit.verify import Level, verify_store
from ledger.casino import Casino
from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role
from ledger.devices import fault_report, throw_report
from ledger.domain.round import throw_fact
from ledger.errors import InvalidCommandError, VerificationError
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.dice import throw
from ledger.rng.server import RngServer
from tests.casino_support import event_count
from tests.conftest import PASSPHRASE

LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}


@pytest.fixture
def casino(node: Node) -> Casino:
    return Casino(node.app, get_plugin_manager().variants())


def setup_table(casino: Casino) -> tuple[str, str]:
    player = casino.open_account(request_id="acc", owner="an", currency="VND")
    casino.deposit(request_id="dep", account_id=player, amount=50_000)
    table = casino.open_table(
        request_id="t", name="TX", variant="taixiu", currency="VND", limits=LIMITS
    )
    return table, player


def test_rng_throws_are_committed_recomputed_and_revealed(
    node: Node, casino: Casino, tmp_path: Any
) -> None:
    rng = RngServer(tmp_path / "seeds")
    table, player = setup_table(casino)
    seed_id = casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    assert casino.round(round_id).dice_seed == seed_id
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "big"}, stake=1_000
    )
    casino.close_betting(request_id="c", round_id=round_id)
    outcome = casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    assert outcome == {"dice": list(throw(rng.seed(seed_id), round_id, 0))}
    with pytest.raises(InvalidCommandError, match="still throw from seed"):
        casino.retire_seed(request_id="early", table_id=table, rng=rng)
    casino.settle(request_id="s", round_id=round_id)
    report = verify_store(node.app, node.keyring, level=Level.SETTLEMENT)
    assert (report.rng_throws, report.rng_pending) == (0, 1)  # the seed is still secret
    assert casino.retire_seed(request_id="retire", table_id=table, rng=rng) == seed_id
    report = verify_store(node.app, node.keyring, level=Level.SETTLEMENT)
    assert (report.rng_throws, report.rng_pending) == (1, 0)
    assert "1 RNG throws recomputed from their round's committed seed" in report.summary()
    assert RngServer(tmp_path / "seeds").seed(seed_id) == rng.seed(seed_id)  # kept on disk


def test_a_node_that_lies_about_an_rng_throw_is_caught(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = RngServer()
    table, player = setup_table(casino)
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b",
        round_id=round_id,
        account_id=player,
        bet={"bet": "specific_triple:6"},
        stake=100,
    )
    casino.close_betting(request_id="c", round_id=round_id)
    monkeypatch.setattr(RngServer, "throw", lambda *_: (6, 6, 6))  # a rigged throw
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    casino.settle(request_id="s", round_id=round_id)
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    with pytest.raises(
        VerificationError,
        match=rf"round {round_id}: RNG throw 0 is not what the round's committed seed",
    ):
        verify_store(node.app, node.keyring, level=Level.SETTLEMENT)


def test_rng_throws_cannot_be_reported(casino: Casino) -> None:
    table, _ = setup_table(casino)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.close_betting(request_id="c", round_id=round_id)
    with pytest.raises(InvalidCommandError, match="RNG throws are made by throw_dice"):
        casino.record_outcome(
            request_id="o",
            round_id=round_id,
            outcome={"dice": [1, 2, 3]},
            source={"kind": "rng", "seed_id": "x", "counter": 0},
        )
    with pytest.raises(InvalidCommandError, match="no RNG seed"):
        casino.throw_dice(request_id="throw", round_id=round_id, rng=RngServer())


def test_device_reports_are_signed_by_the_device(node: Node, casino: Casino) -> None:
    node.keys.create("table-7-shaker", Role.DEALER_DEVICE, PASSPHRASE)
    node.keys.create("op", Role.OPERATOR, PASSPHRASE)
    device = node.keys.signer(Role.DEALER_DEVICE, PASSPHRASE)
    operator = node.keys.signer(Role.OPERATOR, PASSPHRASE)
    table, player = setup_table(casino)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "small"}, stake=500
    )
    casino.close_betting(request_id="c", round_id=round_id)
    count = event_count(node.app)
    fact = throw_fact(round_id, 0, {"dice": [1, 1, 2]})
    forged = {"kind": "device", **sign_fact(operator, fact, Role.OPERATOR)}
    with pytest.raises(InvalidCommandError, match="device report refused"):
        casino.record_outcome(
            request_id="o1", round_id=round_id, outcome={"dice": [1, 1, 2]}, source=forged
        )
    mismatched = throw_report(device, round_id, 0, {"dice": [6, 6, 5]})
    with pytest.raises(InvalidCommandError, match="bad dealer-device signature"):
        casino.record_outcome(
            request_id="o2", round_id=round_id, outcome={"dice": [1, 1, 2]}, source=mismatched
        )
    assert event_count(node.app) == count
    casino.record_fault(
        request_id="f",
        round_id=round_id,
        reason="stacked",
        source=fault_report(device, round_id, 0, "stacked"),
    )
    casino.record_outcome(
        request_id="o3",
        round_id=round_id,
        outcome={"dice": [1, 1, 2]},
        source=throw_report(device, round_id, 1, {"dice": [1, 1, 2]}),
    )
    casino.settle(request_id="s", round_id=round_id)
    report = verify_store(node.app, node.keys.keyring(), level=Level.SETTLEMENT)
    assert report.device_reports == 2


def test_a_second_seed_waits_for_the_first_to_be_retired(casino: Casino) -> None:
    rng = RngServer()
    table, _ = setup_table(casino)
    first = casino.commit_seed(request_id="commit-1", table_id=table, rng=rng)
    with pytest.raises(InvalidCommandError, match=f"already has seed {first} in use"):
        casino.commit_seed(request_id="commit-2", table_id=table, rng=rng)
    assert len(rng._seeds) == 1  # no seed was made for the refused commitment
    casino.retire_seed(request_id="retire-1", table_id=table, rng=rng)
    assert casino.commit_seed(request_id="commit-3", table_id=table, rng=rng) != first
