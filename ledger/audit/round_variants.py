"""Each round's own game, found by what the round pinned: its game id, rules
hash and settlement API, whichever installed release declares them (the
plugin's version and code hash are information). A round no installed game
can re-derive stops `verify --level settlement` with `CannotReDeriveError`
(exit 3): a check that was not made is never an OK, and never tampering."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ledger.errors import CannotReDeriveError
from ledger.plugins.manager import BLOCK_ENV
from ledger.plugins.registry import LoadedGame

#: Rounds of settlement API 1 are replayed through an API-2 game by translating
#: their events to actions (ledger.games.replay): same rules, same payouts.
REPLAYS = {1: {1, 2}, 2: {2}}


def installed_variants() -> Mapping[str, LoadedGame]:
    """The games installed here (entry points, allow and block lists applied)."""
    from ledger.plugins.manager import get_plugin_manager

    return get_plugin_manager().games()


class RoundVariants:
    def __init__(self, variants: Mapping[str, LoadedGame]) -> None:
        self.variants = variants
        self._cache: dict[tuple[str, str, int], LoadedGame] = {}
        # (game, version played, version re-derived) -> rounds: information only.
        self.other_code: dict[tuple[str, str, str], int] = {}
        self._counted: set[str] = set()  # several audits ask for one round's game

    def of(self, round_id: str, opened: Mapping[str, Any]) -> LoadedGame:
        """The game `round_id` opened with (its Round.Opened state), or raise."""
        api = int(opened.get("settlement_api", 1))
        key = (str(opened["variant"]), str(opened["rules_hash"]), api)
        game = self._cache.get(key)
        if game is None:
            game = self._find(round_id, opened, key)
            self._cache[key] = game
        played = (str(opened["variant_version"]), str(opened.get("code_hash") or ""))
        if played != (game.version, game.code_hash) and round_id not in self._counted:
            self._counted.add(round_id)
            info = (game.id, played[0], game.version)
            self.other_code[info] = self.other_code.get(info, 0) + 1
        return game

    def _find(
        self, round_id: str, opened: Mapping[str, Any], key: tuple[str, str, int]
    ) -> LoadedGame:
        name, rules, api = key
        game = self.variants.get(name)
        if (
            game is not None
            and game.rules_hash == rules
            and game.settlement_api in REPLAYS.get(api, set())
        ):
            return game
        installed = (
            f"{game.plugin} {game.version} (rules {game.rules_hash[:12]}, settlement API "
            f"{game.settlement_api})"
            if game is not None
            else "none"
        )
        blocked = os.environ.get(BLOCK_ENV, "").strip()
        because = f"; plugins blocked by {BLOCK_ENV}: {blocked}" if blocked else ""
        raise CannotReDeriveError(
            f"cannot re-settle round {round_id}: it opened with {name} "
            f"{opened['variant_version']} (rules {rules[:12]}, settlement API {api}); "
            f"installed: {installed}{because}. Install a release of the plugin declaring "
            "those rules to verify at level settlement"
        )
