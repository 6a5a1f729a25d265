"""What a game declares so the core needs no action name or draw range of its
own (`Game.close_action`, `Game.fault_action`, `Game.draws`), checked once at
load and against every step: a game whose declarations are missing or do not
match its moves is refused, naming the plugin (`ledger.plugins.registry`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ledger.domain.stored_names import STORED_FAULT
from ledger.games.api import CARDS, DrawRange

#: The six-sided dice the RNG derives and the verifiers re-derive (`ledger.rng.dice`).
DICE: Final[DrawRange] = {"low": 1, "high": 6}
#: The one range each kind may declare in this release.
RANGES: Final[Mapping[str, DrawRange]] = {"dice": DICE, "cards": CARDS}
#: Stored rounds count an action named so as a fault (`is_fault`): only a game
#: whose fault it is may offer it.
HISTORIC_FAULT: Final = STORED_FAULT


def _action_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and value.strip() == value


def declaration_problem(game: Any) -> str | None:
    """What is wrong with the game's close_action, fault_action and draws, if anything."""
    missing = [n for n in ("close_action", "fault_action", "draws") if not hasattr(game, n)]
    if missing:
        return f"declares no {', '.join(missing)} (the games contract requires them)"
    close, fault, draws = game.close_action, game.fault_action, game.draws
    if not _action_name(close):
        return f"declares close_action {close!r}: not an action name"
    if fault is not None and not _action_name(fault):
        return f"declares fault_action {fault!r}: not an action name (or None)"
    if fault == close:
        return f"declares {close!r} as both its close_action and its fault_action"
    if not isinstance(draws, Mapping):
        return f"declares draws {draws!r}: not a mapping of kind to DrawRange"
    for kind, declared in draws.items():
        expected = RANGES.get(kind)
        if expected is None:
            return f"declares draws of kind {kind!r}: the core draws only dice and cards"
        if not isinstance(declared, Mapping) or dict(declared) != expected:
            return (
                f"declares {kind} {declared!r}: this ledger draws and checks {kind} "
                f"{expected['low']}..{expected['high']} only"
            )
    return None


def move_problem(game: Any, moves: Mapping[str, Mapping[str, Any]]) -> str | None:
    """What is wrong with a step's moves given the game's declarations, if anything."""
    for actor, offered in moves.items():
        for action, draw in offered.items():
            if draw is not None and draw["kind"] not in game.draws:
                return (
                    f"offers {actor} {action} drawing {draw['kind']}, which the game does "
                    f"not declare in its draws ({', '.join(game.draws) or 'none'})"
                )
            if action == HISTORIC_FAULT and game.fault_action != HISTORIC_FAULT:
                return (
                    f"offers {actor} {action!r}, the name stored rounds give a faulty draw, "
                    f"but declares fault_action {game.fault_action!r}"
                )
    return None
