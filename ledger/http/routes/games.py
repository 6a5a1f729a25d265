"""The installed games and their paytables."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from ledger.http import responses, views
from ledger.http.dependencies import READERS, CasinoDep, ServiceDep
from ledger.http.routing import Router
from ledger.plugins.paytable import paytable

router = Router()
GameId = Annotated[str, Path(max_length=100)]


@router.endpoint("GET", "/games", READERS, responses.Games)
def games(service: ServiceDep) -> responses.Games:
    """The installed games."""
    return views.games(service.games)


@router.endpoint("GET", "/games/{game_id}", READERS, responses.GameRules)
def get_game(game_id: GameId, casino: CasinoDep) -> responses.GameRules:
    """An installed game with its rules data, whose canonical hash is its `rules_hash`."""
    return views.game_rules(casino.game(game_id))


@router.endpoint("GET", "/games/{game_id}/paytable", READERS, responses.Paytable)
def get_paytable(game_id: GameId, casino: CasinoDep) -> responses.Paytable:
    """A game's payouts and exact theoretical returns (as fractions)."""
    return views.paytable(game_id, paytable(casino.game(game_id)))
