"""Two processes, each with its own node on the same store, bet from ONE
wallet at once, asking for more than it holds: no overdraft, no lost or
doubled bet, and a request sent by both is carried out once."""

from __future__ import annotations

import multiprocessing
from itertools import pairwise
from typing import Any

from eventsourcing.persistence import IntegrityError

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.domain.request import request_uuid
from ledger.domain.round import Round
from ledger.domain.round_records import Limits
from ledger.errors import InvalidCommandError
from ledger.node import Node, open_node
from tests.casino_support import casino_on, domain_events, table_of
from tests.coin_game import COIN_GAMES
from tests.conftest import PASSPHRASE

DEPOSIT = 1000
BETS_PER_PROCESS = 40
DUPLICATES = 4  # request ids both processes send (each twice)
LIMITS: Limits = {"min_bet": 1, "max_bet": 100, "max_round": 100_000}

# (request id, stake, side); what each process sends, in order.
Plan = list[tuple[str, int, str]]
# (request id, stake, bet id or None, refusal message or None)
Outcome = tuple[str, int, str | None, str | None]


def stake_of(n: int) -> int:
    return 10 + 5 * (n % 4)  # 10, 15, 20, 25


def plan(worker: int) -> Plan:
    # The shared requests first (while money is left), each sent twice by both.
    shared = [(f"dup-{j}", 20, "heads") for j in range(DUPLICATES)]
    own = [
        (f"w{worker}-{n}", stake_of(n + worker), "heads" if n % 2 else "tails")
        for n in range(BETS_PER_PROCESS)
    ]
    return shared + shared + own


def bettor(
    store: str, keys: str, round_id: str, account: str, worker: int, start: Any
) -> tuple[list[Outcome], int]:
    """Send this worker's plan; return what each request got, and how many
    batches lost a race (and were applied again from fresh state)."""
    node = open_node(store, keys, passphrase=PASSPHRASE)
    conflicts = 0
    real_save = node.app.record_events

    def save(events: Any, **kwargs: Any) -> Any:
        nonlocal conflicts
        try:
            return real_save(events, **kwargs)
        except IntegrityError:
            conflicts += 1
            raise

    node.app.record_events = save  # type: ignore[method-assign]
    try:
        casino = Casino(node.app, COIN_GAMES)
        start.wait(timeout=120)  # both begin together, however slowly each started
        outcomes: list[Outcome] = []
        for request_id, stake, side in plan(worker):
            try:
                bet_id = casino.place_bet(
                    request_id=request_id,
                    round_id=round_id,
                    account_id=account,
                    bet={"on": side},
                    stake=stake,
                )
                outcomes.append((request_id, stake, bet_id, None))
            except InvalidCommandError as exc:
                outcomes.append((request_id, stake, None, str(exc)))
        return outcomes, conflicts
    finally:
        node.close()


def test_two_processes_betting_from_one_wallet(node: Node, store_url: str) -> None:
    casino = casino_on(node)
    table = table_of(casino, "coin", LIMITS)
    account = casino.open_account(request_id="open", owner="alice", currency="EUR")
    casino.deposit(request_id="deposit", account_id=account, amount=DEPOSIT)
    round_id = casino.open_round(request_id="round", table_id=table, dealer="D1")
    # Each shared request is sent four times but asks for its stake once.
    requested = sum(stake for w in (0, 1) for _, stake, _ in plan(w)) - 3 * 20 * DUPLICATES
    assert requested > DEPOSIT + 300  # far more than the wallet holds

    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, context.Pool(2) as pool:
        start = manager.Barrier(2)
        args = [(store_url, str(node.keys.path), round_id, account, w, start) for w in (0, 1)]
        answers = pool.starmap(bettor, args)
    outcomes = [o for found, _ in answers for o in found]
    conflicts = sum(c for _, c in answers)

    # Every request was answered: a bet, or a refusal for the balance and nothing else.
    assert len(outcomes) == 2 * (2 * DUPLICATES + BETS_PER_PROCESS)
    refused = [o for o in outcomes if o[2] is None]
    accepted = {o[0]: (o[1], o[2]) for o in outcomes if o[2] is not None}
    assert refused, "the wallet should have run out"
    for request_id, stake, _, message in refused:
        assert message is not None and f"stake of {stake} is more than the available" in message
        assert request_id not in accepted
    # A request sent four times (twice by each process) made exactly one bet.
    for j in range(DUPLICATES):
        bet_ids = {o[2] for o in outcomes if o[0] == f"dup-{j}"}
        assert len(bet_ids) == 1 and None not in bet_ids

    # The round holds every accepted bet exactly once, and nothing else.
    game_round = casino.round(round_id)
    placed = [e for _, e in domain_events(node.app) if isinstance(e, Round.BetPlaced)]
    assert sorted(e.request_id for e in placed) == sorted(accepted)
    # (The two really raced. On SQLite, batches lost to the other process and
    # were applied again from fresh state; on PostgreSQL the two processes of
    # one node take turns on its writer lock, so their bets interleave in the
    # log and neither ever loses a race.)
    if store_url.startswith("sqlite"):
        assert conflicts > 0, "the two SQLite writers never lost a race"
    else:
        order = [e.request_id[:2] for e in placed if not e.request_id.startswith("dup")]
        switches = sum(a != b for a, b in pairwise(order))
        assert switches > 2, f"the two workers never overlapped: {order}"
        assert conflicts == 0, "one node's processes raced past its writer lock"
    assert {e.bet_id: e.request_id for e in placed} == {
        bet_id: request_id for request_id, (_, bet_id) in accepted.items()
    }
    assert {b: r["stake"] for b, r in game_round.bets.items()} == {
        bet_id: stake for stake, bet_id in accepted.values()
    }
    # No overdraft; the wallet holds exactly the deposit less the accepted stakes,
    # and less than any refused stake (a refusal was never spurious).
    staked = sum(stake for stake, _ in accepted.values())
    balance = casino.account(account).balance
    assert 0 <= balance == DEPOSIT - staked
    assert balance < min(stake for _, stake, _, _ in refused)
    # A refused request was not recorded; an accepted one was, once (in its bet,
    # which the request index names; no record of its own).
    indexed = node.app.tables.indexed_requests([r for r, _, _, _ in refused] + list(accepted))
    for request_id, _, _, _ in refused:
        assert request_id not in indexed
        assert not list(node.app.events.get(request_uuid(request_id)))
    placed_by = {e.request_id: (e.originator_id, e.originator_version) for e in placed}
    for request_id in accepted:
        assert indexed[request_id] == placed_by[request_id]
        assert not list(node.app.events.get(request_uuid(request_id)))
    # And the ledger the two writers made verifies, money included.
    verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, workers=1, games=COIN_GAMES)
    )
