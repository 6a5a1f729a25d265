"""Settlement API 2: a round played action by action, as the game offers them.

Each command picks one action (`Chooser`: legal, attested; `act` names it,
`chosen`, and each older play command picks it as `ledger.casino.aliases`
translates it), records it as `Round.ActionRecorded` with the game's step
after it, and settles in the same commit whatever bets that step settles, or
voids the round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from eventsourcing.domain import Aggregate

from ledger.casino import attestation, payouts
from ledger.casino.context import Context, bets_of
from ledger.casino.legality import offered_moves, refusal
from ledger.casino.runner import Work
from ledger.domain.round import Round
from ledger.domain.round_records import BetResult
from ledger.domain.stored_names import fault_marked
from ledger.games.api import RecordedAction, Step
from ledger.plugins.registry import LoadedGame
from ledger.rng.server import RngServer

# Picks a round's next action and its attested source.
Chooser = Callable[[LoadedGame, Round, Step, int], tuple[RecordedAction, dict[str, Any]]]
Played = tuple[dict[str, Any], list[Aggregate]]


def play(context: Context, work: Work, game_round: Round, choose: Chooser) -> Played:
    """Record the action `choose` picks, then settle in the same commit what the
    game's step settles, or void."""
    game = context.game_of(game_round)
    bets = bets_of(game_round)
    actions, step = context.steps.replay(game, game_round.id, bets, game_round.log)
    number = game_round.actions
    done, attested = choose(game, game_round, step, number)
    actions.append(done)
    after = game.step(bets, actions)
    if done["action"] == game.fault_action:  # known as a fault without its game
        attested = fault_marked(done["action"], attested)
    game_round.record_action(dict(done), attested, dict(after))
    context.steps.remember(game, game_round.id, bets, game_round.log, actions, after)
    changed: list[Aggregate] = [game_round]
    settled: list[BetResult] = []
    if after["void"] is not None:
        settled = game_round.void(after["void"], None)
        changed += [*payouts.pay(work, game_round, settled), *payouts.ended(work, game_round)]
    elif after["settle"] or after["over"]:
        settled = game_round.settle_step(after["settle"], after["over"])
        changed += payouts.pay(work, game_round, settled)
        if after["over"]:
            changed += payouts.ended(work, game_round)
    result = {
        "step": number,
        "drawn": done["drawn"],
        "state": after["state"],
        "settled": settled,
        "void": after["void"],
        "over": after["over"],
        "moves": offered_moves(game, after, game_round),
    }
    return result, changed


def chosen(
    context: Context,
    actor: Any,
    action: Any,
    args: Mapping[str, Any] | None,
    source: dict[str, Any] | None,
    rng: RngServer | None,
    asked_by: dict[str, str] | None,
) -> Chooser:
    """One of the moves the game offers now, named by actor and action (`act`)."""

    def choose(
        game: LoadedGame, game_round: Round, step: Step, number: int
    ) -> tuple[RecordedAction, dict[str, Any]]:
        offered = step["moves"].get(actor, {}) if isinstance(actor, str) else {}
        if not isinstance(action, str) or action not in offered:
            raise refusal(game, game_round, str(actor), str(action), step)
        given = game.validate_args(actor, action, dict(args or {}))
        drawn, attested = attestation.attest(
            context,
            game,
            game_round,
            number,
            actor,
            action,
            given,
            offered[action],
            source,
            rng,
            betting_open=step["betting"],
            asked_by=asked_by,
        )
        done: RecordedAction = {"actor": actor, "action": action, "args": given, "drawn": drawn}
        return done, attested

    return choose
