"""What each bet should return in theory, and where that figure comes from.

- A game with the ``exact-paytable`` capability (dice): each bet's exact
  return, computed by `ledger.plugins.paytable` from the game's own `step`
  over its equally likely outcomes, for the installed game only when its
  rules hash is the round's (a round pins its rules).
- A game whose return depends on decisions (cards): the return measured by
  simulation (`tools/xidach_edge.py` writes `docs/xidach_edge.json`), matched
  to a round by the rules hash of the profile the simulation played; its own
  95% interval is shown beside it.
- Otherwise: no theoretical figure, said as such.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from ledger.errors import ConfigError, LedgerError
from ledger.games.api import EXACT_PAYTABLE
from ledger.plugins.paytable import paytable
from ledger.plugins.registry import LoadedGame, rules_hash


@dataclass(frozen=True)
class Theory:
    """Theoretical returns for one (game, rules hash)."""

    source: str  # said in the report: where the figures come from
    by_bet: Mapping[str, Fraction] | None  # per bet label (exact paytable)
    flat: Fraction | None = None  # one figure for every bet (a simulated return)
    flat_interval: tuple[float, float] | None = None

    def of(self, label: str) -> Fraction | None:
        if self.by_bet is not None:
            return self.by_bet.get(label)
        return self.flat


NONE = Theory("none: the game is not installed here, and no simulated return was given", None)


@dataclass(frozen=True)
class SimulatedEdge:
    profile: str
    rules_hash: str
    returned: int
    turnover: int
    interval: tuple[float, float]  # of the return (1 - the edge's bounds)
    file: str


def load_edges(paths: list[str]) -> list[SimulatedEdge]:
    """Simulated returns from `tools/xidach_edge.py` JSON files (bad file: ConfigError)."""
    found = []
    for path in paths:
        try:
            data: Any = json.loads(Path(path).read_text(encoding="utf-8"))
            for profile, result in data["results"].items():
                returned, turnover = result["returned"], result["turnover"]
                if type(returned) is not int or type(turnover) is not int or turnover <= 0:
                    raise ValueError(f"{profile}: returned and turnover must be integers")
                low, high = float(result["ci95_low"]), float(result["ci95_high"])
                found.append(
                    SimulatedEdge(
                        profile,
                        rules_hash(data["rules"][profile]),
                        returned,
                        turnover,
                        (1 - high, 1 - low),
                        path,
                    )
                )
        except OSError as exc:
            raise ConfigError(f"cannot read simulated edge {path}: {exc.strerror}") from exc
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"{path} is not a simulated edge file: {_why(exc)}") from None
    return found


def _why(exc: Exception) -> str:
    """What is wrong with an edge file, in words (not a Python exception's repr)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, KeyError):
        return f'no "{exc.args[0]}" field where `tools/xidach_edge.py` writes one'
    if isinstance(exc, TypeError | AttributeError):
        return "its fields are not the objects and numbers `tools/xidach_edge.py` writes"
    return str(exc)


class Theories:
    """Theory per (game, rules hash), worked out once each."""

    def __init__(self, games: Mapping[str, LoadedGame], edges: list[SimulatedEdge]) -> None:
        self._games = games
        self._edges = {edge.rules_hash: edge for edge in edges}
        self._known: dict[tuple[str, str], Theory] = {}

    def game(self, game_id: str) -> LoadedGame | None:
        """The installed game of that id, if any."""
        return self._games.get(game_id)

    def of(self, game_id: str, rules: str) -> Theory:
        key = (game_id, rules)
        if key not in self._known:
            self._known[key] = self._work_out(game_id, rules)
        return self._known[key]

    def _work_out(self, game_id: str, rules: str) -> Theory:
        game = self._games.get(game_id)
        if game is not None and game.rules_hash == rules and EXACT_PAYTABLE in game.capabilities:
            try:
                lines = paytable(game)
            except LedgerError:
                pass  # no exact paytable: try a simulated return
            else:
                exact = {line.bet: line.theoretical_return for line in lines}
                return Theory(f"exact paytable of {game.plugin} {game.version}", exact)
        edge = self._edges.get(rules)
        if edge is not None:
            return Theory(
                f"simulated: profile {edge.profile} in {edge.file}, "
                f"{edge.turnover:,} minor units staked, its own 95% interval "
                f"{100 * edge.interval[0]:.2f}% to {100 * edge.interval[1]:.2f}%",
                None,
                Fraction(edge.returned, edge.turnover),
                edge.interval,
            )
        if game is not None and game.rules_hash != rules:
            return Theory(f"none: the installed {game_id} has other rules than these rounds", None)
        if game is not None:
            return Theory(
                f"none: {game_id} has no exact paytable, and no simulated return for its "
                "rules was given (--edge FILE)",
                None,
            )
        return NONE
