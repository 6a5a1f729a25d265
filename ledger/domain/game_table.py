"""A casino table: its game, currency, limits and house bankroll."""

from __future__ import annotations

from typing import ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from ledger.domain.round import Limits


class GameTable(Aggregate):
    class Opened(Aggregate.Created):
        class_version: ClassVar[int] = 1
        name: str
        variant: str
        currency: str
        limits: Limits
        house_account: UUID

    @event(Opened)
    def __init__(
        self, name: str, variant: str, currency: str, limits: Limits, house_account: UUID
    ) -> None:
        self.name = name
        self.variant = variant
        self.currency = currency
        self.limits = limits
        self.house_account = house_account
