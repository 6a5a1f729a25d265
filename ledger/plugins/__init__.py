"""Games as pluggy plugins, and everything a plugin author imports.

A game's package imports from here only (`__all__`; a test holds the shipped
plugins to it, docs/plugins.md describes each name): the hook marker, the
registry a hook registers games with, the contract's types and protocols,
and the errors a game raises. The contract tests are `ledger.plugins.contract`
(they need pytest and hypothesis, which a game at run time does not).

One distinctive name for the markers and the entry-point group, so our hooks
never mix with another pluggy host's: ``casino_ledger``. A plugin package
declares ``[project.entry-points.casino_ledger]`` and implements hooks
prefixed ``ledger_`` with ``@hookimpl``.
"""

from __future__ import annotations

from typing import Final

import pluggy

PROJECT_NAME: Final = "casino_ledger"
ENTRY_POINT_GROUP: Final = PROJECT_NAME

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

# The author's API, after the markers (the registry's module does not import this one).
from ledger.crypto.canonical import canonical  # noqa: E402  (a game's canonical JSON)
from ledger.errors import ConfigError, InvalidCommandError, PluginError  # noqa: E402
from ledger.games.api import (  # noqa: E402
    BET_FAMILIES,
    CARDS,
    DECK_SIZE,
    EXACT_PAYTABLE,
    SETTLEMENT_API,
    SIMULATED_PLAY,
    BetFamilies,
    BetView,
    Draw,
    DrawRange,
    ExactPaytable,
    Game,
    RecordedAction,
    SimulatedPlay,
    SimulatedRound,
    Step,
    Stepping,
)
from ledger.plugins.registry import GameRegistry, rules_hash  # noqa: E402

__all__ = [
    "BET_FAMILIES",
    "CARDS",
    "DECK_SIZE",
    "EXACT_PAYTABLE",
    "SETTLEMENT_API",
    "SIMULATED_PLAY",
    "BetFamilies",
    "BetView",
    "ConfigError",
    "Draw",
    "DrawRange",
    "ExactPaytable",
    "Game",
    "GameRegistry",
    "InvalidCommandError",
    "PluginError",
    "RecordedAction",
    "SimulatedPlay",
    "SimulatedRound",
    "Step",
    "Stepping",
    "canonical",
    "hookimpl",
    "rules_hash",
]
