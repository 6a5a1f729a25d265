"""A Xì dách round as `ledger simulate` plays it (capability ``simulated-play``).

The players and the dealer play the simple strategies of `ledger_xidach.strategy`
(a player draws below 16, the dealer checks hands it is ahead of); each move
is chosen from the game's own `Round`, one `apply` per recorded action, so
choosing needs no replay. The core records every move and draws its cards.
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.plugins import Draw
from ledger_xidach.strategy import DealerStrategy, PlayerStrategy
from ledger_xidach.table import DEALER, Round, seat_actor

# A stake is the player's unit times one of these (a seat is an even-money bet).
STAKE_MULTIPLIERS = (1, 1, 1, 2, 2, 3, 5, 10)


class PlayedRound:
    """A `SimulatedRound`: the round's replica and the strategies playing it."""

    def __init__(
        self,
        table: Round,
        player: PlayerStrategy | None = None,
        dealer: DealerStrategy | None = None,
    ) -> None:
        self.table = table
        self.player = player or PlayerStrategy()
        self.dealer = dealer or DealerStrategy()

    def next_move(self) -> tuple[str, str, Draw | None] | None:
        table = self.table
        moves = table.moves()
        if not moves:
            return None
        if table.turn is not None:
            actor = seat_actor(table.turn)
            action = self.player.choose(table.scores[table.turn], moves[actor])
        else:
            actor, offered = DEALER, moves[DEALER]
            action = (
                next(iter(offered)) if table.phase != "play" else self.dealer.choose(table, offered)
            )
        return actor, action, moves[actor][action]

    def apply(self, actor: str, action: str, drawn: Sequence[int]) -> None:
        self.table.apply(actor, action, drawn)
