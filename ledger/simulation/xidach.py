"""A Xì dách round in a session: every card and decision through `Casino.act`.

The players and the dealer play the plugin's simple strategies
(`ledger_xidach.strategy`: a player draws below 16, the dealer checks hands it
is ahead of); the moves are chosen from a local replica of the round (the
plugin's own `Round`, one `apply` per recorded action, so no replay per move)
but every one of them is recorded by the casino, which takes legality from
the game's step. At an RNG table the core deals from the round's committed
deck; at a physical table the dealer deals from a shuffled shoe and the
dealer device reports every card and every decision, signed.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ledger.casino import Casino
from ledger.devices import DealerDevice
from ledger.errors import ConfigError
from ledger.rng.server import RngServer
from ledger.simulation import behaviour
from ledger.simulation.behaviour import chance
from ledger.simulation.floor import Table
from ledger.simulation.players import Player
from ledger.simulation.request_ids import RequestIds
from ledger.simulation.tally import Tally


class Session(Protocol):
    """What a card round takes of the session playing it (`simulation.session`)."""

    casino: Casino
    dice: RngServer  # an RNG table's seeds
    shaker: random.Random  # a physical table's shoe is shuffled with it
    choices: random.Random  # the players' choices
    ids: RequestIds
    tally: Tally

    def seated(self, table: Table) -> list[Player]: ...

    def reporter(self) -> DealerDevice: ...


FAMILY: Final = "small/big"  # stake sizes: the even-money multipliers


@dataclass
class XiDachTable:
    """How a session plays one Xì dách table: the plugin's rules and strategies."""

    rules: Any  # ledger_xidach.rules.XiDachRules
    player: Any  # ledger_xidach.strategy.PlayerStrategy
    dealer: Any  # ledger_xidach.strategy.DealerStrategy

    @classmethod
    def of(cls, rules: Mapping[str, Any]) -> XiDachTable:
        try:
            from ledger_xidach.rules import XiDachRules
            from ledger_xidach.strategy import DealerStrategy, PlayerStrategy
        except ImportError:
            raise ConfigError(
                "a Xì dách table needs the casino-ledger-xidach plugin's strategies"
            ) from None
        return cls(XiDachRules.from_profile(dict(rules)), PlayerStrategy(), DealerStrategy())


def play_round(session: Session, table: Table, round_id: str, game: XiDachTable) -> None:
    """Seat bets, then play the round to its end through `Casino.act`."""
    from ledger_xidach.table import DEALER, Round, seat_actor

    casino, rng, tally = session.casino, session.choices, session.tally
    limits = table.spec.limits
    seats: dict[int, tuple[str, int]] = {}
    owners: dict[str, Any] = {}
    for player in session.seated(table):
        if len(seats) == game.rules.seats:
            break
        if not chance(rng, behaviour.PLAY_CHANCE):
            continue
        stake = behaviour.pick_stake(
            rng, player.unit, FAMILY, limits, limits["max_round"], player.balance
        )
        if stake is None:
            continue
        seat = len(seats) + 1
        bet_id = casino.place_bet(
            request_id=session.ids.next("bet"),
            round_id=round_id,
            account_id=player.account_id,
            bet={"bet": f"seat:{seat}"},
            stake=stake,
        )
        player.balance -= stake
        seats[seat] = (bet_id, stake)
        owners[bet_id] = player
        tally.bets_placed += 1
    replica = Round(game.rules, seats)
    shoe = list(range(52))
    session.shaker.shuffle(shoe)  # a physical table's shoe (an RNG table uses its deck)
    number = 0
    while moves := replica.moves():
        if replica.turn is not None:
            actor = seat_actor(replica.turn)
            action = game.player.choose(replica.scores[replica.turn], moves[actor])
        else:
            actor, offered = DEALER, moves[DEALER]
            action = (
                next(iter(offered))
                if replica.phase != "play"
                else game.dealer.choose(replica, offered)
            )
        done = _act(session, table, round_id, number, actor, action, moves[actor][action], shoe)
        replica.apply(actor, action, done["drawn"])
        number += 1
        for result in done["settled"]:
            owner = owners[result["bet_id"]]
            owner.balance += result["returned"]
            tally.settled_unpriced(table.spec.name, result["stake"], result["returned"])
    if set(replica.returned) != set(seats):  # the casino's step and the replica disagree
        raise RuntimeError(f"round {round_id} ended with seats unsettled")
    tally.tables[table.spec.name].rounds_settled += 1


def _act(
    session: Session,
    table: Table,
    round_id: str,
    number: int,
    actor: str,
    action: str,
    draw: Any,
    shoe: list[int],
) -> dict[str, Any]:
    request_id = session.ids.next("act")
    if not table.spec.physical:
        found: dict[str, Any] = session.casino.act(
            request_id=request_id, round_id=round_id, actor=actor, action=action, rng=session.dice
        )
        return found
    count = 0 if draw is None else draw["count"]
    cards, shoe[:] = shoe[:count], shoe[count:]
    source = session.reporter().act(round_id, number, actor, action, {}, cards)
    session.tally.card_reports += 1
    reported: dict[str, Any] = session.casino.act(
        request_id=request_id, round_id=round_id, actor=actor, action=action, source=source
    )
    return reported
