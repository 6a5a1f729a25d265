"""The Casino API end to end, on SQLite and PostgreSQL: rounds settle exactly,
in one atomic save; requests are idempotent; interrupted rounds are voided or
resumed under an operator's signature; a round settles only under the
game it opened with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from eventsourcing.persistence import IntegrityError, Recording
from eventsourcing.utils import get_topic

from ledger.casino import Casino
from ledger.crypto.actor import check_fact_signature
from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import Role
from ledger.domain.account import Account
from ledger.domain.money import in_play, wallet
from ledger.domain.request import Request
from ledger.domain.round import Round
from ledger.domain.round_records import BETTING, CLOSED, SETTLED, VOIDED
from ledger.domain.signed_facts import operator_fact
from ledger.errors import InvalidCommandError, VerificationError
from ledger.node import Node, open_node
from ledger.plugins import hookimpl
from ledger.plugins.registry import GameRegistry
from tests.casino_support import (
    HEADS,
    LIMITS,
    TAILS,
    casino_on,
    domain_events,
    event_count,
    notifications,
    operator_signer,
    seen,
    table_of,
)
from tests.coin_game import COIN_GAMES, CoinPlugin, CoinToss, coin_games
from tests.conftest import PASSPHRASE


def opened(casino: Casino, *owners: str, deposit: int = 1000) -> tuple[str, list[str]]:
    """A EUR table and a funded wallet per owner."""
    table = table_of(casino, "coin", LIMITS)
    wallets = []
    for owner in owners:
        account = casino.open_account(request_id=f"open-{owner}", owner=owner, currency="EUR")
        casino.deposit(request_id=f"deposit-{owner}", account_id=account, amount=deposit)
        wallets.append(account)
    return table, wallets


def house_of(casino: Casino, table: str) -> str:
    return str(casino.table(table).house_account)


# Bets in the full round: (owner index, side, stake).
ROUND_BETS = [(0, HEADS, 100), (0, TAILS, 50), (1, TAILS, 200), (2, HEADS, 300)]


@pytest.mark.parametrize(
    ("face", "balances", "house"),
    [
        # alice staked 150, bob 200, carol 300 (650 in all)
        ("heads", [1050, 800, 1300], -150),  # heads pay 2x: alice 200, carol 600
        ("tails", [950, 1200, 700], 150),  # tails pay 2x: alice 100, bob 400
        ("edge", [1000, 1000, 1000], 0),  # every bet a push
    ],
)
def test_a_full_round_settles_exactly(
    node: Node, face: str, balances: list[int], house: int
) -> None:
    casino = casino_on(node)
    table, wallets = opened(casino, "alice", "bob", "carol")
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    bet_ids = [
        casino.place_bet(
            request_id=f"bet-{n}", round_id=round_id, account_id=wallets[who], bet=bet, stake=stake
        )
        for n, (who, bet, stake) in enumerate(ROUND_BETS)
    ]
    assert [casino.account(w).balance for w in wallets] == [850, 800, 700]
    casino.close_betting(request_id="close", round_id=round_id)
    casino.record_outcome(
        request_id="outcome",
        round_id=round_id,
        outcome={"face": face},
        source=seen(node, casino, round_id, {"face": face}),
    )
    results = casino.round(round_id).results  # the outcome settled the round

    def paid(bet: dict[str, Any], stake: int) -> int:
        return stake if face == "edge" else 2 * stake if bet["on"] == face else 0

    assert results == [
        {"bet_id": bet_id, "account_id": wallets[who], "stake": stake, "returned": paid(bet, stake)}
        for bet_id, (who, bet, stake) in zip(bet_ids, ROUND_BETS, strict=True)
    ]
    assert [casino.account(w).balance for w in wallets] == balances
    assert casino.account(house_of(casino, table)).balance == house
    settled = casino.round(round_id)
    assert settled.status == SETTLED and settled.results == results
    # The postings of the whole log: in-play empty, each wallet and the house
    # exactly where its aggregate says, everything summing to zero.
    totals: dict[str, int] = {}
    for _, event in domain_events(node.app):
        for leg in getattr(event, "postings", []):
            totals[leg["account"]] = totals.get(leg["account"], 0) + leg["amount"]
    assert totals.get(in_play(round_id), 0) == 0
    for account, balance in zip(wallets, balances, strict=True):
        assert totals[wallet(account)] == balance
    assert totals.get(wallet(house_of(casino, table)), 0) == house
    assert sum(totals.values()) == 0


def test_a_settlement_is_one_atomic_save(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    casino = casino_on(node)
    table, (alice, bob, carol) = opened(casino, "alice", "bob", "carol")
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    for n, (account, bet) in enumerate([(alice, HEADS), (bob, TAILS), (carol, HEADS)]):
        casino.place_bet(
            request_id=f"bet-{n}", round_id=round_id, account_id=account, bet=bet, stake=100
        )
    casino.close_betting(request_id="close", round_id=round_id)
    source = seen(node, casino, round_id, {"face": "heads"})
    before = node.app.tables.event_count()[1]

    saves: list[list[Recording[Any]]] = []
    inserts: list[int] = []
    real_save, real_insert = node.app.record_events, node.app.recorder.insert_events

    def save(events: Any, **kwargs: Any) -> list[Recording[Any]]:
        recordings = real_save(events, **kwargs)
        saves.append(recordings)
        return recordings

    def insert_events(stored: Any, **kwargs: Any) -> Any:
        inserts.append(len(stored))
        return real_insert(stored, **kwargs)

    monkeypatch.setattr(node.app, "record_events", save)
    monkeypatch.setattr(node.app.recorder, "insert_events", insert_events)
    # The throw settles (a one-step game): its action and the settlement, one save.
    casino.record_outcome(
        request_id="outcome", round_id=round_id, outcome={"face": "heads"}, source=source
    )
    monkeypatch.undo()

    # One save, one insert: the round, both winners, the house and the request.
    assert len(saves) == 1
    recordings = saves[0]
    assert inserts == [len(recordings)]
    topics = sorted(get_topic(type(r.domain_event)) for r in recordings)
    assert topics == sorted(
        [get_topic(Round.ActionRecorded), get_topic(Round.Settled), get_topic(Request.Completed)]
        + [get_topic(Account.Credited)] * 2  # alice and carol won 200 each
        + [get_topic(Account.Debited)]  # the house pays 100 net (bob lost 100)
    )
    streams = {r.domain_event.originator_id for r in recordings}
    assert streams == {
        casino.round(round_id).id,
        casino.account(alice).id,
        casino.account(carol).id,
        casino.account(house_of(casino, table)).id,
        Request.create_id("outcome"),
    }
    # In the log: exactly these events, contiguous and right after what was there.
    ids = [r.notification.id for r in recordings]
    assert ids == list(range(before + 1, before + 1 + len(recordings)))
    assert [n.id for n in notifications(node.app, before)] == ids
    assert node.app.tables.event_count()[1] == ids[-1]
    # What the throw settled is the round's; settling it again is refused, recording nothing.
    settled = [r.domain_event for r in recordings if isinstance(r.domain_event, Round.Settled)]
    assert casino.round(round_id).results == settled[0].results
    with pytest.raises(InvalidCommandError, match=f"round {round_id} is already settled"):
        casino.settle(request_id="settle", round_id=round_id)
    assert node.app.tables.event_count()[1] == ids[-1]


def test_a_settlement_conflicting_on_one_wallet_records_none_of_it(
    node: Node, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = casino_on(node)
    table, (alice, carol) = opened(casino, "alice", "carol")
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    for n, account in enumerate([alice, carol]):
        casino.place_bet(
            request_id=f"bet-{n}", round_id=round_id, account_id=account, bet=HEADS, stake=100
        )
    casino.close_betting(request_id="close", round_id=round_id)
    source = seen(node, casino, round_id, {"face": "heads"})
    before = node.app.tables.event_count()[1]
    # Another node (its own node key): it writes beside this one, optimistically.
    node.keys.create("ledger-node-b", Role.LEDGER_NODE, PASSPHRASE)
    monkeypatch.setenv("LEDGER_NODE_KEY", "ledger-node-b")
    other = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE)
    monkeypatch.delenv("LEDGER_NODE_KEY")
    node.app.mapper.signer_check = SignerCheck(node.keys.keyring())  # type: ignore[attr-defined]
    attempts: list[str] = []
    real_save = node.app.record_events

    def save(events: Any, **kwargs: Any) -> list[Recording[Any]]:
        if not attempts:  # another node pays into carol's wallet under our feet
            Casino(other.app, COIN_GAMES).deposit(request_id="late", account_id=carol, amount=7)
        try:
            recordings = real_save(events, **kwargs)
        except IntegrityError:
            # Only carol's stream conflicted, yet nothing of the settlement is there.
            written = [get_topic(type(e)) for _, e in domain_events(node.app, before)]
            assert written == [get_topic(Account.Deposited), get_topic(Request.Completed)]
            attempts.append("conflict")
            raise
        attempts.append("saved")
        return recordings

    monkeypatch.setattr(node.app, "record_events", save)
    try:  # the throw settles (a one-step game)
        casino.record_outcome(
            request_id="outcome", round_id=round_id, outcome={"face": "heads"}, source=source
        )
    finally:
        other.close()
    assert attempts == ["conflict", "saved"]  # retried from fresh state, then saved
    settled = [e for _, e in domain_events(node.app) if isinstance(e, Round.Settled)]
    assert len(settled) == 1
    assert [casino.account(w).balance for w in (alice, carol)] == [1100, 1107]
    assert casino.account(house_of(casino, table)).balance == -200


def test_a_retried_request_returns_the_first_result_and_records_nothing(node: Node) -> None:
    casino = casino_on(node)
    table, (alice,) = opened(casino, "alice")
    # open_account: the retry names the same account; no second account is opened.
    count = event_count(node.app)
    again = casino.open_account(request_id="open-alice", owner="alice", currency="EUR")
    assert again == alice and event_count(node.app) == count
    # deposit: the retry returns the balance of the first time, not today's.
    assert casino.deposit(request_id="top-up", account_id=alice, amount=200) == 1200
    assert casino.deposit(request_id="more", account_id=alice, amount=50) == 1250
    count = event_count(node.app)
    assert casino.deposit(request_id="top-up", account_id=alice, amount=200) == 1200
    assert event_count(node.app) == count
    assert casino.account(alice).balance == 1250
    # place_bet: the same bet id, one bet, one stake taken.
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    first = casino.place_bet(
        request_id="bet", round_id=round_id, account_id=alice, bet=HEADS, stake=100
    )
    count = event_count(node.app)
    for _ in range(3):
        assert (
            casino.place_bet(
                request_id="bet", round_id=round_id, account_id=alice, bet=HEADS, stake=100
            )
            == first
        )
    assert event_count(node.app) == count
    assert list(casino.round(round_id).bets) == [first]
    assert casino.account(alice).balance == 1150
    # The outcome (which settles): the same answer, paid once.
    casino.close_betting(request_id="close", round_id=round_id)
    outcome = {
        "request_id": "outcome",
        "round_id": round_id,
        "outcome": {"face": "heads"},
        "source": seen(node, casino, round_id, {"face": "heads"}),
    }
    casino.record_outcome(**outcome)
    count = event_count(node.app)
    casino.record_outcome(**outcome)  # a retry: the first answer, nothing recorded
    casino.close_betting(request_id="close", round_id=round_id)  # done before: no-op
    assert event_count(node.app) == count
    assert casino.account(alice).balance == 1350


def test_a_retry_on_a_new_node_returns_the_first_result(node: Node, store_url: str) -> None:
    casino = casino_on(node)
    table, (alice,) = opened(casino, "alice")
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    first = casino.place_bet(
        request_id="bet", round_id=round_id, account_id=alice, bet=HEADS, stake=100
    )
    count = event_count(node.app)
    other = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE)
    try:
        retried = Casino(other.app, COIN_GAMES).place_bet(
            request_id="bet", round_id=round_id, account_id=alice, bet=HEADS, stake=100
        )
    finally:
        other.close()
    assert retried == first
    assert event_count(node.app) == count


@pytest.mark.parametrize(
    ("command", "kwargs"),
    [
        ("deposit", {"amount": 101}),  # same command, another amount
        ("withdraw", {"amount": 100}),  # same arguments, another command
    ],
)
def test_a_request_id_reused_with_other_arguments_is_refused(
    node: Node, command: str, kwargs: dict[str, Any]
) -> None:
    casino = casino_on(node)
    _, (alice,) = opened(casino, "alice")
    casino.deposit(request_id="req-1", account_id=alice, amount=100)
    count = event_count(node.app)
    call: Callable[..., Any] = getattr(casino, command)
    with pytest.raises(InvalidCommandError, match="'req-1' was already used for a different"):
        call(request_id="req-1", account_id=alice, **kwargs)
    assert event_count(node.app) == count
    assert casino.account(alice).balance == 1100


# Interrupted rounds.
def left_open(node: Node, casino: Casino, state: str) -> tuple[str, str, list[str]]:
    """A round with bets from two wallets, left in `state` by a node that went away."""
    table, wallets = opened(casino, "alice", "bob")
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    for n, (account, bet, stake) in enumerate(
        [(wallets[0], HEADS, 100), (wallets[0], TAILS, 40), (wallets[1], TAILS, 250)]
    ):
        casino.place_bet(
            request_id=f"bet-{n}", round_id=round_id, account_id=account, bet=bet, stake=stake
        )
    if state in (CLOSED, SETTLED):
        casino.close_betting(request_id="close", round_id=round_id)
    if state == SETTLED:
        casino.record_outcome(
            request_id="outcome",
            round_id=round_id,
            outcome={"face": "tails"},
            source=seen(node, casino, round_id, {"face": "tails"}),
        )
    assert casino.round(round_id).status == state
    return table, round_id, wallets


def test_an_operator_cannot_void_a_round_once_its_outcome_is_recorded(node: Node) -> None:
    casino = casino_on(node)
    _, round_id, (alice, bob) = left_open(node, casino, SETTLED)  # the throw settled it
    assert [casino.account(w).balance for w in (alice, bob)] == [940, 1250]
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="is already settled"):
        casino.void_round(
            request_id="void", round_id=round_id, reason="we lost", operator=operator_signer(node)
        )
    assert event_count(node.app) == count
    assert casino.round(round_id).status == SETTLED
    assert [casino.account(w).balance for w in (alice, bob)] == [940, 1250]


@pytest.mark.parametrize("state", [BETTING, CLOSED])
def test_an_interrupted_round_is_voided_by_an_operator(
    node: Node, store_url: str, state: str
) -> None:
    table, round_id, (alice, bob) = left_open(node, casino_on(node), state)
    node.close()  # the node went away mid-round; another one takes over
    node.app = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE).app
    casino = casino_on(node)
    assert [casino.account(w).balance for w in (alice, bob)] == [860, 750]
    operator = operator_signer(node)
    returns = casino.void_round(
        request_id="void", round_id=round_id, reason="shoe dropped", operator=operator
    )
    assert sorted((r["account_id"], r["stake"], r["returned"]) for r in returns) == sorted(
        [(alice, 100, 100), (alice, 40, 40), (bob, 250, 250)]
    )
    assert [casino.account(w).balance for w in (alice, bob)] == [1000, 1000]
    assert casino.account(house_of(casino, table)).balance == 0
    assert casino.round(round_id).status == VOIDED
    voided = [e for _, e in domain_events(node.app) if isinstance(e, Round.Voided)]
    assert len(voided) == 1
    event = voided[0]
    assert event.reason == "shoe dropped" and event.operator is not None
    assert event.operator["key_id"] == operator.key_id
    keyring = node.keys.keyring()
    fact = operator_fact("void", casino.round(round_id).id, "shoe dropped")
    check_fact_signature(keyring, fact, event.operator, Role.OPERATOR, "void")
    with pytest.raises(VerificationError, match="bad operator signature"):
        check_fact_signature(
            keyring, {**fact, "reason": "other"}, event.operator, Role.OPERATOR, "void"
        )
    # Voided is final: no settlement, no second void.
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="already voided"):
        casino.void_round(request_id="void-2", round_id=round_id, reason="again", operator=operator)
    with pytest.raises(InvalidCommandError, match="voided"):
        casino.settle(request_id="settle", round_id=round_id)
    assert event_count(node.app) == count


def test_an_interrupted_round_is_resumed_with_a_reason(node: Node, store_url: str) -> None:
    table, round_id, (alice, bob) = left_open(node, casino_on(node), CLOSED)
    node.close()
    node.app = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE).app
    casino = casino_on(node)
    operator = operator_signer(node)
    with pytest.raises(InvalidCommandError, match="needs a reason"):
        casino.resume_round(request_id="resume-0", round_id=round_id, reason=" ", operator=operator)
    casino.resume_round(
        request_id="resume", round_id=round_id, reason="power restored", operator=operator
    )
    resumed = [e for _, e in domain_events(node.app) if isinstance(e, Round.Resumed)]
    assert [e.reason for e in resumed] == ["power restored"]
    fact = operator_fact("resume", casino.round(round_id).id, "power restored")
    check_fact_signature(node.keys.keyring(), fact, resumed[0].operator, Role.OPERATOR, "resume")
    # The round carries on where it stopped, and settles as usual.
    assert casino.round(round_id).status == CLOSED
    casino.record_outcome(
        request_id="outcome",
        round_id=round_id,
        outcome={"face": "tails"},
        source=seen(node, casino, round_id, {"face": "tails"}),
    )
    assert [casino.account(w).balance for w in (alice, bob)] == [940, 1250]
    assert casino.account(house_of(casino, table)).balance == -190


@pytest.mark.parametrize("role", [Role.LEDGER_NODE, Role.DEALER_DEVICE, Role.CHECKPOINT])
@pytest.mark.parametrize("command", ["void_round", "resume_round"])
def test_void_and_resume_need_an_operator_key(node: Node, role: Role, command: str) -> None:
    casino = casino_on(node)
    _, round_id, (alice, bob) = left_open(node, casino, BETTING)
    if role is Role.DEALER_DEVICE:
        node.keys.create("dealer-1", role, PASSPHRASE)
    signer = node.keys.signer(role, PASSPHRASE)
    count = event_count(node.app)
    call: Callable[..., Any] = getattr(casino, command)
    with pytest.raises(InvalidCommandError, match="is not an operator key in the keyring"):
        call(request_id="op", round_id=round_id, reason="because", operator=signer)
    assert event_count(node.app) == count
    assert casino.round(round_id).status == BETTING
    assert [casino.account(w).balance for w in (alice, bob)] == [860, 750]


@pytest.mark.parametrize("command", ["void_round", "resume_round"])
def test_an_operator_key_outside_the_keyring_is_refused(node: Node, command: str) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger.crypto.signing import InMemorySigner

    casino = casino_on(node)
    _, round_id, _ = left_open(node, casino, BETTING)
    stranger = InMemorySigner(Ed25519PrivateKey.generate(), Role.OPERATOR)
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="is not an operator key in the keyring"):
        getattr(casino, command)(request_id="op", round_id=round_id, reason="x", operator=stranger)
    assert event_count(node.app) == count
    assert casino.round(round_id).status == BETTING


class CoinTossNewRules(CoinToss):
    rules: ClassVar[dict[str, Any]] = {**CoinToss.rules, "edge": "house"}


class NewRulesPlugin(CoinPlugin):
    @hookimpl
    def ledger_register_games(self, registry: GameRegistry) -> None:
        registry.add(CoinTossNewRules())


def test_a_new_release_with_the_same_rules_settles_rounds_of_the_old_one(node: Node) -> None:
    casino = casino_on(node)
    table, (alice,) = opened(casino, "alice")
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    casino.place_bet(request_id="bet", round_id=round_id, account_id=alice, bet=HEADS, stake=100)
    casino.close_betting(request_id="close", round_id=round_id)
    upgraded = Casino(node.app, coin_games("1.1"))  # same rules, another wheel
    upgraded.record_outcome(  # the throw settles
        request_id="outcome",
        round_id=round_id,
        outcome={"face": "heads"},
        source=seen(node, casino, round_id, {"face": "heads"}),
    )
    assert casino.account(alice).balance == 1100
    assert casino.round(round_id).game_version == "1.0"  # what played it, for information


@pytest.mark.parametrize(("plugin", "installed"), [(NewRulesPlugin, "1.0")])
def test_a_round_settles_only_under_the_rules_it_opened_with(
    node: Node, plugin: type[CoinPlugin], installed: str
) -> None:
    casino = casino_on(node)
    table, (alice,) = opened(casino, "alice")
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    casino.place_bet(request_id="bet", round_id=round_id, account_id=alice, bet=HEADS, stake=100)
    casino.close_betting(request_id="close", round_id=round_id)
    source = seen(node, casino, round_id, {"face": "heads"})
    upgraded = Casino(node.app, coin_games(installed, plugin()))
    count = event_count(node.app)
    with pytest.raises(  # the throw settles: it is refused under other rules
        InvalidCommandError, match=rf"opened with coin 1\.0 .* but {installed} .* is installed"
    ):
        upgraded.record_outcome(
            request_id="outcome", round_id=round_id, outcome={"face": "heads"}, source=source
        )
    assert event_count(node.app) == count
    assert casino.round(round_id).status == CLOSED
    assert casino.account(alice).balance == 900
    # Nor does a new round take bets under rules other than its own.
    second = casino.open_round(request_id="round-2", table_id=table, dealer="D1")
    count = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="is installed"):
        upgraded.place_bet(
            request_id="bet-2", round_id=second, account_id=alice, bet=HEADS, stake=100
        )
    assert event_count(node.app) == count
    # The original game settles it; the refused request id was never used.
    casino.record_outcome(
        request_id="outcome", round_id=round_id, outcome={"face": "heads"}, source=source
    )
    assert casino.account(alice).balance == 1100
