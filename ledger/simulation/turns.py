"""A round of turns in a session: every move through `Casino.act`.

The game says how it is played (`ledger.games.api.SimulatedPlay`): up to
`seats()` players each take the next catalogue bet (a seat), then the game's
own strategies choose every move from its replica of the round
(`SimulatedRound`), and the casino records each one, taking legality from the
game's step. At an RNG table the core draws the move's randomness from the
round's committed seed; at a physical table the dealer draws it (cards from a
shuffled shoe, dice shaken) and the dealer device reports every move, signed.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from ledger.casino import Casino
from ledger.devices import DealerDevice
from ledger.games.api import DECK_SIZE, BetView, Draw, DrawRange, SimulatedPlay
from ledger.plugins.registry import LoadedGame
from ledger.rng.server import RngServer
from ledger.simulation import behaviour
from ledger.simulation.behaviour import chance
from ledger.simulation.floor import Table
from ledger.simulation.players import Player
from ledger.simulation.request_ids import RequestIds
from ledger.simulation.tally import Tally


class Session(Protocol):
    """What a round of turns takes of the session playing it (`simulation.session`)."""

    casino: Casino
    rng: RngServer  # an RNG table's seeds
    shaker: random.Random  # a physical table's shoe is shuffled (or its dice shaken) with it
    choices: random.Random  # the players' choices
    ids: RequestIds
    tally: Tally

    def seated(self, table: Table) -> list[Player]: ...

    def reporter(self) -> DealerDevice: ...


def play_round(
    session: Session, table: Table, round_id: str, game: LoadedGame, play: SimulatedPlay
) -> None:
    """Seat bets, then play the round to its end through `Casino.act`."""
    casino, rng, tally = session.casino, session.choices, session.tally
    limits = table.spec.limits
    catalogue, seats = list(game.bets), play.seats()
    placed: dict[str, BetView] = {}
    owners: dict[str, Player] = {}
    for player in session.seated(table):
        if len(placed) == seats:
            break
        if not chance(rng, behaviour.PLAY_CHANCE):
            continue
        bet = catalogue[len(placed)]  # the next free seat
        stake = behaviour.pick_stake(
            rng,
            player.unit,
            play.stake_multipliers(bet),
            limits,
            limits["max_round"],
            player.balance,
        )
        if stake is None:
            continue
        bet_id = casino.place_bet(
            request_id=session.ids.next("bet"),
            round_id=round_id,
            account_id=player.account_id,
            bet={"bet": bet},
            stake=stake,
        )
        player.balance -= stake
        placed[bet_id] = {
            "account_id": player.account_id,
            "bet": game.validate_bet({"bet": bet}, {}),
            "stake": stake,
        }
        owners[bet_id] = player
        tally.bets_placed += 1
    replica = play.simulated_round(placed)
    if replica is None:
        raise RuntimeError(f"{game.id} seats players but gave no round to play")
    shoe = list(range(DECK_SIZE))
    session.shaker.shuffle(shoe)  # a physical table's shoe (an RNG table uses its deck)
    number = 0
    settled: set[str] = set()
    while (move := replica.next_move()) is not None:
        actor, action, draw = move
        values = None if draw is None else game.draw_range(draw["kind"])
        done = _act(session, table, round_id, number, actor, action, (draw, values), shoe)
        replica.apply(actor, action, done["drawn"])
        number += 1
        for result in done["settled"]:
            owner = owners[result["bet_id"]]
            owner.balance += result["returned"]
            settled.add(result["bet_id"])
            tally.settled_unpriced(table.spec.name, result["stake"], result["returned"])
    if settled != set(placed):  # the casino's step and the game's replica disagree
        raise RuntimeError(f"round {round_id} ended with bets unsettled")
    tally.tables[table.spec.name].rounds_settled += 1


def _act(
    session: Session,
    table: Table,
    round_id: str,
    number: int,
    actor: str,
    action: str,
    drawing: tuple[Draw | None, DrawRange | None],
    shoe: list[int],
) -> dict[str, Any]:
    request_id = session.ids.next("act")
    if not table.spec.physical:
        found: dict[str, Any] = session.casino.act(
            request_id=request_id, round_id=round_id, actor=actor, action=action, rng=session.rng
        )
        return found
    drawn = _dealt(session.shaker, *drawing, shoe)
    source = session.reporter().act(round_id, number, actor, action, {}, drawn)
    session.tally.card_reports += 1
    reported: dict[str, Any] = session.casino.act(
        request_id=request_id, round_id=round_id, actor=actor, action=action, source=source
    )
    return reported


def _dealt(
    shaker: random.Random, draw: Draw | None, values: DrawRange | None, shoe: list[int]
) -> list[int]:
    """What the dealer draws at a physical table: cards off the shoe, or dice
    shaken (faces as the game declares them)."""
    if draw is None or values is None:
        return []
    if draw["kind"] == "dice":
        return [shaker.randint(values["low"], values["high"]) for _ in range(draw["count"])]
    cards, shoe[:] = shoe[: draw["count"]], shoe[draw["count"] :]
    return cards
