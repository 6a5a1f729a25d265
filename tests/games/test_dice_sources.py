"""Where dice come from: the RNG's committed seed (recomputed by verify once
revealed) or a dealer device's signed report."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino, attestation
from ledger.casino.runner import Work
from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role, read_private_key
from ledger.crypto.signing import InMemorySigner
from ledger.devices import DealerDevice, fault_report, throw_report
from ledger.domain.round import Round
from ledger.domain.round_records import CLOSED
from ledger.domain.signed_facts import throw_fact
from ledger.errors import InvalidCommandError, VerificationError
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.dice import throw
from ledger.rng.server import RngServer
from tests.casino_support import dealer_device, event_count, operator_signer, seen
from tests.conftest import PASSPHRASE
from tests.installed import installed_games

LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}


@pytest.fixture
def casino(node: Node) -> Casino:
    return Casino(node.app, get_plugin_manager().games())


def setup_table(casino: Casino, kind: str = "physical") -> tuple[str, str]:
    player = casino.open_account(request_id="acc", owner="an", currency="VND")
    casino.deposit(request_id="dep", account_id=player, amount=50_000)
    table = casino.open_table(
        request_id="t", name="TX", game="taixiu", kind=kind, currency="VND", limits=LIMITS
    )
    return table, player


def test_rng_throws_are_committed_recomputed_and_revealed(
    node: Node, casino: Casino, tmp_path: Any
) -> None:
    rng = RngServer(tmp_path / "seeds")
    table, player = setup_table(casino, "rng")
    seed_id = casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    assert casino.round(round_id).seed_id == seed_id
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "big"}, stake=1_000
    )
    casino.close_betting(request_id="c", round_id=round_id)
    with pytest.raises(InvalidCommandError, match="still draw from seed"):
        casino.retire_seed(request_id="early", table_id=table, rng=rng)  # a round in play
    outcome = casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    assert outcome == {"dice": list(throw(rng.seed(seed_id), round_id, 0))}
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=installed_games())
    )
    assert (report.rng_dice, report.rng_pending) == (0, 1)  # the seed is still secret
    assert casino.retire_seed(request_id="retire", table_id=table, rng=rng) == seed_id
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=installed_games())
    )
    assert (report.rng_dice, report.rng_pending) == (1, 0)
    assert "1 RNG dice draws recomputed from their round's committed seed" in report.summary()
    assert RngServer(tmp_path / "seeds").seed(seed_id) == rng.seed(seed_id)  # kept on disk


def test_a_node_that_lies_about_an_rng_throw_is_caught(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = RngServer()
    table, player = setup_table(casino, "rng")
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
    honest = rng.throw(str(casino.round(round_id).seed_id), round_id, 0)
    # A rigged throw: three sixes, unless the seed gives those (1 round in 216).
    rigged = (6, 6, 6) if honest != (6, 6, 6) else (1, 1, 1)
    monkeypatch.setattr(RngServer, "throw", lambda *_: rigged)
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    with pytest.raises(
        VerificationError,
        match=rf"round {round_id}: RNG throw 0 is not what the round's committed seed",
    ):
        verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=installed_games())
        )


def test_rng_throws_cannot_be_reported(casino: Casino) -> None:
    table, _ = setup_table(casino)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.close_betting(request_id="c", round_id=round_id)
    with pytest.raises(InvalidCommandError, match="RNG draws are made by the node"):
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
    report = verify_store(
        node.app,
        node.keys.keyring(),
        VerifyOptions(level=Level.SETTLEMENT, games=installed_games()),
    )
    assert report.device_reports == 2


def test_a_second_seed_waits_for_the_first_to_be_retired(casino: Casino) -> None:
    rng = RngServer()
    table, _ = setup_table(casino, "rng")
    first = casino.commit_seed(request_id="commit-1", table_id=table, rng=rng)
    with pytest.raises(InvalidCommandError, match=f"already has seed {first} in use"):
        casino.commit_seed(request_id="commit-2", table_id=table, rng=rng)
    assert len(rng._seeds) == 1  # no seed was made for the refused commitment
    casino.retire_seed(request_id="retire-1", table_id=table, rng=rng)
    assert casino.commit_seed(request_id="commit-3", table_id=table, rng=rng) != first


# Who may state an outcome (docs/rules.md §1.4): refused when written, caught when
# a buggy (or key-stealing) node writes it anyway with valid envelope signatures.


def rng_round(casino: Casino, rng: RngServer, bet: str = "big") -> tuple[str, str, str]:
    table, player = setup_table(casino, "rng")
    seed_id = casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": bet}, stake=1_000
    )
    casino.close_betting(request_id="c", round_id=round_id)
    return table, seed_id, round_id


def verify_fails(node: Node, *needles: str) -> str:
    with pytest.raises(VerificationError) as caught:
        verify_store(
            node.app,
            node.keys.keyring(),
            VerifyOptions(level=Level.SETTLEMENT, games=installed_games()),
        )
    for needle in needles:
        assert needle in str(caught.value), str(caught.value)
    return str(caught.value)


def unguarded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A buggy node: it records whatever source it is handed."""
    monkeypatch.setattr(Round, "check_source", lambda *_: None)
    monkeypatch.setattr(attestation, "check_source", lambda *_: None)


@pytest.mark.parametrize("kind", ["manual", "device", "simulated", None])
def test_an_rng_round_refuses_every_reported_outcome_and_fault(
    node: Node, casino: Casino, kind: str | None
) -> None:
    rng = RngServer()
    _, seed_id, round_id = rng_round(casino, rng)
    device = dealer_device(node)
    sources = {
        "manual": {"kind": "manual"},
        "device": device.throw(round_id, 0, {"dice": [6, 6, 6]}),
        "simulated": {"kind": "simulated", "throw": 0},
        None: {},
    }
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError, match=f"its dice come only from seed {seed_id}"):
        casino.record_outcome(
            request_id="o", round_id=round_id, outcome={"dice": [6, 6, 6]}, source=sources[kind]
        )
    with pytest.raises(InvalidCommandError, match="an RNG draw is never faulty"):
        casino.record_fault(
            request_id="f",
            round_id=round_id,
            reason="cocked",
            source=device.fault(round_id, 0, "cocked") if kind == "device" else sources[kind],
        )
    assert event_count(node.app) == count
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)  # the only way


@pytest.mark.parametrize("kind", ["manual", "simulated", "rng-like", None])
def test_a_physical_round_takes_only_a_dealer_devices_report(
    node: Node, casino: Casino, kind: str | None
) -> None:
    table, _player = setup_table(casino)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.close_betting(request_id="c", round_id=round_id)
    source: dict[str, Any] = {"manual": {"kind": "manual"}, "simulated": {"kind": "simulated"}}.get(
        str(kind), {"kind": "rng-ish", "seed_id": "x"} if kind == "rng-like" else {}
    )
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="only from a dealer device's signed report"):
        casino.record_outcome(
            request_id="o", round_id=round_id, outcome={"dice": [1, 2, 3]}, source=source
        )
    with pytest.raises(InvalidCommandError, match="only from a dealer device's signed report"):
        casino.record_fault(request_id="f", round_id=round_id, reason="cocked", source=source)
    assert event_count(node.app) == count


def test_a_device_key_not_valid_now_is_refused(node: Node, casino: Casino) -> None:
    from datetime import UTC, datetime, timedelta

    node.keys.create(
        "old-shaker",
        Role.DEALER_DEVICE,
        PASSPHRASE,
        valid_days=1,
        now=datetime.now(UTC) - timedelta(days=3),
    )
    private = read_private_key(node.keys.private_key_path("old-shaker"), PASSPHRASE)
    expired = DealerDevice(InMemorySigner(private, Role.DEALER_DEVICE))
    table, _ = setup_table(casino)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.close_betting(request_id="c", round_id=round_id)
    count = event_count(node.app)
    with pytest.raises(
        InvalidCommandError, match=r"old-shaker: signed at .*, after its key expired"
    ):
        casino.record_outcome(
            request_id="o",
            round_id=round_id,
            outcome={"dice": [1, 2, 3]},
            source=expired.throw(round_id, 0, {"dice": [1, 2, 3]}),
        )
    assert event_count(node.app) == count


def test_a_corrected_rng_round_is_refused(node: Node, casino: Casino) -> None:
    rng = RngServer()
    _, _, round_id = rng_round(casino, rng)
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="an RNG result is computed, never corrected"):
        casino.correct(
            request_id="fix",
            round_id=round_id,
            outcome={"dice": [6, 6, 6]},
            reason="we prefer sixes",
            operator=operator_signer(node),
        )
    assert event_count(node.app) == count


def test_attack_a_manual_outcome_on_an_rng_round(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = RngServer()
    table, _, round_id = rng_round(casino, rng, bet="small")
    unguarded(monkeypatch)
    casino.record_outcome(
        request_id="o", round_id=round_id, outcome={"dice": [1, 1, 2]}, source={"kind": "manual"}
    )
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SIGNATURES)
    )  # every envelope is fine
    verify_fails(
        node, f"round {round_id}: throw drew from a 'manual' source (seed None), not from its"
    )


def test_attack_an_rng_throw_from_another_seed(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = RngServer()
    table, seed_id, round_id = rng_round(casino, rng)
    other = casino.open_table(
        request_id="t2", name="TX2", game="taixiu", kind="rng", currency="VND", limits=LIMITS
    )
    other_seed = casino.commit_seed(request_id="commit-2", table_id=other, rng=rng)
    # The node throws from a seed of its choice and names that seed: the dice
    # do match the seed named, so only the round's own commitment catches it.
    honest_attest = attestation.attest

    def lying(*args: Any, **kwargs: Any) -> Any:
        drawn, source = honest_attest(*args, **kwargs)
        return drawn, {**source, "seed_id": other_seed} if source["kind"] == "rng" else source

    monkeypatch.setattr(attestation, "attest", lying)
    monkeypatch.setattr(RngServer, "throw", lambda s, _seed, r, c: throw(s.seed(other_seed), r, c))
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    monkeypatch.undo()
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    casino.retire_seed(request_id="retire-2", table_id=other, rng=rng)
    verify_fails(
        node,
        f"round {round_id}: throw drew from a 'rng' source (seed {other_seed}), not from its "
        f"committed seed {seed_id}",
    )


def test_attack_a_fault_on_an_rng_table(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = RngServer()
    _table, _, round_id = rng_round(casino, rng)
    device = dealer_device(node)
    monkeypatch.setattr(Round, "check_source", lambda *_: None)
    casino.record_fault(
        request_id="f",
        round_id=round_id,
        reason="cocked",
        source=device.fault(round_id, 0, "cocked"),
    )
    verify_fails(node, f"round {round_id}: a faulty draw on an RNG table: an RNG draw is never")


def test_attack_a_physical_outcome_not_from_a_device(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, _player = setup_table(casino)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.close_betting(request_id="c", round_id=round_id)
    unguarded(monkeypatch)
    casino.record_outcome(
        request_id="o", round_id=round_id, outcome={"dice": [4, 5, 6]}, source={"kind": "manual"}
    )
    verify_fails(
        node, f"round {round_id}: throw on a physical table came from a 'manual' source, not a"
    )


def test_attack_a_device_report_signed_by_an_operator(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, _player = setup_table(casino)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.close_betting(request_id="c", round_id=round_id)
    unguarded(monkeypatch)
    fact = throw_fact(round_id, 0, {"dice": [4, 5, 6]})
    forged = {"kind": "device", **sign_fact(operator_signer(node), fact, Role.OPERATOR)}
    casino.record_outcome(
        request_id="o", round_id=round_id, outcome={"dice": [4, 5, 6]}, source=forged
    )
    verify_fails(node, f"round {round_id}", "signed by an operator key, not dealer-device")


def test_attack_a_correction_of_an_rng_round(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = RngServer()
    _table, _, round_id = rng_round(casino, rng)
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    thrown = casino.round(round_id).log[-1]["action"]["drawn"]
    right = {"dice": [6, 6, 5] if thrown != [6, 6, 5] else [1, 1, 2]}
    monkeypatch.setattr(Round, "is_rng", property(lambda self: False))
    casino.correct(
        request_id="fix",
        round_id=round_id,
        outcome=right,
        reason="x",
        operator=operator_signer(node),
    )
    monkeypatch.undo()
    verify_fails(node, f"round {round_id} is on an RNG table: its result was corrected")


def test_attack_an_operator_void_after_the_settling_throw(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, player = setup_table(casino)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "big"}, stake=1_000
    )
    casino.close_betting(request_id="c", round_id=round_id)
    casino.record_outcome(
        request_id="o",
        round_id=round_id,
        outcome={"dice": [4, 5, 6]},  # big wins: the house would pay
        source=seen(node, casino, round_id, {"dice": [4, 5, 6]}),
    )
    original = Round.void

    def lenient(self: Round, reason: str, operator: Any) -> Any:
        self.status = CLOSED  # forget the settling throw, as a buggy node would
        self.settled_bets = set()
        self.drawn = 0
        return original(self, reason, operator)

    monkeypatch.setattr(Round, "void", lenient)
    casino.void_round(
        request_id="v", round_id=round_id, reason="we lost", operator=operator_signer(node)
    )
    monkeypatch.undo()
    # The throw settled the round (it is one step): voiding it is voiding a settled round.
    verify_fails(node, f"round {round_id} (taixiu): voided when already settled")


def test_unrevealed_rng_throws_are_said_not_checked(node: Node, casino: Casino) -> None:
    rng = RngServer()
    _, _, round_id = rng_round(casino, rng)
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    summary = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=installed_games())
    ).summary()
    assert "0 RNG dice draws recomputed" in summary
    assert "NOT CHECKED: 1 RNG dice draws whose seed is not revealed yet" in summary


def honest_rng_source(game_round: Round) -> dict[str, Any]:
    return {"kind": "rng", "seed_id": game_round.seed_id, "counter": game_round.draws}


def test_attack_a_round_thrown_from_a_revealed_seed(
    node: Node, casino: Casino, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = RngServer()
    table, player = setup_table(casino, "rng")
    seed_id = casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    casino.retire_seed(request_id="retire", table_id=table, rng=rng)  # everyone knows it now
    original = Work.table

    def stale(self: Work, table_id: Any) -> Any:
        found = original(self, table_id)
        found.active_seed = found.active_seed or seed_id  # a node that forgot the reveal
        return found

    monkeypatch.setattr(Work, "table", stale)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "big"}, stake=1_000
    )
    casino.close_betting(request_id="c", round_id=round_id)
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    monkeypatch.undo()
    verify_fails(node, f"round {round_id} opened on seed {seed_id}, already revealed")
