"""Accounts: a player's wallet or a table's house bankroll.

An account's events mirror every movement that touches it, so the aggregate
alone can refuse an overdraft; the balanced postings of each movement live on
the event that made it (a deposit here, a bet or a settlement on the round).
"""

from __future__ import annotations

from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from ledger.domain.copying import PlainCopy
from ledger.domain.money import (
    Posting,
    cashier,
    check_amount,
    check_currency,
    transfer,
    wallet,
)
from ledger.domain.names import PersonalValue, check_personal
from ledger.errors import InvalidCommandError

PLAYER = "player"
HOUSE = "house"


def check_kind(kind: str) -> str:
    if kind not in (PLAYER, HOUSE):
        raise InvalidCommandError(
            f"account kind must be {PLAYER!r} or {HOUSE!r}", code="invalid_value", param="kind"
        )
    return kind


class Account(PlainCopy, Aggregate):
    """A wallet (never negative) or a house bankroll (may run negative: the
    house pays what it owes)."""

    class Event(Aggregate.Event):  # declared: the events below are used as written, not rebuilt
        pass

    class Opened(Aggregate.Created, Event):
        class_version: ClassVar[int] = 1
        kind: str
        owner: PersonalValue
        currency: str

    class Deposited(Event):
        class_version: ClassVar[int] = 1
        amount: int
        request_id: str
        postings: list[Posting]

    class Withdrawn(Event):
        class_version: ClassVar[int] = 1
        amount: int
        request_id: str
        postings: list[Posting]

    class Debited(Event):
        """Money left for a round (a stake, or a house payout); postings on the round."""

        class_version: ClassVar[int] = 1
        amount: int
        round_id: UUID
        reference: str

    class Credited(Event):
        """Money came from a round (a return, a payout, a lost stake to the house)."""

        class_version: ClassVar[int] = 1
        amount: int
        round_id: UUID
        reference: str

    class Closed(Event):
        class_version: ClassVar[int] = 1
        reason: str

    @event(Opened)
    def __init__(self, kind: str, owner: PersonalValue, currency: str) -> None:
        self.kind = kind
        self.owner = owner
        self.currency = currency
        self.balance = 0
        self.closed = False

    @classmethod
    def open(
        cls, kind: str, owner: PersonalValue, currency: str, account_id: UUID | None = None
    ) -> Account:
        """A new account; `owner` sealed (`ledger.privacy`) unless it names no
        person (a table's house), `account_id` the id it was sealed for."""
        return cls._create(
            cls.Opened,
            id=account_id,
            kind=check_kind(kind),
            owner=check_personal(owner, "owner", param="owner"),
            currency=check_currency(currency),
        )

    @property
    def ledger_name(self) -> str:
        return wallet(self.id)

    def _check_open(self) -> None:
        if self.closed:
            raise InvalidCommandError(f"account {self.id} is closed", code="account_closed")

    def check_currency(self, currency: str) -> None:
        if currency != self.currency:
            raise InvalidCommandError(
                f"account {self.id} holds {self.currency}, not {currency}", code="currency_mismatch"
            )

    def deposit(self, amount: Any, request_id: str) -> None:
        self._check_open()
        amount = check_amount(amount, "deposit", param="amount")
        postings = transfer(cashier(self.currency), self.ledger_name, amount, self.currency)
        self._deposited(amount, request_id, postings)

    @event(Deposited)
    def _deposited(self, amount: int, request_id: str, postings: list[Posting]) -> None:
        self.balance += amount

    def withdraw(self, amount: Any, request_id: str) -> None:
        # A closed wallet may still be paid out: money a round owed it after
        # it closed (a return, a void refund) must never be stuck there.
        amount = check_amount(amount, "withdrawal", param="amount")
        if amount > self.balance and self.kind == PLAYER:
            raise InvalidCommandError(
                f"withdrawal of {amount} is more than the balance {self.balance} "
                f"of account {self.id}",
                code="insufficient_funds",
                param="amount",
            )
        postings = transfer(self.ledger_name, cashier(self.currency), amount, self.currency)
        self._withdrawn(amount, request_id, postings)

    @event(Withdrawn)
    def _withdrawn(self, amount: int, request_id: str, postings: list[Posting]) -> None:
        self.balance -= amount

    def debit(self, amount: int, round_id: UUID, reference: str) -> None:
        """Take money out for a round; a wallet never goes below zero.

        A closed wallet takes no new stakes; a house pays what it owes even
        when closed (a settlement must never be blocked).
        """
        self.check_debit(amount)
        self._debited(amount, round_id, reference)

    def check_debit(self, amount: int) -> None:
        """Raise (nothing changed) if `debit(amount)` would be refused."""
        if self.kind == PLAYER:
            self._check_open()
        if self.kind == PLAYER and amount > self.balance:
            raise InvalidCommandError(
                f"stake of {amount} is more than the available balance {self.balance} "
                f"of account {self.id}",
                code="insufficient_funds",
                param="stake",
            )

    @event(Debited)
    def _debited(self, amount: int, round_id: UUID, reference: str) -> None:
        self.balance -= amount

    @event(Credited)
    def credit(self, amount: int, round_id: UUID, reference: str) -> None:
        # Allowed on a closed account: what a round owes is always paid.
        self.balance += amount

    def close(self, reason: str) -> None:
        self._check_open()
        if self.balance != 0 and self.kind == PLAYER:
            raise InvalidCommandError(
                f"account {self.id} still holds {self.balance}: withdraw it first",
                code="account_not_empty",
            )
        self._closed(reason)

    @event(Closed)
    def _closed(self, reason: str) -> None:
        self.closed = True
