"""A casino table: its game, its kind, currency, limits and house bankroll.

A table is opened as one of two kinds and stays it: an **RNG** table draws
every die and card from a seed it committed to before the round opened; a
**physical** table's dealer device reports what the real dice or cards
showed. Tables opened before release 0.4 have no recorded kind (None): a
round of theirs was RNG when a seed was in use as it opened.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from ledger.domain.aliases import TableAliases
from ledger.domain.copying import PlainCopy
from ledger.domain.round_records import Limits
from ledger.domain.stored_names import TABLE_OPENED, upcast
from ledger.errors import InvalidCommandError

TableKind = Literal["rng", "physical"]
RNG: TableKind = "rng"
PHYSICAL: TableKind = "physical"
TABLE_KINDS: tuple[str, ...] = get_args(TableKind)


def check_kind(kind: object) -> TableKind:
    """A table's kind as given by a caller, or a one-line refusal."""
    if kind == RNG:
        return RNG
    if kind == PHYSICAL:
        return PHYSICAL
    raise InvalidCommandError(
        f"a table is opened as 'rng' or 'physical', not {kind!r}",
        code="invalid_value",
        param="kind",
    )


class GameTable(TableAliases, PlainCopy, Aggregate):
    class Event(Aggregate.Event):  # declared: the events below are used as written, not rebuilt
        pass

    class Opened(Aggregate.Created, Event):
        """`game` is the game its rounds play (its id); versions 1 and 2 stored
        it under an older name (`ledger.domain.stored_names`), upcast as read."""

        class_version: ClassVar[int] = 3
        name: str
        game: str
        currency: str
        limits: Limits
        house_account: UUID
        kind: TableKind | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            # Release 0.3 and before: the kind followed from the seed in use.
            state["kind"] = None

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            upcast(TABLE_OPENED, 2, state)

    class SeedCommitted(Event):
        """The RNG's commitment (SHA-256) to a secret seed (for dice and cards),
        made before any round on it opens; the seed itself is revealed when it
        is retired."""

        class_version: ClassVar[int] = 1
        seed_id: str
        commitment: str

    class SeedRevealed(Event):
        class_version: ClassVar[int] = 1
        seed_id: str
        seed: str  # hex

    class RoundsInPlayChanged(Event):
        """RNG tables count their rounds in play: a seed is never revealed while
        a round that draws from it is still open."""

        class_version: ClassVar[int] = 1
        rounds_in_play: int

    @event(Opened)
    def __init__(
        self,
        name: str,
        game: str,
        currency: str,
        limits: Limits,
        house_account: UUID,
        kind: TableKind | None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.game = game
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
                f"table {self.name} already has seed {self.active_seed} in use: retire it first",
                code="seed_conflict",
            )

    def check_rng_round(self) -> None:
        """A round opens on an RNG table only with a seed to draw from."""
        if self.kind == RNG and self.active_seed is None:
            raise InvalidCommandError(
                f"table {self.name} is an RNG table with no seed in use: commit a seed "
                "before opening a round",
                code="seed_missing",
            )

    def check_takes_seeds(self) -> None:
        if self.kind == PHYSICAL:
            raise InvalidCommandError(
                f"table {self.name} is a physical table: its dice and cards come from its "
                "dealer device's reports, not from a seed",
                code="wrong_table_kind",
            )

    def commit_seed(self, seed_id: str, commitment: str) -> None:
        self.check_takes_seeds()
        self.check_no_seed_in_use()
        if seed_id in self.commitments:
            raise InvalidCommandError(f"seed {seed_id} was already committed", code="seed_conflict")
        self._seed_committed(seed_id, commitment)

    @event(SeedCommitted)
    def _seed_committed(self, seed_id: str, commitment: str) -> None:
        self.active_seed = seed_id
        self.commitments[seed_id] = commitment

    def reveal_seed(self, seed_id: str, seed_hex: str) -> None:
        if self.active_seed != seed_id:
            raise InvalidCommandError(
                f"seed {seed_id} is not the table's seed in use", code="seed_conflict"
            )
        if self.rounds_in_play:
            raise InvalidCommandError(
                f"{self.rounds_in_play} round(s) still draw from seed {seed_id}: "
                "settle or void them before revealing it",
                code="seed_conflict",
            )
        self._seed_revealed(seed_id, seed_hex)

    @event(SeedRevealed)
    def _seed_revealed(self, seed_id: str, seed: str) -> None:
        self.active_seed = None
