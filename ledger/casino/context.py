"""What every write module of the casino shares: the ledger, its games, the
remembered replays, and the keyring writers sign by."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ledger.crypto.keys import Keyring
from ledger.domain.round import Round
from ledger.errors import ConfigError, InvalidCommandError, NotFoundError
from ledger.games.api import BetView
from ledger.games.step_cache import StepCache
from ledger.plugins.registry import LoadedGame
from ledger.privacy.personal import PersonalData
from ledger.store.application import LedgerApplication


@dataclass
class Context:
    app: LedgerApplication
    games: Mapping[str, LoadedGame]
    # Each round's last replay, so a command continues it (see step_cache).
    steps: StepCache = field(default_factory=StepCache)

    @property
    def personal(self) -> PersonalData:
        """The node's personal-data keys: what owners and dealers are sealed with."""
        if self.app.personal is None:
            raise ConfigError(
                "this ledger application has no key store for personal data: "
                "open it with ledger.node.open_node (or ledger.casino.open_ledger)"
            )
        return self.app.personal

    def game(self, game_id: str) -> LoadedGame:
        try:
            return self.games[game_id]
        except KeyError:
            raise NotFoundError(f"unknown game {game_id!r}") from None

    def game_of(self, game_round: Round) -> LoadedGame:
        """The game the round opened with: same id, rules and settlement API (the
        plugin's release may differ: the round pins rules, not wheels)."""
        game = self.game(game_round.game)
        if game.rules_hash != game_round.rules_hash or (
            game_round.settlement_api != 1 and game.settlement_api != game_round.settlement_api
        ):
            raise InvalidCommandError(
                f"round {game_round.id} opened with {game_round.game} "
                f"{game_round.game_version} (rules {game_round.rules_hash[:12]}, settlement "
                f"API {game_round.settlement_api}), but {game.version} (rules "
                f"{game.rules_hash[:12]}, settlement API {game.settlement_api}) is installed",
                code="game_not_installed",
            )
        return game

    def signing_keyring(self) -> Keyring:
        """The keyring now, with every revocation the key registry holds merged in:
        a key revoked through another node (its own keys directory) is revoked here."""
        return self.app.signing_keyring()


def bets_of(game_round: Round) -> dict[str, BetView]:
    """The round's bets, as the game sees them (a copy: the game keeps what it likes)."""
    return dict(game_round.bets)


def placed_view(game_round: Round) -> Mapping[str, BetView]:
    """The round's bets, read-only and not copied: what a bet is checked against."""
    return MappingProxyType(game_round.bets)
