"""What a session plays: its tables, players, rounds and fault rate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ledger.domain.aliases import game_named
from ledger.domain.round_records import Limits
from ledger.errors import ConfigError
from ledger.games.api import SIMULATED_PLAY
from ledger.games.one_draw import one_draw
from ledger.plugins.registry import LoadedGame

CURRENCY: Final = "VND"  # no minor unit: amounts are whole đồng
CHIP: Final = 10_000  # the smallest chip: every stake is a multiple of it

# The default floor, when no --game is given: the shipped games' profiles as
# data (game id, table-name prefix). Tables alternate between the first two;
# the turn tables come after them, RNG and physical in turn.
DEFAULT_GAMES: Final = (("taixiu", "TX"), ("sicbo-void", "SB"))
DEFAULT_TURN_GAME: Final = ("xidach", "XD")
# Limit tiers (min bet, max bet, one player's max per round): the first table
# of each game is a standard table, the next a high-limit one.
TIERS: Final = ((10_000, 5_000_000, 10_000_000), (100_000, 50_000_000, 100_000_000))
MAX_TABLES: Final = 26
MAX_PLAYERS: Final = 10_000
MAX_ROUNDS: Final = 1_000_000


@dataclass(frozen=True, init=False)
class TableSpec:
    """A table of the session: its name, its game (the game's id), its limits,
    and its kind. The game's older keyword, and its read-only name, are aliases
    (`ledger.casino.aliases`)."""

    name: str
    game: str
    limits: Limits
    # A physical table: dice shaken or cards dealt by the dealer and reported
    # by its dealer device (signed); else an RNG table (committed seed,
    # recomputable draws).
    physical: bool = False

    def __init__(
        self,
        name: str,
        game: str | None = None,
        limits: Limits | None = None,
        physical: bool = False,
        *,
        variant: str | None = None,  # alias
    ) -> None:
        if limits is None:
            raise ConfigError(f"table {name} needs its limits")
        named = game_named(game, variant, f"table {name}")  # alias
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "game", named)
        object.__setattr__(self, "limits", limits)
        object.__setattr__(self, "physical", physical)

    @property
    def variant(self) -> str:  # alias
        """Alias of `game`."""
        return self.game

    @property
    def draws(self) -> str:
        """Who states the table's randomness: its dealer device or the RNG."""
        return "device" if self.physical else "rng"


@dataclass(frozen=True)
class SessionConfig:
    tables: tuple[TableSpec, ...]
    players: int = 40
    rounds: int = 300
    fault_rate: int = 3  # percent of draws at physical one-draw tables that are faulty
    seed: int = 0  # the players' and dealers' choices (random.Random), not the dice
    currency: str = CURRENCY


def table_prefix(game_id: str, taken: set[str]) -> str:
    """A short table-name prefix for a game: its id's initials (``coin-toss``:
    ``CT``), or the id itself when those are another game's."""
    parts = [part for part in game_id.replace("_", "-").split("-") if part]
    prefix = ("".join(p[0] for p in parts) if len(parts) > 1 else game_id[:2]).upper()
    return game_id.upper() if prefix in taken else prefix


def default_tables(
    count: int,
    card_tables: int = 0,
    games: tuple[tuple[str, str], ...] = DEFAULT_GAMES,
    turn_game: tuple[str, str] = DEFAULT_TURN_GAME,
) -> tuple[TableSpec, ...]:
    """`count` tables of `games` in turn, by default TX-1, SB-1 (standard limits),
    TX-2, SB-2 (high limits), TX-3, ...; then `card_tables` tables of
    `turn_game`, XD-1 (RNG), XD-2 (physical), ... at standard limits.

    In every four of the first tables, the middle two are physical (SB-1, TX-2,
    ...) and the others RNG tables, so a floor of four has both kinds of both
    default games."""
    if not 1 <= count <= MAX_TABLES:
        raise ConfigError(f"--tables must be 1..{MAX_TABLES}, not {count}")
    if not 0 <= card_tables <= MAX_TABLES - count:
        raise ConfigError(f"--card-tables must be 0..{MAX_TABLES - count}, not {card_tables}")
    tables = []
    for index in range(count):
        game, prefix = games[index % len(games)]
        number = index // len(games)
        min_bet, max_bet, max_round = TIERS[number % len(TIERS)]
        limits: Limits = {"min_bet": min_bet, "max_bet": max_bet, "max_round": max_round}
        physical = index % 4 in (1, 2)
        tables.append(TableSpec(f"{prefix}-{number + 1}", game, limits, physical))
    game, prefix = turn_game
    min_bet, max_bet, max_round = TIERS[0]
    for index in range(card_tables):
        limits = {"min_bet": min_bet, "max_bet": max_bet, "max_round": max_round}
        tables.append(TableSpec(f"{prefix}-{index + 1}", game, limits, index % 2 == 1))
    return tuple(tables)


def check_config(config: SessionConfig, games: Mapping[str, LoadedGame]) -> None:
    """Refuse a session that cannot be played, before anything is recorded."""
    if not 1 <= config.players <= MAX_PLAYERS:
        raise ConfigError(f"--players must be 1..{MAX_PLAYERS}, not {config.players}")
    if not 1 <= config.rounds <= MAX_ROUNDS:
        raise ConfigError(f"--rounds must be 1..{MAX_ROUNDS}, not {config.rounds}")
    if not 0 <= config.fault_rate <= 100:
        raise ConfigError(f"--fault-rate is a percentage 0..100, not {config.fault_rate}")
    for table in config.tables:
        game = games.get(table.game)
        if game is None:
            known = ", ".join(sorted(games)) or "none installed"
            raise ConfigError(f"table {table.name} needs game {table.game!r} ({known})")
        play = game.simulated_play()
        if play is None:
            raise ConfigError(
                f"simulate plays games that say how they are played (capability "
                f"{SIMULATED_PLAY!r}); {table.game} does not"
            )
        if not play.seats() and one_draw(game) is None:
            raise ConfigError(
                f"{table.game} is played as one draw, but after betting closes it offers "
                "no single dice draw"
            )
