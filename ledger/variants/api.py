"""What the core needs from a game variant. Plugins implement it and are found
through pluggy entry points (ledger/plugins/manager.py). Everything crossing
this seam is plain JSON-safe data: a stored event never points into plugin code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ledger.domain.round import BetRecord


class Variant(Protocol):
    """A game: its identity, its bets, and a pure settlement function."""

    @property
    def id(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def rules_hash(self) -> str: ...

    def validate_bet(self, bet: Mapping[str, Any]) -> dict[str, Any]:
        """The bet in canonical form, or raise InvalidCommandError."""
        ...

    def validate_outcome(self, outcome: Mapping[str, Any]) -> dict[str, Any]:
        """The outcome in canonical form, or raise InvalidCommandError."""
        ...

    def settle(self, outcome: Mapping[str, Any], bets: Mapping[str, BetRecord]) -> dict[str, int]:
        """Per bet id, what goes back to the wallet: 0, the stake, or stake + win."""
        ...
