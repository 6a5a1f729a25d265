"""The store's rules register (`ledger.domain.game_rules`), read and written:
the rules data of every game a node had installed, kept so that a round can be
re-settled with the rules it pinned after the release declaring them is gone
(docs/plugins.md, "Changing a game's rules or its code")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from ledger.domain.game_rules import GAME_RULES_ID, GameRules
from ledger.plugins.registry import LoadedGame
from ledger.store.application import LedgerApplication


@dataclass(frozen=True)
class RecordedRules:
    """One record of the register: the data of (game id, rules hash), as written
    (checked against the hash where it is used, never trusted for it)."""

    game: str
    rules_hash: str
    settlement_api: int
    rules: dict[str, Any]
    plugin: str
    plugin_version: str


def _register(app: LedgerApplication) -> GameRules | None:
    try:
        register: object = app.repository.get(GAME_RULES_ID)
    except AggregateNotFoundError:
        return None
    assert isinstance(register, GameRules)
    return register


def recorded_rules(app: LedgerApplication) -> list[RecordedRules]:
    """Every record of the store's rules register, in record order (none: [])."""
    register = _register(app)
    if register is None:
        return []
    return [
        RecordedRules(
            str(r["game"]),
            str(r["rules_hash"]),
            int(r["settlement_api"]),
            dict(r["rules"]),
            str(r["plugin"]),
            str(r["plugin_version"]),
        )
        for r in register.recorded.values()
    ]


def record_rules(app: LedgerApplication, games: Iterable[LoadedGame]) -> list[LoadedGame]:
    """Record the rules data of each of `games` the register does not hold yet
    (one event each; the register is created by its first); the games recorded
    now. Another process recording at the same moment is not an error: the
    register is read again and what it still lacks recorded once more."""
    games = sorted(games, key=lambda g: (g.id, g.rules_hash))
    for _attempt in range(3):
        register = _register(app) or GameRules()
        missing = [
            game for game in games if f"{game.id} {game.rules_hash}" not in register.recorded
        ]
        if not missing:
            return []
        for game in missing:
            register.record(
                game=game.id,
                rules_hash=game.rules_hash,
                settlement_api=game.settlement_api,
                rules=dict(game.rules),
                plugin=game.plugin,
                plugin_version=game.version,
            )
        try:
            app.save(register)
        except IntegrityError:
            continue  # another node recorded first: read what it wrote
        return missing
    raise IntegrityError("the rules register kept changing while rules were recorded")
