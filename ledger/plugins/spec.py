"""The hook specifications the core owns. Every hook is prefixed ``ledger_``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ledger.plugins import hookspec

if TYPE_CHECKING:
    from ledger.plugins.registry import VariantRegistry


class VariantDefinition(Protocol):
    """What a plugin declares for each game variant it provides.

    Everything crossing this seam is plain JSON-safe data or a pure function
    of it: stored events never point into plugin code.
    """

    #: Stable id recorded on every round (e.g. ``taixiu``).
    id: str
    #: The rules profile as data (paytable and options); the core hashes it.
    rules: Mapping[str, Any]
    #: The bet catalogue: every bet id a player may place.
    bets: Sequence[str]
    #: Which commands are legal in which round state.
    legal_commands: Mapping[str, Sequence[str]]

    def validate_bet(self, bet: Mapping[str, Any]) -> dict[str, Any]:
        """The bet in canonical form, or raise InvalidCommandError."""
        ...

    def validate_outcome(self, outcome: Mapping[str, Any]) -> dict[str, Any]:
        """The outcome in canonical form, or raise InvalidCommandError."""
        ...

    def settle(
        self, outcome: Mapping[str, Any], bets: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, int]:
        """Pure: per bet id, what goes back to the wallet (0, the stake, or stake + win)."""
        ...


@hookspec
def ledger_register_variants(registry: VariantRegistry) -> None:
    """Register the game variants this plugin provides.

    Called once, when the plugin manager is built (never at import time).
    Call ``registry.add(definition)`` for each variant; return nothing.
    """
