"""Each round's own game, found by what the round pinned: its game id, rules
hash and settlement API, whichever installed release declares them (the
plugin's version and code hash are information), or, where the rules travel
with the events (a bundle's games.jsonl), the game an installed plugin builds
from those rules data (`PinnedGames`). A round no game can re-derive stops
`verify --level settlement` with `CannotReDeriveError` (exit 3): a check that
was not made is never an OK, and never tampering."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ledger.errors import CannotReDeriveError, VerificationError
from ledger.plugins.manager import BLOCK_ENV
from ledger.plugins.registry import LoadedGame, rules_hash

#: Rounds of settlement API 1 are replayed through an API-2 game by translating
#: their events to actions (ledger.games.replay): same rules, same payouts.
REPLAYS = {1: {1, 2}, 2: {2}}


class PinnedGames(Mapping[str, LoadedGame]):
    """The installed games by id and, beside them, games built from rules data
    by (game id, rules hash), for the pairs no installed game declares.

    `carried` is every pair whose rules data came with the events and `source`
    names where they came from: a round pinning rules that neither an installed
    game declares nor the source carries fails verification (the data are
    missing from it), rather than being a check that could not be made."""

    def __init__(
        self,
        installed: Mapping[str, LoadedGame],
        built: Mapping[tuple[str, str], LoadedGame],
        offered: Iterable[tuple[str, str]] = (),
        carried: Iterable[tuple[str, str]] = (),
        source: str | None = None,
    ) -> None:
        self._installed = installed
        self._built = dict(built)
        # The pairs a plugin was asked to build a game for (built or not).
        self.offered = frozenset(offered) | frozenset(self._built)
        self.carried = frozenset(carried) | self.offered
        self.source = source

    def __getitem__(self, game_id: str) -> LoadedGame:
        return self._installed[game_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._installed)

    def __len__(self) -> int:
        return len(self._installed)

    def built(self, game_id: str, pinned: str) -> LoadedGame | None:
        """The game built from the rules data of (`game_id`, rules hash `pinned`)."""
        return self._built.get((game_id, pinned))

    @property
    def built_games(self) -> list[tuple[str, str, LoadedGame]]:
        """(game id, rules hash, game) of every game built from rules data, sorted."""
        return [(g, h, game) for (g, h), game in sorted(self._built.items())]


def games_from_rules(
    installed: Mapping[str, LoadedGame],
    profiles: Iterable[tuple[str, str, Mapping[str, Any]]],
    build: Callable[[str, Mapping[str, Any]], LoadedGame | None],
    source: str | None = None,
) -> PinnedGames:
    """`installed`, and for every (game id, rules hash, rules data) of `profiles`
    (carried by `source`) that no installed game declares, the game `build` makes
    from the data (the plugins' `ledger_game_from_rules`), once the data is
    checked to hash to the rules hash (`VerificationError` if not: the data are
    not what rounds pinned)."""
    built: dict[tuple[str, str], LoadedGame] = {}
    offered: set[tuple[str, str]] = set()
    carried: set[tuple[str, str]] = set()
    for game_id, pinned, rules in profiles:
        if rules_hash(rules) != pinned:
            raise VerificationError(
                f"the rules data of {game_id} do not hash to its rules hash {pinned[:12]}"
            )
        carried.add((game_id, pinned))
        game = installed.get(game_id)
        if (game is not None and game.rules_hash == pinned) or (game_id, pinned) in offered:
            continue
        offered.add((game_id, pinned))
        made = build(game_id, rules)
        if made is not None:
            built[game_id, pinned] = made
    return PinnedGames(installed, built, offered, carried, source)


class RoundGames:
    def __init__(self, games: Mapping[str, LoadedGame]) -> None:
        self.games = games
        self._cache: dict[tuple[str, str, int], LoadedGame] = {}
        # (game, version played, version re-derived) -> rounds: information only.
        self.other_code: dict[tuple[str, str, str], int] = {}
        self._counted: set[str] = set()  # several audits ask for one round's game

    def of(self, round_id: str, opened: Mapping[str, Any]) -> LoadedGame:
        """The game `round_id` opened with (its Round.Opened state, under the
        names it has now: `SettlementAudit.check`), or raise."""
        api = int(opened.get("settlement_api", 1))
        key = (str(opened["game"]), str(opened["rules_hash"]), api)
        game = self._cache.get(key)
        if game is None:
            game = self._find(round_id, opened, key)
            self._cache[key] = game
        played = (str(opened["game_version"]), str(opened.get("code_hash") or ""))
        if played != (game.version, game.code_hash) and round_id not in self._counted:
            self._counted.add(round_id)
            info = (game.id, played[0], game.version)
            self.other_code[info] = self.other_code.get(info, 0) + 1
        return game

    def _find(
        self, round_id: str, opened: Mapping[str, Any], key: tuple[str, str, int]
    ) -> LoadedGame:
        name, rules, api = key
        game = self.games.get(name)
        if (
            game is not None
            and game.rules_hash == rules
            and game.settlement_api in REPLAYS.get(api, set())
        ):
            return game
        pinned = self.games if isinstance(self.games, PinnedGames) else None
        made = pinned.built(name, rules) if pinned is not None else None
        if made is not None and made.settlement_api in REPLAYS.get(api, set()):
            return made
        installed = (
            f"{game.plugin} {game.version} (rules {game.rules_hash[:12]}, settlement API "
            f"{game.settlement_api})"
            if game is not None
            else "none"
        )
        if pinned is not None and pinned.source and (name, rules) not in pinned.carried:
            raise VerificationError(
                f"{pinned.source}: the rules of {name} (rules hash {rules[:12]}), which a "
                "round opened with, are missing"
            )
        blocked = os.environ.get(BLOCK_ENV, "").strip()
        because = f"; plugins blocked by {BLOCK_ENV}: {blocked}" if blocked else ""
        if pinned is not None and (name, rules) in pinned.offered:
            because += (
                "; no installed plugin builds a game from the rules data at hand"
                if made is None
                else f"; built from the rules data at hand by {made.plugin} {made.version} "
                f"(settlement API {made.settlement_api})"
            )
        raise CannotReDeriveError(
            f"cannot re-settle round {round_id}: it opened with {name} "
            f"{opened['game_version']} (rules {rules[:12]}, settlement API {api}); "
            f"installed: {installed}{because}. Install a release of the plugin declaring "
            "those rules to verify at level settlement"
        )
