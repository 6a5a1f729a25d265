"""The older names, in one place: every command, CLI spelling, HTTP route and
field the ledger answered to before `act` became its one play command (and
before its names became game-neutral, and a game was called a game), kept
where users may have used them, with what each is now (`ALIASES`, the list
docs/cli.md's "Aliases" shows and tests/casino/test_aliases.py holds to the code);
and the Python API's play aliases themselves, each a translation into the
move `act` would take, played by the same `play` (`ledger.casino.play`),
never a second path. Outside this module an older name is spelt only on a
line that says so (`# alias`), as `ALIASES` spells it (tests/house/test_glossary.py).

An alias keeps its own command name in its request's record (a retry of a
request made through it before, under any release, gets its first answer),
its own answer's shape, and, for a physical table's device, its own signed
fact: a draw (stored name: throw) or fault report (`ledger.devices.throw_report`,
`fault_report`) where `act` takes an action report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventsourcing.domain import Aggregate

from ledger.casino import attestation
from ledger.casino.context import Context
from ledger.casino.legality import (
    hidden_fault,
    legal_actor,
    offers,
    outcome_action_of,
    step_of,
    stored_outcome,
)
from ledger.casino.play import Chooser, play
from ledger.casino.runner import Body, Work
from ledger.domain.round import Round
from ledger.domain.round_records import BETTING, SETTLED
from ledger.domain.signed_facts import FAULT_FACT, fault_fact, throw_fact
from ledger.domain.stored_names import SIGNED_THROW
from ledger.errors import InvalidCommandError
from ledger.games.api import RecordedAction, Step
from ledger.games.replay import actor_for, outcome_move
from ledger.plugins.registry import LoadedGame
from ledger.rng.server import RngServer

Done = tuple[Any, list[Aggregate]]


@dataclass(frozen=True)
class Alias:
    """An older name (`name`, as a user wrote it) on one interface, and what it
    is now (`means`), both as docs/cli.md shows them (Markdown)."""

    interface: str  # "Python API", "CLI", "HTTP" or "plugins"
    name: str
    means: str


ROUND = "/v1/rounds/{round_id}"
ALIASES: tuple[Alias, ...] = (
    Alias(
        "Python API",
        "`Casino.close_betting`",
        "`Casino.act` of the move the game declares closes betting (its `close_action`), by "
        "the actor the game lets take it",
    ),
    Alias(
        "Python API",
        "`Casino.throw_dice`",
        "`Casino.act` of the move that draws dice next, from the round's committed seed (an "
        'RNG table); answers `{"dice": [...]}`',
    ),
    Alias(
        "Python API",
        "`Casino.record_outcome`",
        "`Casino.act` of the one move the outcome fills (`{kind: drawn}`, or the move's "
        "arguments), attested by a dealer device's throw report (`DealerDevice.throw`) instead "
        "of an action report",
    ),
    Alias(
        "Python API",
        "`Casino.record_fault`",
        "`Casino.act` of the game's `fault_action`, attested by a dealer device's fault report "
        '(`DealerDevice.fault`); answers `{"faults": N, "then": ...}`',
    ),
    Alias(
        "Python API",
        "`Casino.settle`",
        "nothing left to do: a draw or an action settles what its game settles "
        "(`Casino.round(R).results`), so it is refused; a retry of a settlement it answered "
        "before gets that answer",
    ),
    Alias(
        "Python API",
        "`Casino.correct`",
        "`Casino.correct_step` of the round's last action, the right result given as an "
        "outcome (`{kind: drawn}`, or a move's arguments)",
    ),
    Alias("Python API", "`Round.dice_seed`, `Round.throws`", "`Round.seed_id`, `Round.draws`"),
    Alias(
        "Python API",
        "`Round.variant`, `Round.variant_version`, `GameTable.variant`",
        "`Round.game`, `Round.game_version`, `GameTable.game`",
    ),
    Alias("Python API", "`Casino.variant`", "`Casino.game`"),
    Alias(
        "Python API",
        "the `variant` keyword of `Casino.open_table`",
        "its `game` keyword (one of the two; the same game if both are given)",
    ),
    Alias("Python API", "`TableSpec.variant` (`ledger.simulation`)", "`TableSpec.game`"),
    Alias(
        "CLI",
        "`ledger rounds throw ROUND`",
        "`ledger rounds act ROUND ACTOR ACTION` of the dice move (`Casino.throw_dice`)",
    ),
    Alias("CLI", "`ledger rounds settle ROUND`", "`Casino.settle`: nothing left to settle"),
    Alias("CLI", "`ledger variants`", "`ledger games`"),
    Alias("CLI", "`--dice-seed` of `ledger simulate`", "`--rng-seed`"),
    Alias(
        "HTTP",
        f"`POST {ROUND}/close-betting`",
        f"`POST {ROUND}/act` of the game's `close_action` (`Casino.close_betting`)",
    ),
    Alias(
        "HTTP",
        f"`POST {ROUND}/draw`",
        f"`POST {ROUND}/act` of the dice move at an RNG table (`Casino.throw_dice`)",
    ),
    Alias(
        "HTTP",
        f"`POST {ROUND}/throw`",
        f'`POST {ROUND}/draw`, answering `{{"thrown": ...}}` (deprecated in the OpenAPI document)',
    ),
    Alias("HTTP", f"`POST {ROUND}/outcome`", "`Casino.record_outcome`"),
    Alias("HTTP", f"`POST {ROUND}/faults`", "`Casino.record_fault`"),
    Alias("HTTP", f"`POST {ROUND}/settle`", "`Casino.settle`"),
    Alias(
        "HTTP",
        f"`POST {ROUND}/corrections`",
        f"`POST {ROUND}/step-corrections` of the last action (`Casino.correct`)",
    ),
    Alias(
        "HTTP",
        f"`dice_seed`, `throws` of `GET {ROUND}`",
        "`seed_id`, `draws` (deprecated in the OpenAPI document)",
    ),
    Alias(
        "HTTP",
        "`variant` of `POST /v1/tables`",
        "`game` (one of the two; the same game if both are given; deprecated in the OpenAPI "
        "document)",
    ),
    Alias(
        "HTTP",
        f"`variant`, `variant_version` of `GET {ROUND}`, `GET /v1/rounds`, "
        "`GET /v1/tables/{table_id}`",
        "`game`, `game_version` (deprecated in the OpenAPI document)",
    ),
    Alias("plugins", "the hook `ledger_register_variants`", "the hook `ledger_register_games`"),
)


# The Python API's play aliases, as command bodies.


def close_betting(context: Context, round_id: str, by: dict[str, str] | None) -> Body:
    """`act` of the game's `close_action`, by the actor the game lets take it;
    `by`, the session that asked (`Casino.asked_by`)."""

    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        close = context.game_of(game_round).close_action
        return None, play(context, work, game_round, wrapped(context, close, None, by))[1]

    return body


def record_outcome(
    context: Context, round_id: str, outcome: dict[str, Any], source: dict[str, Any]
) -> Body:
    """`act` of the one move `outcome` fills, attested by a dealer device's draw
    report (`throw_fact`)."""

    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        return None, play(context, work, game_round, reported(context, outcome, source))[1]

    return body


def throw_dice(context: Context, round_id: str, rng: RngServer, by: dict[str, str] | None) -> Body:
    """`act` of the move that draws dice next, from the round's committed seed;
    answers {"dice": drawn}."""

    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        if game_round.seed_id is None:
            raise InvalidCommandError(
                f"round {game_round.id} has no RNG seed: a physical table", code="wrong_table_kind"
            )
        game = context.game_of(game_round)
        step = step_of(context, game, game_round)
        move = outcome_move(game, step)
        draw = move[2] if move is not None else None
        if draw is None or draw["kind"] != "dice":
            raise InvalidCommandError(
                f"round {game_round.id} ({game_round.game}): the game draws no dice now "
                f"({offers(step, hidden_fault(game, game_round))})",
                code="move_not_offered",
            )
        assert move is not None  # the dice drawn settle what the game says
        played, changed = play(context, work, game_round, wrapped(context, move[1], rng, by))
        return {draw["kind"]: played["drawn"]}, changed

    return body


def record_fault(context: Context, round_id: str, reason: str, source: dict[str, Any]) -> Body:
    """`act` of the game's `fault_action`, attested by a dealer device's fault
    report (`fault_fact`); answers how many faulty draws and what followed."""

    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        game = context.game_of(game_round)
        fault = game.fault_action
        if fault is None:
            raise InvalidCommandError(
                f"round {game_round.id} ({game_round.game}): the game has no faulty draw",
                code="move_not_offered",
            )
        actor = legal_actor(context, game, game_round, fault)
        reason_args = game.validate_args(actor, fault, {"reason": reason})
        played, changed = play(
            context, work, game_round, fault_reported(context, reason_args, source)
        )
        after = changed[0]  # the round, as the fault left it
        assert isinstance(after, Round)
        then = (
            "voided"
            if played["void"] is not None
            else "betting reopened"
            if after.status == BETTING
            else "throw again"
        )
        return {"faults": after.faults, "then": then}, changed

    return body


def settle(context: Context, round_id: str) -> Body:
    """Nothing is left to settle: a draw or an action settles what its game
    settles. Refused, saying so (a retry of a request it answered before is
    answered by the runner, before this)."""

    def body(work: Work) -> Done:
        game_round = work.round(round_id)
        # Its game's steps settle it as they are played (a draw, an action):
        # there is never anything left for this command to settle.
        if game_round.status == SETTLED:
            raise InvalidCommandError(
                f"round {game_round.id} is already settled", code="round_settled"
            )
        raise InvalidCommandError(
            f"round {game_round.id} has no outcome to settle on (it is {game_round.status}): "
            "its game settles it as it is played",
            code="nothing_to_settle",
        )

    return body


# What each stands for: the move `act` would take, and its attestation.


def wrapped(
    context: Context, action: str, rng: RngServer | None, by: dict[str, str] | None
) -> Chooser:
    """The one move named `action` the game offers now, attested as `act` would
    (`by`: the session that asked, as `act`'s `attested_by`)."""

    def choose(
        game: LoadedGame, game_round: Round, step: Step, number: int
    ) -> tuple[RecordedAction, dict[str, Any]]:
        actor = actor_for(step, action)
        if actor is None:
            raise InvalidCommandError(
                f"round {game_round.id} ({game_round.game}): nobody may {action} now "
                f"({offers(step, hidden_fault(game, game_round))})",
                code="move_not_offered",
            )
        given = game.validate_args(actor, action, {})
        draw = step["moves"][actor][action]
        drawn, attested = attestation.attest(
            context,
            game,
            game_round,
            number,
            actor,
            action,
            given,
            draw,
            None,
            rng,
            betting_open=step["betting"],
            asked_by=by,
        )
        return {"actor": actor, "action": action, "args": given, "drawn": drawn}, attested

    return choose


def reported(context: Context, outcome: Any, source: dict[str, Any]) -> Chooser:
    """An outcome a dealer device signed as the round's next draw (`throw_fact`)."""

    def choose(
        game: LoadedGame, game_round: Round, step: Step, number: int
    ) -> tuple[RecordedAction, dict[str, Any]]:
        done = outcome_action_of(game, game_round, step, outcome)
        checked = stored_outcome(game, step, done)
        attestation.check_source(
            context, game, game_round, source, throw_fact(game_round.id, game_round.draws, checked)
        )
        return done, attestation.signed_as(source, SIGNED_THROW, step, done)

    return choose


def fault_reported(
    context: Context, reason_args: dict[str, Any], source: dict[str, Any]
) -> Chooser:
    """A faulty draw a dealer device signed (`fault_fact`)."""

    def choose(
        game: LoadedGame, game_round: Round, step: Step, number: int
    ) -> tuple[RecordedAction, dict[str, Any]]:
        fault = game.fault_action
        actor = None if fault is None else actor_for(step, fault)
        assert fault is not None and actor is not None  # checked by the caller
        attestation.check_source(
            context,
            game,
            game_round,
            source,
            fault_fact(game_round.id, game_round.draws, reason_args["reason"]),
        )
        done: RecordedAction = {"actor": actor, "action": fault, "args": reason_args, "drawn": []}
        return done, attestation.signed_as(source, FAULT_FACT, step, done)

    return choose
