"""Money properties of the Casino under random command sequences (hypothesis).

A state machine drives a Casino on a fresh SQLite store per example with
valid and invalid commands, predicting from its own model which are accepted.
After every step it re-derives the money from the events in the store alone
and checks: postings sum to zero per currency; every account's balance (the
aggregate) equals deposits - withdrawals - stakes + returns as the events
record them; no player wallet is ever negative, at any point of the log; and
every settled or voided round's postings are exactly what its results say.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import pytest
from eventsourcing.domain import DomainEventProtocol
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ledger.casino import Casino
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.signing import Signer
from ledger.devices import DealerDevice
from ledger.domain.account import HOUSE, PLAYER, Account
from ledger.domain.money import MAX_AMOUNT, cashier, imbalance, in_play, posting, wallet
from ledger.domain.round import Round
from ledger.domain.round_records import BETTING, CLOSED, DECIDED, SETTLED, VOIDED, Limits
from ledger.errors import InvalidCommandError
from ledger.privacy.personal import PersonalData
from ledger.store.application import LedgerApplication
from tests.casino_support import domain_events, event_count
from tests.coin_game import COIN_GAMES
from tests.conftest import PASSPHRASE

T = TypeVar("T")
LIMITS: Limits = {"min_bet": 5, "max_bet": 200, "max_round": 300}
CURRENCIES = ("EUR", "USD")
# Mostly good amounts (so money moves), some of every kind of bad one.
INVALID = st.one_of(
    st.integers(min_value=-20, max_value=0),
    st.sampled_from([1.5, True, False, "10", None, 10**14, 10**20, float("nan")]),
)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`good` four times in five, else `bad`."""
    return st.integers(min_value=0, max_value=4).flatmap(lambda n: bad if n == 4 else good)


AMOUNTS = mostly(st.integers(min_value=1, max_value=400), INVALID)
SIDES = mostly(st.sampled_from(["heads", "tails"]), st.just("red"))
STAKES = mostly(  # in the table's limits, or outside them, or no amount at all
    st.integers(min_value=LIMITS["min_bet"], max_value=LIMITS["max_bet"]),
    st.one_of(
        st.integers(min_value=1, max_value=4), st.integers(min_value=201, max_value=400), INVALID
    ),
)


# Per rule, how many commands the casino accepted over a run: the machine must
# reach every corner (bets settled, voided, withdrawn), not just refusals.
ACCEPTED: dict[str, int] = defaultdict(int)


def is_amount(value: object) -> bool:
    return type(value) is int and 0 < value <= MAX_AMOUNT


@dataclass
class Keys:
    node: Signer
    operator: Signer
    keyring: Keyring
    device: DealerDevice


@dataclass
class ModelAccount:
    currency: str
    kind: str = PLAYER
    balance: int = 0
    closed: bool = False


@dataclass
class ModelRound:
    currency: str
    status: str = BETTING
    face: str | None = None
    bets: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # id: account, side, stake


class MoneyMachine(RuleBasedStateMachine):
    accounts = Bundle("accounts")
    rounds = Bundle("rounds")

    def __init__(self, keys: Keys) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="money-"))
        self.app = LedgerApplication(
            f"sqlite:///{self.directory / 'ledger.db'}",
            keyring=keys.keyring,
            signer=keys.node,
            personal=PersonalData(self.directory / "keys", None),
        )
        self.casino = Casino(self.app, COIN_GAMES)
        self.operator = keys.operator
        self.device = keys.device
        self.requests = 0
        self.model: dict[str, ModelAccount] = {}
        self.model_rounds: dict[str, ModelRound] = {}
        self.tables: dict[str, tuple[str, str]] = {}  # currency: (table, house)
        self.deposits: list[tuple[str, str, int, int]] = []  # request, account, amount, result
        self.events: list[tuple[int, DomainEventProtocol[UUID]]] = []
        for currency in CURRENCIES:
            table = self.casino.open_table(
                request_id=self.request(),
                name=f"{currency} table",
                game="coin",
                kind="physical",
                currency=currency,
                limits=LIMITS,
            )
            house = str(self.casino.table(table).house_account)
            self.tables[currency] = (table, house)
            self.model[house] = ModelAccount(currency, kind=HOUSE)

    def teardown(self) -> None:
        self.app.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    # Plumbing.
    def request(self) -> str:
        self.requests += 1
        return f"req-{self.requests}"

    def attempt(self, what: str, expected: bool, call: Callable[[], T]) -> tuple[bool, T | None]:
        """Run a command the model expects to be accepted or refused: (accepted, result)."""
        before = event_count(self.app)
        try:
            result = call()
        except InvalidCommandError as exc:
            assert not expected, f"refused, but the model expected it to pass: {exc}"
            assert event_count(self.app) == before, "a refused command recorded events"
            return False, None
        assert expected, f"accepted ({result!r}), but the model expected a refusal"
        assert event_count(self.app) > before
        ACCEPTED[what] += 1
        return True, result

    # (Funded wallets and open rounds from the start: hypothesis's swarm
    # testing switches ordinary rules off in some examples.)
    @initialize(target=accounts)
    def open_funded_wallets(self) -> MultipleResults[str]:
        return multiple(*[self.new_account(c, 1000) for c in ("EUR", "EUR", "USD")])

    @initialize(target=rounds)
    def open_first_rounds(self) -> MultipleResults[str]:
        return multiple(*[self.new_round(c) for c in CURRENCIES])

    # Wallets.
    @rule(
        target=accounts,
        currency=st.sampled_from(CURRENCIES),
        funds=st.sampled_from([0, 100, 500, 1000]),
    )
    def open_account(self, currency: str, funds: int) -> str:
        return self.new_account(currency, funds)

    def new_account(self, currency: str, funds: int) -> str:
        account = self.casino.open_account(request_id=self.request(), owner="p", currency=currency)
        self.model[account] = ModelAccount(currency)
        if funds:
            self.deposit(account, funds)
        return account

    @rule(account=accounts, amount=AMOUNTS)
    def deposit(self, account: str, amount: Any) -> None:
        request_id = self.request()
        ok = is_amount(amount) and not self.model[account].closed
        _, balance = self.attempt(
            "deposit",
            ok,
            lambda: self.casino.deposit(request_id=request_id, account_id=account, amount=amount),
        )
        if balance is not None:
            self.model[account].balance += amount
            assert balance == self.model[account].balance
            self.deposits.append((request_id, account, amount, balance))

    @rule(account=accounts, amount=AMOUNTS)
    def withdraw(self, account: str, amount: Any) -> None:
        request_id = self.request()
        held = self.model[account]
        ok = is_amount(amount) and not held.closed and amount <= held.balance
        _, balance = self.attempt(
            "withdraw",
            ok,
            lambda: self.casino.withdraw(request_id=request_id, account_id=account, amount=amount),
        )
        if balance is not None:
            held.balance -= amount
            assert balance == held.balance

    @rule(account=accounts)
    def close_account(self, account: str) -> None:
        held = self.model[account]
        request_id = self.request()
        ok = not held.closed and held.balance == 0
        self.attempt(
            "close_account",
            ok,
            lambda: self.casino.close_account(
                request_id=request_id, account_id=account, reason="done"
            ),
        )
        held.closed = held.closed or ok

    @precondition(lambda self: self.deposits)
    @rule(data=st.data())
    def retry_a_deposit(self, data: st.DataObject) -> None:
        request_id, account, amount, result = data.draw(st.sampled_from(self.deposits))
        before = event_count(self.app)
        again = self.casino.deposit(request_id=request_id, account_id=account, amount=amount)
        assert again == result and event_count(self.app) == before

    # Rounds.
    @rule(target=rounds, currency=st.sampled_from(CURRENCIES))
    def open_round(self, currency: str) -> str:
        return self.new_round(currency)

    def new_round(self, currency: str) -> str:
        table, _ = self.tables[currency]
        round_id = self.casino.open_round(request_id=self.request(), table_id=table, dealer="D")
        self.model_rounds[round_id] = ModelRound(currency)
        return round_id

    @rule(round_id=rounds, data=st.data())
    def place_bets(self, round_id: str, data: st.DataObject) -> None:
        """A few bets on a round (mostly one taking bets)."""
        betting = [r for r, m in self.model_rounds.items() if m.status == BETTING]
        round_id = data.draw(
            mostly(st.sampled_from(betting), st.just(round_id)) if betting else st.just(round_id)
        )
        self.bet_on(round_id, data)

    @rule(currency=st.sampled_from(CURRENCIES), data=st.data())
    def play_a_round(self, currency: str, data: st.DataObject) -> None:
        """A whole round in one step: open, bets (one perhaps withdrawn), then close,
        outcome and settle, or a void after some of those (an interrupted round)."""
        round_id = self.new_round(currency)
        self.bet_on(round_id, data)
        withdraw = data.draw(st.booleans())
        if withdraw and self.model_rounds[round_id].bets:
            self.withdraw_one(round_id, data)
        steps = data.draw(st.integers(min_value=0, max_value=5))  # 3 or more: played out
        for _ in range(min(steps, 3)):
            self.advance(round_id, data.draw(st.sampled_from(["heads", "tails", "edge"])))
        if steps < 3:
            self.void(round_id)

    def bet_on(self, round_id: str, data: st.DataObject) -> None:
        """Up to four bets, mostly from wallets of the round's currency, some from any
        account (another currency's, a house bankroll, a closed one)."""
        currency = self.model_rounds[round_id].currency
        fitting = [a for a, m in self.model.items() if m.kind == PLAYER and m.currency == currency]
        for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
            everyone = st.sampled_from(list(self.model))
            account = data.draw(mostly(st.sampled_from(fitting), everyone) if fitting else everyone)
            self.place_bet(round_id, account, data.draw(SIDES), data.draw(STAKES))

    def place_bet(self, round_id: str, account: str, side: str, stake: Any) -> None:
        game = self.model_rounds[round_id]
        held = self.model[account]
        staked = sum(s for a, _, s in game.bets.values() if a == account)
        ok = (
            game.status == BETTING
            and held.kind == PLAYER
            and not held.closed
            and held.currency == game.currency
            and side in ("heads", "tails")
            and is_amount(stake)
            and LIMITS["min_bet"] <= stake <= LIMITS["max_bet"]
            and staked + stake <= LIMITS["max_round"]
            and stake <= held.balance
        )
        request_id = self.request()
        _, bet_id = self.attempt(
            "place_bet",
            ok,
            lambda: self.casino.place_bet(
                request_id=request_id,
                round_id=round_id,
                account_id=account,
                bet={"on": side},
                stake=stake,
            ),
        )
        if bet_id is not None:
            game.bets[bet_id] = (account, side, stake)
            held.balance -= stake

    @precondition(lambda self: any(r.bets for r in self.model_rounds.values()))
    @rule(data=st.data())
    def withdraw_bet(self, data: st.DataObject) -> None:
        """Withdraw a bet, mostly from a round still taking bets."""
        with_bets = [r for r, m in self.model_rounds.items() if m.bets]
        betting = [r for r in with_bets if self.model_rounds[r].status == BETTING]
        anywhere = st.sampled_from(with_bets)
        round_id = data.draw(mostly(st.sampled_from(betting), anywhere) if betting else anywhere)
        self.withdraw_one(round_id, data)

    def withdraw_one(self, round_id: str, data: st.DataObject) -> None:
        game = self.model_rounds[round_id]
        bet_id = data.draw(st.sampled_from(list(game.bets)))
        request_id = self.request()
        done, _ = self.attempt(
            "withdraw_bet",
            game.status == BETTING,
            lambda: self.casino.withdraw_bet(
                request_id=request_id,
                round_id=round_id,
                account_id=game.bets[bet_id][0],
                bet_id=bet_id,
            ),
        )
        if done:
            account, _, stake = game.bets.pop(bet_id)
            self.model[account].balance += stake

    @rule(round_id=rounds, face=st.sampled_from(["heads", "tails", "edge"]))
    def advance(self, round_id: str, face: str) -> None:
        """Take a round one step on: close betting, then the outcome (which settles),
        then a settlement it refuses."""
        status = self.model_rounds[round_id].status
        if status == BETTING:
            self.close_betting(round_id)
        elif status == CLOSED:
            self.record_outcome(round_id, face)
        elif status == SETTLED:
            self.settle(round_id)

    @rule(round_id=rounds)
    def close_betting(self, round_id: str) -> None:
        game = self.model_rounds[round_id]
        request_id = self.request()
        ok = game.status == BETTING
        self.attempt(
            "close_betting",
            ok,
            lambda: self.casino.close_betting(request_id=request_id, round_id=round_id),
        )
        if ok:
            game.status = CLOSED

    @rule(round_id=rounds, face=st.sampled_from(["heads", "tails", "edge", "sideways"]))
    def record_outcome(self, round_id: str, face: str) -> None:
        game = self.model_rounds[round_id]
        request_id = self.request()
        ok = game.status == CLOSED and face != "sideways"
        self.attempt(
            "record_outcome",
            ok,
            lambda: self.casino.record_outcome(
                request_id=request_id,
                round_id=round_id,
                outcome={"face": face},
                source=self.device.throw(
                    round_id, self.casino.round(round_id).draws, {"face": face}
                ),
            ),
        )
        if not ok:
            return
        # The throw settles every bet (a one-step game), in the same save.
        game.face = face
        house = self.model[self.tables[game.currency][1]]
        for result in self.paid_as_the_model_says(game, self.casino.round(round_id).results):
            self.model[result["account_id"]].balance += result["returned"]
            house.balance += result["stake"] - result["returned"]
            ACCEPTED["bets settled"] += 1
        game.status = SETTLED

    def paid_as_the_model_says(self, game: Any, results: list[Any]) -> list[Any]:
        assert sorted(r["bet_id"] for r in results) == sorted(game.bets)
        for result in results:
            account, side, stake = game.bets[result["bet_id"]]
            paid = stake if game.face == "edge" else 2 * stake if side == game.face else 0
            assert (result["account_id"], result["stake"], result["returned"]) == (
                account,
                stake,
                paid,
            )
        return results

    @rule(round_id=rounds)
    def settle(self, round_id: str) -> None:
        """Never anything left to settle: the throw settled the round (a
        settlement-API-2 game), so `settle` is refused in every state, settled
        included, moving no money and recording nothing."""
        request_id = self.request()
        self.attempt(
            "settle", False, lambda: self.casino.settle(request_id=request_id, round_id=round_id)
        )

    @rule(round_id=rounds)
    def void(self, round_id: str) -> None:
        game = self.model_rounds[round_id]
        request_id = self.request()
        _, returns = self.attempt(
            "void",
            game.status not in (DECIDED, SETTLED, VOIDED),  # never once an outcome stands
            lambda: self.casino.void_round(
                request_id=request_id, round_id=round_id, reason="void", operator=self.operator
            ),
        )
        if returns is None:
            return
        assert sorted((r["bet_id"], r["returned"]) for r in returns) == sorted(
            (b, s) for b, (_, _, s) in game.bets.items()
        )
        for account, _, stake in game.bets.values():
            self.model[account].balance += stake
            ACCEPTED["bets voided"] += 1
        game.status = VOIDED

    # Invariants.
    def log(self) -> list[tuple[int, DomainEventProtocol[UUID]]]:
        """Every event in the store, in log order (read once, then only what is new)."""
        self.events += domain_events(self.app, self.events[-1][0] if self.events else 0)
        return self.events

    @invariant()
    def the_model_matches_the_aggregates(self) -> None:
        for account, held in self.model.items():
            assert self.casino.account(account).balance == held.balance, account
        for round_id, game in self.model_rounds.items():
            assert self.casino.round(round_id).status == game.status

    @invariant()
    def the_money_adds_up_from_the_events(self) -> None:
        kinds: dict[str, str] = {}
        mirrored: dict[str, int] = defaultdict(int)  # the account's own events, in log order
        derived: dict[str, int] = defaultdict(int)  # deposits - withdrawals - stakes + returns
        posted: dict[str, int] = defaultdict(int)  # the postings, by ledger account
        per_currency: dict[str, int] = defaultdict(int)
        bets: dict[str, tuple[str, int]] = {}
        houses: dict[str, str] = {}
        currencies: dict[str, str] = {}
        for notification_id, event in self.log():
            stream = str(event.originator_id)
            postings = getattr(event, "postings", None)
            if postings is not None:
                assert imbalance(postings) == {}, f"unbalanced postings at {notification_id}"
                for leg in postings:
                    posted[leg["account"]] += leg["amount"]
                    per_currency[leg["currency"]] += leg["amount"]
            if isinstance(event, Account.Opened):
                kinds[stream] = event.kind
            elif isinstance(event, Account.Deposited | Account.Credited):
                mirrored[stream] += event.amount
                if isinstance(event, Account.Deposited):
                    derived[stream] += event.amount
            elif isinstance(event, Account.Withdrawn | Account.Debited):
                mirrored[stream] -= event.amount
                if isinstance(event, Account.Withdrawn):
                    derived[stream] -= event.amount
                if kinds[stream] == PLAYER:
                    assert mirrored[stream] >= 0, f"wallet {stream} negative at {notification_id}"
            elif isinstance(event, Round.Opened):
                houses[stream] = str(event.house_account)
                currencies[stream] = event.currency
            elif isinstance(event, Round.BetPlaced):
                bets[event.bet_id] = (event.account_id, event.stake)
                derived[event.account_id] -= event.stake
            elif isinstance(event, Round.BetWithdrawn):
                account, stake = bets[event.bet_id]
                derived[account] += stake
            elif isinstance(event, Round.Settled | Round.Voided):
                results = event.results if isinstance(event, Round.Settled) else event.returns
                expected = []
                for result in results:
                    stake, returned = result["stake"], result["returned"]
                    assert bets[result["bet_id"]] == (result["account_id"], stake)
                    assert returned >= 0
                    derived[result["account_id"]] += returned
                    derived[houses[stream]] += stake - returned
                    expected.append(posting(in_play(stream), -stake, currencies[stream]))
                    if returned:
                        expected.append(
                            posting(wallet(result["account_id"]), returned, currencies[stream])
                        )
                    if stake != returned:
                        expected.append(
                            posting(wallet(houses[stream]), stake - returned, currencies[stream])
                        )
                    if isinstance(event, Round.Voided):
                        assert returned == stake
                assert event.postings == expected, f"settlement postings at {notification_id}"
        assert all(total == 0 for total in per_currency.values()), per_currency
        for account, kind in kinds.items():
            balance = self.casino.account(account).balance
            assert balance == mirrored[account] == derived[account] == posted[wallet(account)]
            if kind == PLAYER:
                assert balance >= 0
        # What is still in play is exactly the stakes of the rounds still open.
        for round_id, game in self.model_rounds.items():
            open_stakes = sum(s for _, _, s in game.bets.values())
            assert posted[in_play(round_id)] == (
                0 if game.status in (SETTLED, VOIDED) else open_stakes
            )
        # And the cashier paid in exactly what the wallets were given from outside.
        for currency in CURRENCIES:
            outside = sum(
                held.balance for held in self.model.values() if held.currency == currency
            ) + sum(
                posted[in_play(r)] for r, g in self.model_rounds.items() if g.currency == currency
            )
            assert -posted[cashier(currency)] == outside


@pytest.fixture(scope="module")
def money_keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keys]:
    directory = KeyDirectory(tmp_path_factory.mktemp("money-keys"))
    directory.create_node_keys(PASSPHRASE)
    directory.create("operator", Role.OPERATOR, PASSPHRASE)
    directory.create("shaker", Role.DEALER_DEVICE, PASSPHRASE)
    yield Keys(
        node=directory.signer(Role.LEDGER_NODE, PASSPHRASE),
        operator=directory.signer(Role.OPERATOR, PASSPHRASE),
        keyring=directory.keyring(),
        device=DealerDevice(directory.signer(Role.DEALER_DEVICE, PASSPHRASE)),
    )


def test_the_money_always_adds_up(money_keys: Keys) -> None:
    class Machine(MoneyMachine):
        def __init__(self) -> None:
            super().__init__(money_keys)

    ACCEPTED.clear()
    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=50,
            stateful_step_count=40,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    print(dict(ACCEPTED))
    for command in (
        "deposit",
        "withdraw",
        "place_bet",
        "withdraw_bet",
        "bets settled",
        "bets voided",
    ):
        assert ACCEPTED[command] > 0, f"no {command} was ever accepted: {dict(ACCEPTED)}"
