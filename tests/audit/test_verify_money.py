"""`ledger verify --level settlement` re-derives the money from the events:
a node that records wrong money (a bug, or a stolen node key) is caught even
though every envelope is validly signed."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

import ledger.casino.rounds as rounds_module
from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino, payouts
from ledger.crypto.actor import ActorSignature, sign_fact
from ledger.crypto.keys import Role
from ledger.domain.round import Round
from ledger.errors import CannotReDeriveError, VerificationError
from ledger.node import Node
from ledger.plugins import hookimpl
from ledger.plugins.registry import GameRegistry
from tests.attacker import Attacker
from tests.casino_support import seen
from tests.coin_game import COIN_GAMES, CoinPlugin, CoinToss, coin_games
from tests.conftest import PASSPHRASE

LIMITS = {"min_bet": 10, "max_bet": 1000, "max_round": 2000}


def play(node: Node, casino: Casino, face: str = "heads") -> tuple[str, str, str]:
    alice = casino.open_account(request_id="acc-a", owner="alice", currency="EUR")
    bob = casino.open_account(request_id="acc-b", owner="bob", currency="EUR")
    casino.deposit(request_id="dep-a", account_id=alice, amount=5000)
    casino.deposit(request_id="dep-b", account_id=bob, amount=5000)
    table = casino.open_table(
        request_id="tab",
        name="T1",
        game="coin",
        kind="physical",
        currency="EUR",
        limits=LIMITS,  # type: ignore[arg-type]
    )
    round_id = casino.open_round(request_id="r1", table_id=table, dealer="D1")
    casino.place_bet(
        request_id="b1", round_id=round_id, account_id=alice, bet={"on": "heads"}, stake=300
    )
    casino.place_bet(
        request_id="b2", round_id=round_id, account_id=bob, bet={"on": "tails"}, stake=200
    )
    casino.close_betting(request_id="c1", round_id=round_id)
    casino.record_outcome(
        request_id="o1",
        round_id=round_id,
        outcome={"face": face},
        source=seen(node, casino, round_id, {"face": face}),
    )
    return alice, bob, round_id


def test_settlement_level_rederives_the_money(node: Node) -> None:
    play(node, Casino(node.app, COIN_GAMES))
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
    )
    assert report.movements == 5  # two deposits, two bets, one settlement
    # The OK line says what was re-derived, in counts: nothing claimed unchecked.
    assert report.summary().splitlines()[8:12] == [
        "   8 money: 5 money movements balanced; 3 wallets match their postings; every "
        "account a posting names exists",
        "   9 sources: 0 RNG dice draws recomputed from their round's committed seed; "
        "1 dealer device reports verified",
        "   10 round rules: 1 rounds re-derived (step order, voids, fault policy: 0 faulty draws)",
        "   11 payouts: 1 settlements re-settled with their own game and rules (2 bets)",
    ]
    signatures = verify_store(node.app, node.keyring, VerifyOptions(level=Level.SIGNATURES))
    assert signatures.movements is None
    assert "   8 money: NOT CHECKED at level signatures" in signatures.summary()
    assert "money movements" not in signatures.summary()


def test_postings_that_disagree_with_the_results(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Round._settlement_postings

    def skimming(self: Round, record: Any, returned: int) -> Any:
        legs = original(self, record, returned)
        if returned:  # pay the winner one less, keep it for the house: still balanced
            legs[1] = {**legs[1], "amount": legs[1]["amount"] - 1}
            house = f"wallet:{self.house_account}"
            legs.append({"account": house, "amount": 1, "currency": self.currency})
        return legs

    monkeypatch.setattr(Round, "_settlement_postings", skimming)
    play(node, Casino(node.app, COIN_GAMES))
    verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SIGNATURES)
    )  # every signature is fine
    with pytest.raises(
        VerificationError, match="postings differ from what the round's results say"
    ):
        verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
        )


def test_a_wallet_credited_more_than_its_postings(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = payouts.pay

    def generous(work: Any, game_round: Round, results: Any, label: str = "return") -> Any:
        changed = original(work, game_round, results, label)
        for account in changed:
            if account.kind == "player":
                account.credit(7, game_round.id, "bonus nobody posted")
        return changed

    monkeypatch.setattr(payouts, "pay", generous)
    alice, _, _ = play(node, Casino(node.app, COIN_GAMES))
    with pytest.raises(VerificationError, match=f"account {alice}: balance"):
        verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
        )


def test_a_void_signed_with_a_key_that_is_not_an_operator(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, COIN_GAMES)
    alice, _, first_round = play(node, casino)
    node.keys.create("op", Role.OPERATOR, PASSPHRASE)
    operator = node.keys.signer(Role.OPERATOR, PASSPHRASE)
    table_id = str(casino.round(first_round).table_id)
    round_id = casino.open_round(request_id="r2", table_id=table_id, dealer="D1")
    casino.place_bet(
        request_id="b3", round_id=round_id, account_id=alice, bet={"on": "heads"}, stake=100
    )
    # A buggy or compromised node signs the "operator" fact with its own key.
    node_signer = node.keys.signer(Role.LEDGER_NODE, PASSPHRASE)

    def forged(_signer: Any, fact: dict[str, Any], _role: Role) -> ActorSignature:
        return sign_fact(node_signer, fact, Role.LEDGER_NODE)

    monkeypatch.setattr(rounds_module, "sign_fact", forged)
    casino.void_round(
        request_id="v2", round_id=round_id, reason="dice off the table", operator=operator
    )
    with pytest.raises(VerificationError, match="ledger-node key, not operator"):
        verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
        )


def test_every_round_is_resettled_with_its_own_rules(node: Node) -> None:
    play(node, Casino(node.app, COIN_GAMES))
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
    )
    assert report.resettled == 1
    assert "1 settlements re-settled with their own game and rules (2 bets)" in report.summary()


def test_a_payout_the_rules_do_not_pay_is_caught(node: Node) -> None:
    class Generous(CoinToss):
        def step(self, bets: Any, actions: Any) -> Any:
            step = super().step(bets, actions)
            return {**step, "settle": {b: v * 3 // 2 for b, v in step["settle"].items()}}

    class GenerousPlugin(CoinPlugin):
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(Generous())

    generous = coin_games("1.0", GenerousPlugin())  # same id and rules hash: a lie
    play(node, Casino(node.app, generous))
    # The money still balances: only re-settling with the real rules catches it.
    verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=generous))
    with pytest.raises(VerificationError, match=r"returned 900, the rules pay 600"):
        verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
        )


def test_resettling_needs_the_rounds_own_rules_not_its_release(node: Node) -> None:
    class NewRules(CoinToss):
        rules: ClassVar[dict[str, Any]] = {**CoinToss.rules, "edge": "house"}

    class NewRulesPlugin(CoinPlugin):
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(NewRules())

    _, _, round_id = play(node, Casino(node.app, COIN_GAMES))
    newer = coin_games("2.0")  # another release, the same rules: re-settles
    report = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=newer)
    )
    assert report.resettled == 1
    # Said as information, once per round, not as a failure.
    assert (
        "information: 1 rounds re-derived by different code than played them, with the "
        "same rules hash and settlement API (coin 1.0 -> 2.0: 1)" in report.summary()
    )
    same = verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
    )
    assert "different code" not in same.summary()
    with pytest.raises(
        CannotReDeriveError, match=rf"cannot re-settle round {round_id}: .*coin 1\.0"
    ):
        verify_store(
            node.app,
            node.keyring,
            VerifyOptions(level=Level.SETTLEMENT, games=coin_games("2.0", NewRulesPlugin())),
        )
    assert CannotReDeriveError.exit_code == 3


def test_a_deleted_wallet_stream_is_named(node: Node) -> None:
    """An attacker deletes a player's whole wallet stream from the middle of the
    log, with every Merkle row and checkpoint: nothing after it is missing and
    every chain that remains is whole, but the rounds' postings still name it."""
    _, bob, _ = play(node, Casino(node.app, COIN_GAMES))
    node.checkpointer().catch_up()
    attacker = Attacker(node.app.store_url)
    try:
        attacker.sql(f"DELETE FROM {attacker.events} WHERE originator_id = ?", (attacker.key(bob),))
        for table in ("ledger_merkle_leaves", "ledger_merkle_nodes", "ledger_checkpoints"):
            attacker.sql(f"DELETE FROM {table}")
    finally:
        attacker.close()
    with pytest.raises(VerificationError) as caught:
        verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
        )
    message = str(caught.value)
    assert message.startswith(f"account {bob}: postings name account {bob} ("), message
    assert "but its stream is not in the log" in message
