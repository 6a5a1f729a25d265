"""A casino table: its game, currency, limits and house bankroll."""

from __future__ import annotations

from typing import ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from ledger.domain.copying import PlainCopy
from ledger.domain.round import Limits
from ledger.errors import InvalidCommandError


class GameTable(PlainCopy, Aggregate):
    class Opened(Aggregate.Created):
        class_version: ClassVar[int] = 1
        name: str
        variant: str
        currency: str
        limits: Limits
        house_account: UUID

    class SeedCommitted(Aggregate.Event):
        """The RNG's commitment (SHA-256) to a secret dice seed, made before any
        round on it opens; the seed itself is revealed when it is retired."""

        class_version: ClassVar[int] = 1
        seed_id: str
        commitment: str

    class SeedRevealed(Aggregate.Event):
        class_version: ClassVar[int] = 1
        seed_id: str
        seed: str  # hex

    class RoundsInPlayChanged(Aggregate.Event):
        """RNG tables count their rounds in play: a seed is never revealed while
        a round that throws from it is still open."""

        class_version: ClassVar[int] = 1
        rounds_in_play: int

    @event(Opened)
    def __init__(
        self, name: str, variant: str, currency: str, limits: Limits, house_account: UUID
    ) -> None:
        self.name = name
        self.variant = variant
        self.currency = currency
        self.limits = limits
        self.house_account = house_account
        self.active_seed: str | None = None
        self.commitments: dict[str, str] = {}
        self.rounds_in_play = 0

    def round_opened(self) -> None:
        self._rounds_in_play(self.rounds_in_play + 1)

    def round_ended(self) -> None:
        self._rounds_in_play(max(0, self.rounds_in_play - 1))

    @event(RoundsInPlayChanged)
    def _rounds_in_play(self, rounds_in_play: int) -> None:
        self.rounds_in_play = rounds_in_play

    def check_no_seed_in_use(self) -> None:
        if self.active_seed is not None:
            raise InvalidCommandError(
                f"table {self.name} already has seed {self.active_seed} in use: retire it first"
            )

    def commit_seed(self, seed_id: str, commitment: str) -> None:
        self.check_no_seed_in_use()
        if seed_id in self.commitments:
            raise InvalidCommandError(f"seed {seed_id} was already committed")
        self._seed_committed(seed_id, commitment)

    @event(SeedCommitted)
    def _seed_committed(self, seed_id: str, commitment: str) -> None:
        self.active_seed = seed_id
        self.commitments[seed_id] = commitment

    def reveal_seed(self, seed_id: str, seed_hex: str) -> None:
        if self.active_seed != seed_id:
            raise InvalidCommandError(f"seed {seed_id} is not the table's seed in use")
        if self.rounds_in_play:
            raise InvalidCommandError(
                f"{self.rounds_in_play} round(s) still throw from seed {seed_id}: "
                "settle or void them before revealing it"
            )
        self._seed_revealed(seed_id, seed_hex)

    @event(SeedRevealed)
    def _seed_revealed(self, seed_id: str, seed: str) -> None:
        self.active_seed = None
