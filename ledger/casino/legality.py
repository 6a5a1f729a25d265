"""Legality comes from the game: what its last step offers, and the refusals
that name round, actor and action."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.casino.context import Context, bets_of
from ledger.domain.round import Round
from ledger.errors import InvalidCommandError
from ledger.games.api import RecordedAction, Step
from ledger.games.replay import actor_for, outcome_action, outcome_move
from ledger.plugins.registry import LoadedGame


def step_of(context: Context, game: LoadedGame, game_round: Round) -> Step:
    """The game's step after everything the round recorded."""
    return context.steps.replay(game, game_round.id, bets_of(game_round), game_round.log)[1]


def offered_moves(game: LoadedGame, step: Step, game_round: Round) -> dict[str, list[str]]:
    """Who may do what next, as a caller sees it: the game's moves, less its fault
    at an RNG round (only a physical table's device reports one, rules §1.4)."""
    hidden = hidden_fault(game, game_round)
    return {
        actor: [action for action in offered if action != hidden]
        for actor, offered in step["moves"].items()
    }


def hidden_fault(game: LoadedGame, game_round: Round) -> str | None:
    """The game's fault at an RNG round, which nobody may take there."""
    return game.fault_action if game_round.seed_id is not None else None


def offers(step: Step, hidden: str | None = None) -> str:
    """The moves the step offers, in the game's own names (less `hidden`)."""
    moves = [
        f"{actor} may {a}"
        for actor, offered in step["moves"].items()
        for a in offered
        if a != hidden
    ]
    return "; ".join(moves) or ("it is over" if step["over"] else "no move is offered")


def refusal(
    game: LoadedGame, game_round: Round, actor: str, action: str, step: Step
) -> InvalidCommandError:
    moves = offers(step, hidden_fault(game, game_round))
    return InvalidCommandError(
        f"round {game_round.id} ({game_round.game}): {actor} may not {action} now ({moves})",
        code="move_not_offered",
        param="action",
    )


def legal_actor(context: Context, game: LoadedGame, game_round: Round, action: str) -> str:
    """The actor the game lets take `action` now, or refuse naming round and action."""
    step = step_of(context, game, game_round)
    actor = actor_for(step, action)
    if actor is None:
        raise InvalidCommandError(
            f"round {game_round.id} ({game_round.game}): nobody may {action} now "
            f"({offers(step, hidden_fault(game, game_round))})",
            code="move_not_offered",
            param="action",
        )
    return actor


def check_betting(context: Context, game: LoadedGame, game_round: Round, what: str) -> None:
    """Refuse unless the round takes bets now. The round knows it (the game's last
    step recorded it): no replay, whatever the round holds; only a refusal asks
    the game what it offers instead, to say so."""
    if game_round.taking_bets:
        return
    step = step_of(context, game, game_round)
    raise InvalidCommandError(
        f"round {game_round.id} is not taking bets (it is {game_round.status}): "
        f"a player may not {what} now ({offers(step, hidden_fault(game, game_round))})",
        code="betting_closed",
    )


def outcome_action_of(
    game: LoadedGame, game_round: Round, step: Step, outcome: Any
) -> RecordedAction:
    """The action a reported outcome stands for, or refuse saying why."""
    if not isinstance(outcome, Mapping):
        raise InvalidCommandError(
            f"an outcome is an object, not {outcome!r}", code="invalid_value", param="outcome"
        )
    move = outcome_move(game, step)
    if move is None:
        raise InvalidCommandError(
            f"round {game_round.id} is not awaiting an outcome (it is {game_round.status}): "
            f"nobody may report one now ({offers(step, hidden_fault(game, game_round))})",
            code="move_not_offered",
        )
    actor, action, draw = move
    if draw is None:
        outcome = game.validate_args(actor, action, outcome)
    found = outcome_action(game, step, outcome)
    values = None if draw is None else game.draw_range(draw["kind"])
    if found is None or (
        values is not None and not all(values["low"] <= v <= values["high"] for v in found["drawn"])
    ):
        assert draw is not None and values is not None  # an argument-only move takes any
        raise InvalidCommandError(
            f"bad outcome {dict(outcome)!r}: {action} draws {draw['count']} {draw['kind']} "
            f"({values['low']}..{values['high']})",
            code="invalid_draw",
            param="outcome",
        )
    return found


def stored_outcome(game: LoadedGame, step: Step, action: RecordedAction) -> dict[str, Any]:
    """An outcome as rounds store it: {kind: drawn} for randomness, else its args."""
    move = outcome_move(game, step)
    if move is not None and move[2] is not None:
        return {move[2]["kind"]: action["drawn"]}
    return dict(action["args"])
