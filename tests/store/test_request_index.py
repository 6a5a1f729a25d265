"""A bet records its own request (issue 38, item 3): the bet's signed
`Round.BetPlaced` holds its request id and fingerprint, and the store keeps
an index row to it instead of a `Request.Completed` of its own (a bet costs
two events, not three). On both stores, attacked by someone with database
rights: the index only says where to look (a retry is answered from the
signed event, and a row naming another event is refused); a deleted row lets
a retry be placed twice, which `verify` finds; a store written before (bets
with request records of their own) still answers its retries."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.utils import get_topic

from ledger.audit.level import Level
from ledger.audit.verify import VerifyOptions, verify_store
from ledger.casino import Casino, open_ledger
from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.domain.account import Account
from ledger.domain.request import Request, request_uuid
from ledger.domain.round import Round
from ledger.errors import RequestIdReusedError, VerificationError
from ledger.node import Node, open_node
from ledger.store.recorders import REQUESTS
from tests.attacker import Attacker
from tests.casino_support import HEADS, LIMITS, casino_on, domain_events, event_count, table_of
from tests.coin_game import COIN_GAMES
from tests.conftest import PASSPHRASE

DATA = Path(__file__).parents[1] / "data"


def a_round(casino: Casino, *owners: str) -> tuple[str, list[str]]:
    table = table_of(casino, "coin", LIMITS)
    wallets = []
    for owner in owners:
        wallet = casino.open_account(request_id=f"open-{owner}", owner=owner, currency="EUR")
        casino.deposit(request_id=f"fund-{owner}", account_id=wallet, amount=10_000)
        wallets.append(wallet)
    return casino.open_round(request_id="round", table_id=table, dealer="D"), wallets


def bet(casino: Casino, round_id: str, wallet: str, key: str, stake: int = 100) -> str:
    return casino.place_bet(
        request_id=key, round_id=round_id, account_id=wallet, bet=HEADS, stake=stake
    )


def test_a_bet_is_its_requests_record(node: Node) -> None:
    casino = casino_on(node)
    round_id, (alice,) = a_round(casino, "alice")
    before = event_count(node.app)
    bet_id = bet(casino, round_id, alice, "b1")
    written = domain_events(node.app, before)
    assert [get_topic(type(e)) for _, e in written] == [
        get_topic(Round.BetPlaced),
        get_topic(Account.Debited),
    ]
    placed: Any = written[0][1]
    assert placed.request_id == "b1" and placed.bet_id == bet_id
    assert len(placed.fingerprint) == 64
    assert node.app.tables.existing_streams([request_uuid("b1")]) == set()
    ((stream, version),) = node.app.tables.indexed_requests(["b1"]).values()
    assert (str(stream), version) == (round_id, placed.originator_version)
    # A retry: the first bet, nothing written; other arguments: refused.
    assert bet(casino, round_id, alice, "b1") == bet_id
    with pytest.raises(RequestIdReusedError, match="different place_bet"):
        bet(casino, round_id, alice, "b1", stake=101)
    with pytest.raises(RequestIdReusedError, match="different place_bet"):
        casino.deposit(request_id="b1", account_id=alice, amount=5)
    assert event_count(node.app) == before + 2
    # Every other command still has a request record of its own.
    casino.deposit(request_id="d1", account_id=alice, amount=5)
    assert node.app.tables.existing_streams([request_uuid("d1")]) == {request_uuid("d1")}
    verify_store(
        node.app, node.keys.keyring(), VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
    )


def test_a_deleted_index_row_lets_a_retry_in_twice_and_verify_finds_it(
    node: Node, store_url: str
) -> None:
    casino = casino_on(node)
    round_id, (alice,) = a_round(casino, "alice")
    first = bet(casino, round_id, alice, "b1")
    bet(casino, round_id, alice, "b2")
    Attacker(store_url).sql(f"DELETE FROM {REQUESTS} WHERE request_id = ?", ("b1",))
    fresh = Casino(node.app, COIN_GAMES)  # a node that never saw it (no memory of the retry)
    second = bet(fresh, round_id, alice, "b1")
    assert second != first  # the node cannot know: its index said nothing
    with pytest.raises(
        VerificationError,
        match=rf"round {round_id} \(coin\): request 'b1' placed a second bet \({second}\)",
    ):
        verify_store(
            node.app, node.keys.keyring(), VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
        )


def test_an_index_row_naming_another_event_is_refused(node: Node, store_url: str) -> None:
    casino = casino_on(node)
    round_id, (alice,) = a_round(casino, "alice")
    bet(casino, round_id, alice, "b1")
    other = bet(casino, round_id, alice, "b2", stake=200)
    attacker = Attacker(store_url)
    # b1's row pointed at b2's bet: a retry of b1 would be told b2's bet id.
    ((_, b2_version),) = node.app.tables.indexed_requests(["b2"]).values()
    attacker.sql(
        f"UPDATE {REQUESTS} SET originator_version = ? WHERE request_id = ?", (b2_version, "b1")
    )
    count = event_count(node.app)
    fresh = Casino(node.app, COIN_GAMES)
    with pytest.raises(VerificationError, match="no event there records it"):
        bet(fresh, round_id, alice, "b1")
    # Or at an event that is not a bet at all (the round's opening).
    attacker.sql(f"UPDATE {REQUESTS} SET originator_version = 1 WHERE request_id = ?", ("b1",))
    with pytest.raises(VerificationError, match="no event there records it"):
        bet(fresh, round_id, alice, "b1")
    assert event_count(node.app) == count
    assert other in fresh.round(round_id).bets


def test_two_nodes_racing_one_request_place_one_bet(node: Node, store_url: str) -> None:
    """The index's key is the request id: the second node's commit conflicts,
    is applied again, and answers with the first node's bet."""
    casino = casino_on(node)
    round_id, (alice,) = a_round(casino, "alice")
    other = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE)
    try:
        theirs = Casino(other.app, COIN_GAMES)
        theirs.round(round_id)  # their working set holds the round before ours moves it
        first = bet(casino, round_id, alice, "race")
        assert bet(theirs, round_id, alice, "race") == first
    finally:
        other.close()
    assert list(casino.round(round_id).bets) == [first]


@pytest.mark.parametrize("release", ["0.1", "0.2"])
def test_a_store_written_before_answers_its_bets_retries(
    tmp_path: Path, release: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its bets' requests are `Request.Completed` of their own: a retry of one is
    answered from it (same fingerprint: the first bet) or refused (other
    arguments), and nothing is written."""
    shutil.copytree(DATA / f"release-{release}-store", tmp_path / "store")
    store = f"sqlite:///{tmp_path / 'store' / 'ledger.db'}"
    keys = str(tmp_path / "store" / "keys")
    # Only its public keyring was kept: the node that reopens it has keys of its own.
    directory = KeyDirectory(Path(keys))
    for role in (Role.LEDGER_NODE, Role.CHECKPOINT):
        directory.create(f"reopened-{role.value}", role, PASSPHRASE)
    monkeypatch.setenv("LEDGER_NODE_KEY", f"reopened-{Role.LEDGER_NODE.value}")
    monkeypatch.setenv("LEDGER_CHECKPOINT_KEY", f"reopened-{Role.CHECKPOINT.value}")
    with open_ledger(store, keys, passphrase=PASSPHRASE, anchor_seconds=0) as opened:
        app, casino = opened.node.app, opened.casino
        records = [e for _, e in domain_events(app, 0) if isinstance(e, Request.Completed)]
        placed = {
            e.request_id: e for _, e in domain_events(app, 0) if isinstance(e, Round.BetPlaced)
        }
        record = next(r for r in records if r.command == "place_bet")
        old: Any = placed[record.request_id]
        assert old.fingerprint is None  # version 1, upcast
        count = event_count(app)
        args = {
            "request_id": record.request_id,
            "round_id": str(old.originator_id),
            "account_id": old.account_id,
            "bet": old.bet,
            "stake": old.stake,
        }
        # The simulator sent the bet as the game records it: the same fingerprint.
        assert casino.place_bet(**args) == record.result == old.bet_id
        with pytest.raises(RequestIdReusedError):
            casino.place_bet(**{**args, "stake": old.stake + 1})
        assert event_count(app) == count
