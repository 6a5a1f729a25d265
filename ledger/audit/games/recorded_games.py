"""The games a store's rounds are re-settled with: the installed ones and,
for every (game id, rules hash) the store's rules register records that no
installed game declares, the game an installed plugin builds from those rules
data (`ledger_game_from_rules`). A round is re-settled with the rules it pinned,
whatever the installed default profile now is (docs/plugins.md, "Changing a
game's rules or its code")."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ledger.audit.games.round_games import PinnedGames, games_from_rules
from ledger.plugins.registry import LoadedGame
from ledger.plugins.rules_register import recorded_rules
from ledger.store.application import LedgerApplication


def games_of_store(
    app: LedgerApplication,
    installed: Mapping[str, LoadedGame],
    build: Callable[[str, Mapping[str, Any]], LoadedGame | None],
) -> PinnedGames:
    """`installed`, and the games built from the register's rules data (each
    record checked to hash to its rules hash first: `VerificationError` if not).
    A pair neither declares stays what it was: a round that cannot be re-settled
    here (exit 3), never a failure of the store."""
    profiles = [(r.game, r.rules_hash, r.rules) for r in recorded_rules(app)]
    return games_from_rules(installed, profiles, build)
