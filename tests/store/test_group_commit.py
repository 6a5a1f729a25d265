"""The command path at a live table (issue 17), on both stores: concurrent
commands share commits; each stays atomic, idempotent and acknowledged only
after its batch commits; a batch that conflicts with another node is applied
again from fresh state; bad input in a burst is refused on its own; and a bet
costs the same whatever its round holds (no copy, no replay, no scan)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import BatchSettings, Casino
from ledger.casino.runner import Work
from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import Role
from ledger.domain.round import Round
from ledger.errors import ConfigError, InvalidCommandError, RequestIdReusedError
from ledger.node import Node, open_node
from tests.casino_support import HEADS, LIMITS, domain_events, event_count
from tests.coin_game import COIN_GAMES
from tests.conftest import PASSPHRASE

PLAYERS = 40


def table_and_round(casino: Casino, players: int = PLAYERS) -> tuple[str, list[str]]:
    table = casino.open_table(
        request_id="t", name="Live", game="coin", kind="physical", currency="EUR", limits=LIMITS
    )
    wallets = []
    for n in range(players):
        wallet = casino.open_account(request_id=f"a{n}", owner=f"p{n}", currency="EUR")
        casino.deposit(request_id=f"d{n}", account_id=wallet, amount=10_000)
        wallets.append(wallet)
    return casino.open_round(request_id="r", table_id=table, dealer="D"), wallets


def together(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls on as many threads, started at once; each one's result or error."""
    start = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(n: int) -> None:
        start.wait()
        try:
            results[n] = calls[n]()
        except Exception as exc:  # kept for the test to look at
            results[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def bet(casino: Casino, round_id: str, wallet: str, key: str | None = None) -> Callable[[], Any]:
    return lambda: casino.place_bet(
        request_id=key or str(uuid.uuid4()),
        round_id=round_id,
        account_id=wallet,
        bet=HEADS,
        stake=10,
    )


def test_concurrent_bets_share_commits_and_each_is_in_the_round_once(node: Node) -> None:
    casino = Casino(node.app, COIN_GAMES)
    round_id, wallets = table_and_round(casino)
    batches, commands = casino.runner.batches, casino.runner.commands
    results = together([bet(casino, round_id, w) for w in wallets])
    assert all(isinstance(r, str) for r in results), results
    shared = casino.runner.batches - batches
    assert casino.runner.commands - commands == PLAYERS
    assert shared < PLAYERS  # several commands a commit
    placed = [e for _, e in domain_events(node.app) if isinstance(e, Round.BetPlaced)]
    assert sorted(e.bet_id for e in placed) == sorted(results)  # each once, none lost
    assert [casino.account(w).balance for w in wallets] == [9_990] * PLAYERS
    verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES))


def test_a_refused_command_spoils_nothing_in_its_batch(node: Node) -> None:
    casino = Casino(node.app, COIN_GAMES)
    round_id, wallets = table_and_round(casino)
    broke = casino.open_account(request_id="broke", owner="broke", currency="EUR")
    before = event_count(node.app)
    calls = [bet(casino, round_id, w) for w in wallets]
    calls[5] = bet(casino, round_id, broke)  # no money
    calls[9] = bet(casino, round_id, str(uuid.uuid4()))  # no such account
    calls[13] = lambda: casino.place_bet(  # over the table's limit
        request_id="too-much", round_id=round_id, account_id=wallets[13], bet=HEADS, stake=10**6
    )
    results = together(calls)
    refused = {n: r for n, r in enumerate(results) if isinstance(r, Exception)}
    assert set(refused) == {5, 9, 13}
    assert all(isinstance(r, InvalidCommandError) for r in refused.values())
    assert "more than the available balance" in str(refused[5])
    assert "no account" in str(refused[9])
    assert "outside the table's limits" in str(refused[13])
    # Two events for each accepted bet (the bet with its request, the debit), nothing
    # for the rest.
    assert event_count(node.app) - before == 2 * (PLAYERS - 3)


def test_a_command_failing_half_way_leaves_nothing_and_the_batch_commits(node: Node) -> None:
    """A body that changed an aggregate, then raised: its change is dropped and
    the commands before it in the batch (on the same aggregates) still commit."""
    casino = Casino(node.app, COIN_GAMES)
    round_id, wallets = table_and_round(casino, players=4)
    release = threading.Event()

    def slow(work: Work) -> tuple[Any, list[Aggregate]]:
        release.wait(60)  # hold the writer so the next commands join one batch
        return None, []

    def half_way(work: Work) -> tuple[Any, list[Aggregate]]:
        account = work.account(wallets[0])
        account.deposit(5, "half")  # changed...
        raise InvalidCommandError("refused after a change")  # ...then refused

    runner = casino.runner
    held = runner.submit("hold", "hold", {}, slow)
    time.sleep(0.1)
    first = casino.submit_bet(
        request_id="b0", round_id=round_id, account_id=wallets[0], bet=HEADS, stake=10
    )
    failing = runner.submit("half", "half", {}, half_way)
    last = casino.submit_bet(
        request_id="b1", round_id=round_id, account_id=wallets[0], bet=HEADS, stake=10
    )
    release.set()
    held.result(60)
    assert isinstance(first.result(60), str) and isinstance(last.result(60), str)
    with pytest.raises(InvalidCommandError, match="refused after a change"):
        failing.result(60)
    assert casino.account(wallets[0]).balance == 10_000 - 20  # the 5 never arrived
    verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES))


def test_a_retry_returns_the_first_result_in_the_same_batch_or_a_later_one(node: Node) -> None:
    casino = Casino(node.app, COIN_GAMES)
    round_id, wallets = table_and_round(casino, players=8)
    results = together([bet(casino, round_id, wallets[n % 2], key="same") for n in range(8)])
    # The same request id from another wallet is another request: refused.
    refused = [r for r in results if isinstance(r, Exception)]
    accepted = {r for r in results if isinstance(r, str)}
    assert len(accepted) == 1
    assert refused and all(isinstance(r, RequestIdReusedError) for r in refused)
    count = event_count(node.app)
    # A later batch, from this node's memory and from another node's view of the store.
    (bet_id,) = accepted
    first_wallet = next(
        e.account_id
        for _, e in domain_events(node.app)
        if isinstance(e, Round.BetPlaced) and e.bet_id == bet_id
    )
    assert bet(casino, round_id, str(first_wallet), key="same")() == bet_id
    fresh = Casino(node.app, COIN_GAMES)  # no memory of it: found in the store
    assert bet(fresh, round_id, str(first_wallet), key="same")() == bet_id
    assert event_count(node.app) == count  # nothing recorded by the retries


def test_an_answer_comes_only_after_its_batch_is_committed(node: Node, monkeypatch: Any) -> None:
    casino = Casino(node.app, COIN_GAMES)
    round_id, wallets = table_and_round(casino, players=2)
    entered, release = threading.Event(), threading.Event()
    real = node.app.record_events

    def slow_commit(events: Any, **kwargs: Any) -> Any:
        entered.set()
        release.wait(60)
        return real(events, **kwargs)

    monkeypatch.setattr(node.app, "record_events", slow_commit)
    answer = casino.submit_bet(
        request_id="b", round_id=round_id, account_id=wallets[0], bet=HEADS, stake=10
    )
    assert entered.wait(60)
    time.sleep(0.2)
    assert not answer.done()  # applied, sealed, being committed: not acknowledged yet
    release.set()
    assert isinstance(answer.result(60), str)


def test_a_batch_conflicting_with_another_node_is_applied_again(
    node: Node, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two nodes (their own node keys) bet on one round at once: batches lose
    races and are applied again from fresh state; nothing is lost or doubled."""
    casino = Casino(node.app, COIN_GAMES)
    round_id, wallets = table_and_round(casino)
    node.keys.create("ledger-node-b", Role.LEDGER_NODE, PASSPHRASE)
    monkeypatch.setenv("LEDGER_NODE_KEY", "ledger-node-b")
    other = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE, anchor_seconds=0)
    monkeypatch.delenv("LEDGER_NODE_KEY")
    node.app.mapper.signer_check = SignerCheck(node.keys.keyring())  # type: ignore[attr-defined]
    try:
        theirs = Casino(other.app, COIN_GAMES)
        conflicts = 0
        # Each node's first commit waits until the other has applied its first
        # batch too: both were applied from the same state, so one must lose.
        both_applied = threading.Barrier(2)

        def counting(real: Callable[..., Any]) -> Callable[..., Any]:
            first = True

            def record(events: Any, **kwargs: Any) -> Any:
                nonlocal conflicts, first
                if first:
                    first = False
                    both_applied.wait(60)
                try:
                    return real(events, **kwargs)
                except IntegrityError:
                    conflicts += 1
                    raise

            return record

        for app in (node.app, other.app):
            monkeypatch.setattr(app, "record_events", counting(app.record_events))
        calls = [bet(casino, round_id, w) for w in wallets] + [
            bet(theirs, round_id, w) for w in wallets
        ]
        results = together(calls)
    finally:
        other.close()
    assert all(isinstance(r, str) for r in results), results
    placed = [e for _, e in domain_events(node.app) if isinstance(e, Round.BetPlaced)]
    assert sorted(e.bet_id for e in placed) == sorted(results)
    assert [casino.account(w).balance for w in wallets] == [9_980] * PLAYERS
    assert conflicts > 0, "the two nodes never raced"
    verify_store(
        node.app, node.keys.keyring(), VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
    )


def test_a_bet_costs_the_same_whatever_its_round_holds(node: Node, monkeypatch: Any) -> None:
    """No copy of the round (the working set's live one), no replay of the game
    (betting open is recorded on the round), no copy of the bets placed (the
    game sees a read-only view of them)."""
    casino = Casino(node.app, COIN_GAMES)
    round_id, wallets = table_and_round(casino, players=4)
    for n in range(200):
        bet(casino, round_id, wallets[n % 4])()
    game = COIN_GAMES["coin"]
    seen: list[Any] = []
    steps: list[int] = []
    real_validate, real_step = type(game).validate_bet, type(game).step

    def validate(self: Any, bet: Any, placed: Any = None) -> Any:
        seen.append(placed)
        return real_validate(self, bet, placed)

    def step(self: Any, *args: Any) -> Any:
        steps.append(1)
        return real_step(self, *args)

    reads: list[Any] = []
    real_get = node.app.repository.get

    def get(aggregate_id: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append(aggregate_id)
        return real_get(aggregate_id, *args, **kwargs)

    monkeypatch.setattr(type(game), "validate_bet", validate)
    monkeypatch.setattr(type(game), "step", step)
    monkeypatch.setattr(node.app.repository, "get", get)
    bet(casino, round_id, wallets[0])()
    monkeypatch.undo()
    live = next(a for a in casino.runner.live if str(a.id) == round_id)
    assert steps == []  # the game was not asked to replay the round
    assert reads == []  # round and wallet were live: nothing read, nothing copied
    (placed,) = seen
    assert not hasattr(placed, "__setitem__")  # read-only...
    assert len(placed) == len(live.bets) == 201  # ...and a view: it shows the bet placed since


def test_batch_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert BatchSettings.from_env() == BatchSettings()
    monkeypatch.setenv("LEDGER_BATCH_SIZE", "64")
    monkeypatch.setenv("LEDGER_BATCH_WAIT_MS", "2.5")
    assert BatchSettings.from_env() == BatchSettings(64, 0.0025)
    for name, value in (("LEDGER_BATCH_SIZE", "0"), ("LEDGER_BATCH_WAIT_MS", "lots")):
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigError, match=f"{name}={value!r}: expected a number"):
            BatchSettings.from_env()
        monkeypatch.setenv(name, "1")
