"""Atlantic City Sic Bo: the three-dice game with a different house's paytable."""

from __future__ import annotations

from ledger_taixiu.plugin import SICBO_VOID_FAULTS, DiceVariant
from ledger_taixiu.rules import make_paytable

from ledger.plugins import GameRegistry, hookimpl

ATLANTIC_CITY = make_paytable(
    small_big=1,
    single=(1, 2, 3),
    specific_triple=180,
    any_triple=30,
    totals=(60, 30, 17, 12, 8, 6, 6),
    specific_double=10,
    combination=5,
)


@hookimpl
def ledger_register_games(registry: GameRegistry) -> None:
    registry.add(DiceVariant("atlantic-city", ATLANTIC_CITY, SICBO_VOID_FAULTS))
