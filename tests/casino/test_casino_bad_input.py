"""Bad input to the Casino: each is refused with a `LedgerError` that says
what is wrong, and nothing is recorded (no event, no balance moves).

One world per store serves every case, in turn: a case that recorded
anything fails its own snapshot check, and each leaves the world as it found
it (its request ids are its own; the deposit that proves its id still free is
withdrawn again)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

import pytest

from ledger.casino import Casino
from ledger.crypto.keystore import KeyDirectory
from ledger.errors import InvalidCommandError, LedgerError, NotFoundError
from ledger.node import Node, open_node
from tests.casino_support import HEADS, LIMITS, TAILS, casino_on, event_count, seen, table_of
from tests.conftest import PASSPHRASE, new_store


@dataclass
class World:
    """A table with rounds in every state, and wallets in every condition."""

    casino: Casino
    table: str
    house: str
    alice: str  # EUR 470: 500 staked in `betting` (per-round max 800), 3 x 10 elsewhere
    poor: str  # EUR 50
    dollars: str  # USD 1000
    closed: str  # EUR, closed
    betting: str  # a round taking bets
    closed_round: str  # betting closed, no outcome yet
    decided: str  # outcome recorded, not settled
    settled: str
    bet: str  # alice's bet in `betting`
    case: str = ""  # the case being run: its request ids are "bad-<kind>-<case>"

    def request(self, kind: str) -> str:
        return f"bad-{kind}-{self.case}"[:200]

    def snapshot(self) -> tuple[Any, ...]:
        accounts = (self.house, self.alice, self.poor, self.dollars, self.closed)
        rounds = (self.betting, self.closed_round, self.decided, self.settled)
        return (
            event_count(self.casino.app),
            [self.casino.account(a).balance for a in accounts],
            [(self.casino.round(r).status, dict(self.casino.round(r).bets)) for r in rounds],
        )


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def shared_node(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Node]:
    workdir = tmp_path_factory.mktemp("bad-input")
    keys = KeyDirectory(workdir / "keys")
    keys.create_node_keys(PASSPHRASE)
    with new_store(request.param, workdir) as url:
        node = open_node(
            url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
        )
        try:
            yield node
        finally:
            node.close()


@pytest.fixture(scope="module")
def shared_world(shared_node: Node) -> World:
    node = shared_node
    casino = casino_on(node)
    table = table_of(casino, "coin", LIMITS)
    accounts = {}
    for owner, currency, amount in [
        ("alice", "EUR", 1000),
        ("poor", "EUR", 50),
        ("dollars", "USD", 1000),
        ("closed", "EUR", 0),
    ]:
        accounts[owner] = casino.open_account(
            request_id=f"open-{owner}", owner=owner, currency=currency
        )
        if amount:
            casino.deposit(request_id=f"dep-{owner}", account_id=accounts[owner], amount=amount)
    casino.close_account(request_id="close-acc", account_id=accounts["closed"], reason="left")
    rounds = [
        casino.open_round(request_id=f"round-{n}", table_id=table, dealer="D1") for n in range(4)
    ]
    for n, round_id in enumerate(rounds[1:], start=1):
        casino.place_bet(
            request_id=f"bet-{n}",
            round_id=round_id,
            account_id=accounts["alice"],
            bet=TAILS,
            stake=10,
        )
        casino.close_betting(request_id=f"close-{n}", round_id=round_id)
    for n, round_id in enumerate(rounds[2:], start=2):
        casino.record_outcome(
            request_id=f"outcome-{n}",
            round_id=round_id,
            outcome={"face": "heads"},
            source=seen(node, casino, round_id, {"face": "heads"}),
        )
    bet = casino.place_bet(
        request_id="bet-0", round_id=rounds[0], account_id=accounts["alice"], bet=HEADS, stake=500
    )
    return World(
        casino=casino,
        table=table,
        house=str(casino.table(table).house_account),
        alice=accounts["alice"],
        poor=accounts["poor"],
        dollars=accounts["dollars"],
        closed=accounts["closed"],
        betting=rounds[0],
        closed_round=rounds[1],
        decided=rounds[2],
        settled=rounds[3],
        bet=bet,
    )


@pytest.fixture
def world(shared_world: World, request: pytest.FixtureRequest) -> World:
    shared_world.case = request.node.callspec.id
    return shared_world


def bet(w: World, stake: object, *, account: str = "", round_id: str = "", on: Any = HEADS) -> None:
    w.casino.place_bet(
        request_id=w.request("bet"),
        round_id=round_id or w.betting,
        account_id=account or w.poor,
        bet=on,
        stake=stake,  # type: ignore[arg-type]
    )


def deposit(w: World, amount: object, account: str = "") -> None:
    w.casino.deposit(request_id=w.request("dep"), account_id=account or w.alice, amount=amount)  # type: ignore[arg-type]


def withdraw(w: World, amount: object, account: str = "") -> None:
    w.casino.withdraw(request_id=w.request("wd"), account_id=account or w.alice, amount=amount)  # type: ignore[arg-type]


def settle(w: World, round_id: str) -> None:
    w.casino.settle(request_id=w.request("settle"), round_id=round_id)


def outcome(w: World, face: Any, round_id: str = "") -> None:
    w.casino.record_outcome(
        request_id=w.request("outcome"),
        round_id=round_id or w.closed_round,
        outcome=face,
        source={},
    )


UNKNOWN = str(uuid4())
WHOLE = "must be a whole number of minor units"
TOO_BIG = r"arguments are not plain JSON: 100000000000000000000 exceeds"

Case = tuple[Callable[[World], object], type[LedgerError], str]
CASES: dict[str, Case] = {
    # Stakes (from `poor`, with room under every limit but the balance).
    "stake zero": (lambda w: bet(w, 0), InvalidCommandError, "stake must be positive, not 0"),
    "stake negative": (lambda w: bet(w, -20), InvalidCommandError, "must be positive, not -20"),
    "stake fractional": (lambda w: bet(w, 1.5), InvalidCommandError, f"{WHOLE}, not 1.5"),
    "stake bool": (lambda w: bet(w, True), InvalidCommandError, f"{WHOLE}, not True"),
    "stake string": (lambda w: bet(w, "10"), InvalidCommandError, f"{WHOLE}, not '10'"),
    "stake None": (lambda w: bet(w, None), InvalidCommandError, f"{WHOLE}, not None"),
    "stake absurd": (lambda w: bet(w, 10**20), InvalidCommandError, TOO_BIG),
    "stake past MAX_AMOUNT": (
        lambda w: bet(w, 10**15),
        InvalidCommandError,
        "stake 1000000000000000 is larger than the limit",
    ),
    "stake NaN": (lambda w: bet(w, float("nan")), InvalidCommandError, "not plain JSON: nan"),
    # Deposits and withdrawals.
    "deposit zero": (lambda w: deposit(w, 0), InvalidCommandError, "deposit must be positive"),
    "deposit negative": (lambda w: deposit(w, -1), InvalidCommandError, "must be positive, not -1"),
    "deposit fractional": (lambda w: deposit(w, 1.5), InvalidCommandError, f"{WHOLE}, not 1.5"),
    "deposit bool": (lambda w: deposit(w, True), InvalidCommandError, f"{WHOLE}, not True"),
    "deposit string": (lambda w: deposit(w, "10"), InvalidCommandError, f"{WHOLE}, not '10'"),
    "deposit absurd": (lambda w: deposit(w, 10**20), InvalidCommandError, TOO_BIG),
    "deposit past MAX_AMOUNT": (
        lambda w: deposit(w, 10**13 + 1),
        InvalidCommandError,
        "larger than the limit 10000000000000",
    ),
    "withdraw zero": (lambda w: withdraw(w, 0), InvalidCommandError, "withdrawal must be positive"),
    "withdraw fractional": (lambda w: withdraw(w, 0.5), InvalidCommandError, f"{WHOLE}, not 0.5"),
    "withdraw over the balance": (
        lambda w: withdraw(w, 471),  # alice holds 1000 - 500 - 3 x 10 = 470
        InvalidCommandError,
        "withdrawal of 471 is more than the balance 470",
    ),
    # Who and where.
    "wrong currency": (
        lambda w: bet(w, 20, account=w.dollars),
        InvalidCommandError,
        "holds USD, not EUR",
    ),
    "unknown account (bet)": (
        lambda w: bet(w, 20, account=UNKNOWN),
        NotFoundError,
        f"no account {UNKNOWN} in this store",
    ),
    "unknown account (deposit)": (
        lambda w: deposit(w, 20, account=UNKNOWN),
        NotFoundError,
        f"no account {UNKNOWN} in this store",
    ),
    "malformed account id": (
        lambda w: deposit(w, 20, account="alice"),
        NotFoundError,
        "no account alice in this store",
    ),
    "a round id as an account": (
        lambda w: withdraw(w, 20, account=w.betting),
        NotFoundError,
        "is a round, not an account",
    ),
    "closed account (deposit)": (
        lambda w: deposit(w, 20, account=w.closed),
        InvalidCommandError,
        "is closed",
    ),
    "closed account (bet)": (
        lambda w: bet(w, 20, account=w.closed),
        InvalidCommandError,
        "is closed",
    ),
    "a bet from the house's bankroll": (
        lambda w: bet(w, 20, account=w.house),
        InvalidCommandError,
        "is not a player's wallet",
    ),
    "unknown round (bet)": (
        lambda w: bet(w, 20, round_id=UNKNOWN),
        NotFoundError,
        f"no round {UNKNOWN} in this store",
    ),
    "unknown round (settle)": (
        lambda w: settle(w, UNKNOWN),
        NotFoundError,
        f"no round {UNKNOWN} in this store",
    ),
    "an account id as a round": (
        lambda w: settle(w, w.alice),
        NotFoundError,
        "is an account, not a round",
    ),
    "a table id as a round": (
        lambda w: settle(w, w.table),
        NotFoundError,
        "is a table, not a round",
    ),
    "unknown table": (
        lambda w: w.casino.open_round(request_id=w.request("round"), table_id=UNKNOWN, dealer="D1"),
        NotFoundError,
        f"no table {UNKNOWN} in this store",
    ),
    # The round's state.
    "a bet after betting closed": (
        lambda w: bet(w, 20, round_id=w.closed_round),
        InvalidCommandError,
        "is not taking bets \\(it is closed\\)",
    ),
    "a bet on a settled round": (
        lambda w: bet(w, 20, round_id=w.settled),
        InvalidCommandError,
        "is not taking bets \\(it is settled\\)",
    ),
    "settling before the outcome": (
        lambda w: settle(w, w.closed_round),
        InvalidCommandError,
        "has no outcome to settle on \\(it is closed\\)",
    ),
    "settling a settled round": (
        lambda w: settle(w, w.settled),
        InvalidCommandError,
        "is already settled",
    ),
    "settling a round its outcome settled": (
        lambda w: settle(w, w.decided),
        InvalidCommandError,
        "is already settled",
    ),
    "settling while betting": (
        lambda w: settle(w, w.betting),
        InvalidCommandError,
        "has no outcome to settle on \\(it is betting\\)",
    ),
    "an outcome twice": (
        lambda w: outcome(w, {"face": "tails"}, w.decided),
        InvalidCommandError,
        "is not awaiting an outcome \\(it is settled\\)",  # the throw settled it
    ),
    "an outcome while betting": (
        lambda w: outcome(w, {"face": "tails"}, w.betting),
        InvalidCommandError,
        "is not awaiting an outcome \\(it is betting\\)",
    ),
    "withdrawing an unknown bet": (
        lambda w: w.casino.withdraw_bet(
            request_id=w.request("wb"), round_id=w.betting, account_id=w.alice, bet_id="nope"
        ),
        InvalidCommandError,
        "no bet nope in round",
    ),
    "withdrawing someone else's bet": (
        lambda w: w.casino.withdraw_bet(
            request_id=w.request("wb"), round_id=w.betting, account_id=w.poor, bet_id=w.bet
        ),
        InvalidCommandError,
        "is not account .*'s to withdraw",
    ),
    "withdrawing a bet after betting closed": (
        lambda w: w.casino.withdraw_bet(
            request_id=w.request("wb"),
            round_id=w.closed_round,
            account_id=w.alice,
            bet_id=next(iter(w.casino.round(w.closed_round).bets)),
        ),
        InvalidCommandError,
        "is not taking bets",
    ),
    # Limits and balance.
    "over the table max": (
        lambda w: bet(w, 501, account=w.alice),
        InvalidCommandError,
        "stake 501 is outside the table's limits 10..500",
    ),
    "under the table min": (
        lambda w: bet(w, 9),
        InvalidCommandError,
        "stake 9 is outside the table's limits 10..500",
    ),
    "over the per-round max": (
        lambda w: bet(w, 301, account=w.alice),  # 500 already staked; max 800
        InvalidCommandError,
        "total in the round past 800",
    ),
    "over the balance": (
        lambda w: bet(w, 51),
        InvalidCommandError,
        "stake of 51 is more than the available balance 50",
    ),
    # The game's own checks.
    "unknown bet type": (
        lambda w: bet(w, 20, on={"on": "red"}),
        InvalidCommandError,
        "unknown bet \\{'on': 'red'\\}",
    ),
    "a bet with extra fields": (
        lambda w: bet(w, 20, on={"on": "heads", "odds": 100}),
        InvalidCommandError,
        "unknown bet",
    ),
    "invalid outcome": (
        lambda w: outcome(w, {"face": "sideways"}),
        InvalidCommandError,
        "bad outcome \\{'face': 'sideways'\\}",
    ),
    "an empty outcome": (lambda w: outcome(w, {}), InvalidCommandError, "bad outcome \\{\\}"),
    # Requests and set-up.
    "an empty request id": (
        lambda w: w.casino.deposit(request_id="", account_id=w.alice, amount=10),
        InvalidCommandError,
        "a request id is 1..200 characters",
    ),
    "a request id too long": (
        lambda w: w.casino.deposit(request_id="r" * 201, account_id=w.alice, amount=10),
        InvalidCommandError,
        "a request id is 1..200 characters",
    ),
    "not a currency": (
        lambda w: w.casino.open_account(request_id=w.request("open"), owner="eve", currency="EURO"),
        InvalidCommandError,
        "'EURO' is not an ISO 4217 currency code",
    ),
    "limits out of order": (
        lambda w: w.casino.open_table(
            request_id=w.request("table"),
            name="T2",
            game="coin",
            kind="physical",
            currency="EUR",
            limits={"min_bet": 100, "max_bet": 50, "max_round": 800},
        ),
        InvalidCommandError,
        "min_bet <= max_bet <= max_round",
    ),
    "unknown game": (
        lambda w: w.casino.open_table(
            request_id=w.request("table"),
            name="T2",
            game="dice",
            kind="physical",
            currency="EUR",
            limits=LIMITS,
        ),
        NotFoundError,
        "unknown game 'dice'",
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_bad_input_is_refused_and_records_nothing(world: World, case: str) -> None:
    call, error, message = CASES[case]
    before = world.snapshot()
    with pytest.raises(error, match=message) as refused:
        call(world)
    assert isinstance(refused.value, LedgerError)
    assert world.snapshot() == before
    # The refusal recorded no request either: the id is still free to use.
    casino, alice = world.casino, world.alice
    assert casino.deposit(request_id=world.request("dep"), account_id=alice, amount=1) == 471
    assert casino.withdraw(request_id=world.request("undo"), account_id=alice, amount=1) == 470
