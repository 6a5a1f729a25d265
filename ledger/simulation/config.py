"""What a session plays: its tables, players, rounds and fault rate."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ledger.domain.round import Limits
from ledger.errors import ConfigError
from ledger.games.api import EXACT_PAYTABLE

CURRENCY: Final = "VND"  # no minor unit: amounts are whole đồng
CHIP: Final = 10_000  # the smallest chip: every stake is a multiple of it

# (variant, table-name prefix): tables alternate between the two profiles.
VARIANTS: Final = (("taixiu", "TX"), ("sicbo-void", "SB"))
# Limit tiers (min bet, max bet, one player's max per round): the first table
# of each variant is a standard table, the next a high-limit one.
# Card tables (Xì dách): played after the dice tables, RNG and physical in turn.
CARD_VARIANT: Final = ("xidach", "XD")
TIERS: Final = ((10_000, 5_000_000, 10_000_000), (100_000, 50_000_000, 100_000_000))
MAX_TABLES: Final = 26
MAX_PLAYERS: Final = 10_000
MAX_ROUNDS: Final = 1_000_000


@dataclass(frozen=True)
class TableSpec:
    name: str
    variant: str
    limits: Limits
    # A physical table: dice shaken by the dealer and reported by its dealer
    # device (signed); else an RNG table (committed seed, recomputable throws).
    physical: bool = False

    @property
    def dice(self) -> str:
        return "device" if self.physical else "rng"


@dataclass(frozen=True)
class SessionConfig:
    tables: tuple[TableSpec, ...]
    players: int = 40
    rounds: int = 300
    fault_rate: int = 3  # percent of throws at physical tables that are faulty
    seed: int = 0  # the players' and dealers' choices (random.Random), not the dice
    currency: str = CURRENCY


def default_tables(count: int, card_tables: int = 0) -> tuple[TableSpec, ...]:
    """`count` dice tables: TX-1, SB-1 (standard limits), TX-2, SB-2 (high limits),
    TX-3, ...; then `card_tables` Xì dách tables XD-1 (RNG), XD-2 (physical), ...
    at standard limits.

    In every four dice tables, the middle two are physical (SB-1, TX-2, ...) and
    the others RNG tables, so a floor of four has both kinds of both games."""
    if not 1 <= count <= MAX_TABLES:
        raise ConfigError(f"--tables must be 1..{MAX_TABLES}, not {count}")
    if not 0 <= card_tables <= MAX_TABLES - count:
        raise ConfigError(f"--card-tables must be 0..{MAX_TABLES - count}, not {card_tables}")
    tables = []
    for index in range(count):
        variant, prefix = VARIANTS[index % len(VARIANTS)]
        number = index // len(VARIANTS)
        min_bet, max_bet, max_round = TIERS[number % len(TIERS)]
        limits: Limits = {"min_bet": min_bet, "max_bet": max_bet, "max_round": max_round}
        physical = index % 4 in (1, 2)
        tables.append(TableSpec(f"{prefix}-{number + 1}", variant, limits, physical))
    variant, prefix = CARD_VARIANT
    min_bet, max_bet, max_round = TIERS[0]
    for index in range(card_tables):
        limits = {"min_bet": min_bet, "max_bet": max_bet, "max_round": max_round}
        tables.append(TableSpec(f"{prefix}-{index + 1}", variant, limits, index % 2 == 1))
    return tuple(tables)


def plays(rules: Mapping[str, Any]) -> bool:
    """Whether a session can play this rules profile without an exact paytable
    (a Xì dách profile, by the `game` its rules data names)."""
    return rules.get("game") == "xidach"


def check_config(config: SessionConfig, games: Mapping[str, Any]) -> None:
    """Refuse a session that cannot be played, before anything is recorded."""
    if not 1 <= config.players <= MAX_PLAYERS:
        raise ConfigError(f"--players must be 1..{MAX_PLAYERS}, not {config.players}")
    if not 1 <= config.rounds <= MAX_ROUNDS:
        raise ConfigError(f"--rounds must be 1..{MAX_ROUNDS}, not {config.rounds}")
    if not 0 <= config.fault_rate <= 100:
        raise ConfigError(f"--fault-rate is a percentage 0..100, not {config.fault_rate}")
    for table in config.tables:
        variant = games.get(table.variant)
        if variant is None:
            known = ", ".join(sorted(games)) or "none installed"
            raise ConfigError(f"table {table.name} needs variant {table.variant!r} ({known})")
        if EXACT_PAYTABLE not in variant.capabilities and not plays(variant.rules):
            raise ConfigError(
                f"simulate plays one-throw dice games and Xì dách; {table.variant} is neither"
            )
