"""The rules register: the one stream where the rules data of games are kept.

A round pins its game's rules by hash only (`Round.Opened.rules_hash`); this
stream keeps the data behind each hash, so the store can re-settle a round
after the release that declared its rules is gone (docs/plugins.md, "Changing
a game's rules or its code"). Each record is checked against the hash it
names before it is used: the data are trusted for what they hash to, not for
who wrote them. Its id is fixed (a uuid5 of a well-known name), so it is read
by an indexed stream lookup, never by scanning the log.
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

GAME_RULES_ID = uuid5(NAMESPACE_URL, "casino-ledger/game-rules")


class GameRules(Aggregate):
    """Every (game id, rules hash) recorded, with its rules data, in record order."""

    @staticmethod
    def create_id() -> UUID:
        return GAME_RULES_ID

    @event("Created")
    def __init__(self) -> None:
        # "game rules-hash" -> the record (JSON keys: the aggregate stays plain data).
        self.recorded: dict[str, dict[str, Any]] = {}

    @event("RulesRecorded")
    def record(
        self,
        game: str,
        rules_hash: str,
        settlement_api: int,
        rules: dict[str, Any],
        plugin: str,
        plugin_version: str,
    ) -> None:
        """`rules` are the data whose RFC 8785 bytes hash to `rules_hash`; `plugin`
        and `plugin_version` the release that declared them (information)."""
        self.recorded.setdefault(
            f"{game} {rules_hash}",
            {
                "game": game,
                "rules_hash": rules_hash,
                "settlement_api": settlement_api,
                "rules": rules,
                "plugin": plugin,
                "plugin_version": plugin_version,
            },
        )
