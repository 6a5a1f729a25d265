"""Who may state an outcome, a fault or a decision (rules §1.4), checked before
anything is recorded: on an RNG table the core draws (never a fault) and any
other move is the node's own command; on a physical table, once betting is
closed, every action comes only in a dealer device's signed report; an
operator's fact carries an operator key that may sign now."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from ledger.casino.context import Context
from ledger.crypto.actor import actor_signature, verify_fact
from ledger.crypto.envelope import now_micros
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.crypto.validity import operator_may_sign_now
from ledger.domain.round import Round
from ledger.domain.round_sources import FAULTY_DRAW
from ledger.domain.signed_facts import FAULT_FACT, action_fact
from ledger.errors import InvalidCommandError, VerificationError
from ledger.games.api import DECK_SIZE, Draw, RecordedAction, Step
from ledger.plugins.registry import LoadedGame
from ledger.rng.deck import shuffled_deck
from ledger.rng.server import RngServer

_SIGNED_FIELDS = ("kind", "key_id", "signature")  # what a device report keeps of itself


def check_operator(context: Context, operator: Signer) -> Signer:
    """An operator key the keyring knows that may sign now (valid, not revoked in
    the keyring or the log: `ledger.crypto.validity`): else nothing is recorded."""
    operator_may_sign_now(context.signing_keyring(), operator.key_id, now_micros())
    return operator


def check_device(context: Context, source: dict[str, Any], fact: dict[str, Any]) -> None:
    """A dealer device's report: its signature over `fact`, by a `dealer-device`
    key that may sign now (valid, not revoked: `ledger.crypto.validity`)."""
    try:
        verify_fact(
            context.signing_keyring(),
            fact,
            actor_signature(source),
            Role.DEALER_DEVICE,
            "report",
            at=now_micros(),
        )
    except VerificationError as exc:
        raise InvalidCommandError(
            f"dealer device report refused: {exc}", code="device_report_refused", param="source"
        ) from None


def check_source(
    context: Context,
    game: LoadedGame,
    game_round: Round,
    source: dict[str, Any],
    fact: dict[str, Any],
) -> None:
    """Who may state an outcome or a fault: on an RNG round nobody (the core
    computes it); on a physical round only a dealer device, with its own
    `dealer-device` key, valid now. Anything else is refused before a thing is
    recorded."""
    if not isinstance(source, dict):
        raise InvalidCommandError(
            "a draw's source is an object", code="device_report_refused", param="source"
        )
    if source.get("kind") == "rng":
        raise InvalidCommandError(
            "RNG draws are made by the node (act, throw_dice), not reported",
            code="device_report_refused",
            param="source",
        )
    # Refuses every source on an RNG round, and any but a device's elsewhere.
    faulty = fact["action"] == FAULT_FACT
    game_round.check_source(source, FAULTY_DRAW if faulty else "an outcome")
    check_device(context, source, fact)


def signed_as(
    source: dict[str, Any], fact: str, step: Step, done: RecordedAction
) -> dict[str, Any]:
    """A device report signed over a draw or fault fact (by draw counter), as
    recorded: verify checks that fact's signature, not an action fact's."""
    recorded: dict[str, Any] = {
        k: source[k] for k in ("kind", "key_id", "signature") if k in source
    }
    draw = step["moves"][done["actor"]][done["action"]]
    if draw is not None:
        recorded["draw"] = draw["kind"]
    return {**recorded, "signed": fact}


def attest(
    context: Context,
    game: LoadedGame,
    game_round: Round,
    number: int,
    actor: str,
    action: str,
    args: dict[str, Any],
    draw: Draw | None,
    source: dict[str, Any] | None,
    rng: RngServer | None,
    *,
    betting_open: bool,
    asked_by: dict[str, str] | None = None,
) -> tuple[list[int], dict[str, Any]]:
    """What the action drew and the source attesting it: on an RNG table the
    core draws (never a fault) and any other move is the node's own command
    (with `asked_by`, the session that asked for it); on a physical table, once
    betting is closed, every action — draws, faults and decisions alike — comes
    only in a dealer device's signed report (while betting is open the node may
    close it)."""
    command: dict[str, Any] = {"kind": "command"}
    if asked_by is not None:
        command["by"] = dict(asked_by)
    if game_round.is_rng:
        if action == game.fault_action:
            raise InvalidCommandError(
                f"round {game_round.id} is on an RNG table: an RNG draw is never faulty "
                "(if the RNG malfunctioned, void the round)",
                code="wrong_table_kind",
            )
        if source is not None:
            raise InvalidCommandError(
                f"round {game_round.id} is on an RNG table: the core draws its randomness, "
                "nobody reports it",
                code="wrong_table_kind",
            )
        if draw is None:
            return [], command
        return _rng_draw(game_round, draw, rng, asked_by)
    # A physical table: once bets are locked, every action, decisions included,
    # is what its dealer device saw and signed (rules §1.4); while betting is
    # open the node may end it by its own command (no randomness, no bet
    # decided by it).
    if source is None and betting_open and draw is None and action != game.fault_action:
        return [], command
    fact_of = partial(action_fact, game_round.id, number, actor, action, args)
    return _device_report(context, game, game_round, action, draw, source, fact_of)


def _rng_draw(
    game_round: Round, draw: Draw, rng: RngServer | None, asked_by: dict[str, str] | None
) -> tuple[list[int], dict[str, Any]]:
    """The RNG's draw from the round's committed seed: three dice at the round's
    counter, or the next cards of its shuffled deck (a hit is a decision too:
    who asked for it, beside the RNG's cards)."""
    if rng is None:
        raise InvalidCommandError(
            f"round {game_round.id} is on an RNG table: pass its RNG", code="invalid_command"
        )
    seed_id = str(game_round.seed_id)
    if draw["kind"] == "dice":
        if draw["count"] != 3:
            raise InvalidCommandError("the RNG draws three dice at a time", code="invalid_draw")
        counter = game_round.draws
        drawn = list(rng.throw(seed_id, str(game_round.id), counter))
        source = {"kind": "rng", "seed_id": seed_id, "draw": "dice", "counter": counter}
    else:
        first = len(game_round.dealt)
        positions = list(range(first, first + draw["count"]))
        if positions[-1] >= DECK_SIZE:
            raise InvalidCommandError(
                f"round {game_round.id}: the deck is exhausted", code="invalid_draw"
            )
        deck = shuffled_deck(rng.seed(seed_id), str(game_round.id))
        drawn = [deck[p] for p in positions]
        source = {"kind": "rng", "seed_id": seed_id, "draw": "cards", "positions": positions}
    return drawn, source if asked_by is None else {**source, "by": dict(asked_by)}


def _device_report(
    context: Context,
    game: LoadedGame,
    game_round: Round,
    action: str,
    draw: Draw | None,
    source: dict[str, Any] | None,
    fact_of: Callable[[list[int]], dict[str, Any]],
) -> tuple[list[int], dict[str, Any]]:
    """A dealer device's signed report of the action: what it drew, of the kind,
    count and values the game declares, and its signature over the action's fact."""
    if not isinstance(source, dict) or source.get("kind") != "device":
        raise InvalidCommandError(
            f"round {game_round.id} is on a physical table: {action} comes only from a "
            "dealer device's signed report",
            code="device_report_refused",
            param="source",
        )
    drawn = source.get("drawn")
    count = 0 if draw is None else draw["count"]
    values = game.draw_range(draw["kind"]) if draw is not None else {"low": 0, "high": 0}
    low, high = values["low"], values["high"]
    if (
        not isinstance(drawn, list)
        or len(drawn) != count
        or not all(type(v) is int and low <= v <= high for v in drawn)
    ):
        what = "nothing" if draw is None else f"{count} {draw['kind']} ({low}..{high})"
        raise InvalidCommandError(
            f"bad report: {action} draws {what}, got {drawn!r}",
            code="device_report_refused",
            param="source",
        )
    check_device(context, source, fact_of(drawn))
    recorded: dict[str, Any] = {
        k: source[k] for k in ("kind", "key_id", "signature") if k in source
    }
    if draw is not None:
        recorded["draw"] = draw["kind"]
    return list(drawn), recorded
