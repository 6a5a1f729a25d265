"""The aggregates' older names, kept where users may have read them: each a
read-only property answering what the name it stands for holds (the list of
every alias: `ledger.casino.aliases.ALIASES`, shown in docs/cli.md); and the
one rule for a game named by its name now or its older one.

A line here spelling an older name says so (`# alias`): tests/house/test_glossary.py
finds every older word outside the modules that own them, but on such a line
a spelling `ALIASES` lists."""

from __future__ import annotations

from ledger.errors import InvalidCommandError


class RoundAliases:
    """`Round`'s names before issue 39 (and issue 20): game-neutral now."""

    game: str
    game_version: str
    seed_id: str | None
    draws: int

    @property
    def variant(self) -> str:  # alias
        """Alias of `game`."""
        return self.game

    @property
    def variant_version(self) -> str:  # alias
        """Alias of `game_version`."""
        return self.game_version

    @property
    def dice_seed(self) -> str | None:  # alias
        """Alias of `seed_id`."""
        return self.seed_id

    @property
    def throws(self) -> int:  # alias
        """Alias of `draws`."""
        return self.draws


class TableAliases:
    """`GameTable`'s name before issue 39."""

    game: str

    @property
    def variant(self) -> str:  # alias
        """Alias of `game`."""
        return self.game


def game_named(game: object, older: object, what: str = "a table") -> str:
    """The game named by `game` or by its older name `older` (an alias: the
    same game if both are given); a one-line refusal when neither is, or when
    they name two games."""
    if game is None and older is None:
        raise InvalidCommandError(
            f"{what} needs its game (`game`, a game id)", code="invalid_value", param="game"
        )
    if game is not None and older is not None and game != older:
        raise InvalidCommandError(
            f"{what} names two games, {game!r} and {older!r} (under the older name of "
            "`game`): give `game` alone",
            code="invalid_value",
            param="game",
        )
    named = game if game is not None else older
    if not isinstance(named, str):
        raise InvalidCommandError(
            f"a game is named by its id, a string, not {named!r}",
            code="invalid_value",
            param="game",
        )
    return named
