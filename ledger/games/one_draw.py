"""A one-draw game's draw, read from its own steps: after the move it declares
closes betting (`close_action`), the one move that draws dice (``simulated-play`` games whose
rounds are one draw, `ledger.games.api.SimulatedPlay`)."""

from __future__ import annotations

from ledger.games.api import Draw, RecordedAction, Stepping


def one_draw(game: Stepping) -> tuple[str, str, Draw] | None:
    """(actor, action, what it draws) of the draw that settles the round, or
    None when the game's round is not that shape."""
    opening = game.step({}, [])
    closers = [a for a, moves in opening["moves"].items() if game.close_action in moves]
    if len(closers) != 1:
        return None
    closing: RecordedAction = {
        "actor": closers[0],
        "action": game.close_action,
        "args": {},
        "drawn": [],
    }
    after = game.step({}, [closing])
    draws = [
        (a, m, d) for a, moves in after["moves"].items() for m, d in moves.items() if d is not None
    ]
    if after["betting"] or len(draws) != 1 or draws[0][2]["kind"] != "dice":
        return None
    return draws[0]
