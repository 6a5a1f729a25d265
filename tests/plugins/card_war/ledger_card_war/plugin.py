"""Card war against the dealer, on the games contract (settlement API 2).

Players bet on a seat (``seat:1`` to ``seat:3``, one bet a seat) or on a tie
(``tie:N``: seat N's card ties the dealer's). Once betting closes the dealer
deals itself one card, face up; then each seat with bets, in seat order,
either draws one card (a higher rank pays 1:1, a tie is a push on the seat
and pays 10:1 on its tie bet, a lower rank loses) or surrenders (half of
the seat bet back, the tie bet lost). The round is over when every seat with
bets has acted.

It declares ``bet-families`` (seat bets and tie bets) and ``simulated-play``
(rounds of turns: a seat surrenders against a queen or a king, else draws).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ledger.plugins import (
    BET_FAMILIES,
    CARDS,
    SETTLEMENT_API,
    SIMULATED_PLAY,
    BetView,
    Draw,
    DrawRange,
    GameRegistry,
    InvalidCommandError,
    RecordedAction,
    Step,
    hookimpl,
)

ONE_CARD: Final[Draw] = {"kind": "cards", "count": 1}
SEATS: Final = (1, 2, 3)
DEALER: Final = "dealer"
TIE_PAYS: Final = 10
SURRENDER_AGAINST: Final = 12  # a queen or a king
# The families, by the bet's kind (named unlike the kind, so a test tells them apart).
FAMILIES: Final = {"seat": "against the dealer", "tie": "tie"}


def rank(card: int) -> int:
    return card // 4 + 1


def seat_of(actor: str) -> int:
    return int(actor.split(":")[1])


class CardWar:
    id = "card-war"
    rules: Mapping[str, Any] = {"game": "card-war", "pays": 1, "tie_pays": TIE_PAYS}
    bets: Sequence[str] = (*(f"seat:{s}" for s in SEATS), *(f"tie:{s}" for s in SEATS))
    settlement_api = SETTLEMENT_API
    capabilities: frozenset[str] = frozenset({BET_FAMILIES, SIMULATED_PLAY})
    close_action = "close_betting"
    fault_action = None
    draws: Mapping[str, DrawRange] = {"cards": CARDS}

    # Input.
    def validate_bet(self, bet: Mapping[str, Any], placed: Mapping[str, BetView]) -> dict[str, Any]:
        if set(bet) != {"bet"} or bet["bet"] not in self.bets:
            raise InvalidCommandError(f"unknown bet {dict(bet)!r}: seat:N or tie:N, N 1..3")
        return {"bet": bet["bet"]}

    def validate_args(self, actor: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if args:
            raise InvalidCommandError(f"{action} takes no arguments")
        return {}

    # The rules.
    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        table = Table(bets)
        settle: dict[str, int] = {}
        for done in actions:
            settle = table.apply(done["actor"], done["action"], done["drawn"])
        return {
            "state": table.state(),
            "betting": not table.closed,
            "moves": table.moves(),
            "settle": settle,
            "void": None,
            "over": table.over(),
            "flags": [],
        }

    # Capability "bet-families".
    def families(self) -> Mapping[str, Sequence[str]]:
        return {
            FAMILIES["seat"]: [b for b in self.bets if b.startswith("seat:")],
            FAMILIES["tie"]: [b for b in self.bets if b.startswith("tie:")],
        }

    def family_of(self, bet: Mapping[str, Any]) -> str:
        return FAMILIES[str(bet["bet"]).partition(":")[0]]

    # Capability "simulated-play": rounds of turns, one seat a player.
    def seats(self) -> int:
        return len(SEATS)

    def pick_bet(self, rng: random.Random) -> str:
        return rng.choice(list(self.bets))

    def stake_multipliers(self, bet: str) -> Sequence[int]:
        return (1, 1, 2, 3)

    def fault_reasons(self) -> Sequence[str]:
        return ()

    def simulated_round(self, bets: Mapping[str, BetView]) -> PlayedRound:
        return PlayedRound(Table(bets))


class Table:
    """A round's state, one `apply` per recorded action."""

    def __init__(self, bets: Mapping[str, BetView]) -> None:
        self.bets = {bet_id: (str(v["bet"]["bet"]), v["stake"]) for bet_id, v in bets.items()}
        self.seats = sorted({int(bet.split(":")[1]) for bet, _ in self.bets.values()})
        self.closed = False
        self.dealer: int | None = None
        self.done: dict[int, int | None] = {}  # seat -> its card (None: surrendered)

    def waiting(self) -> list[int]:
        return [seat for seat in self.seats if seat not in self.done]

    def over(self) -> bool:
        return self.closed and self.dealer is not None and not self.waiting()

    def moves(self) -> dict[str, dict[str, Draw | None]]:
        if not self.closed:
            return {DEALER: {"close_betting": None}}
        if self.dealer is None:
            return {DEALER: {"deal": ONE_CARD}}
        waiting = self.waiting()
        if not waiting:
            return {}
        return {f"seat:{waiting[0]}": {"draw": ONE_CARD, "surrender": None}}

    def apply(self, actor: str, action: str, drawn: Sequence[int]) -> dict[str, int]:
        if action == "close_betting":
            self.closed = True
            return {}
        if action == "deal":
            self.dealer = drawn[0]
            return {}
        seat = seat_of(actor)
        card = drawn[0] if action == "draw" else None
        self.done[seat] = card
        return {
            bet_id: self._returned(bet, stake, card)
            for bet_id, (bet, stake) in self.bets.items()
            if int(bet.split(":")[1]) == seat
        }

    def _returned(self, bet: str, stake: int, card: int | None) -> int:
        assert self.dealer is not None
        if card is None:  # surrendered: half the seat bet back, the tie bet lost
            return stake // 2 if bet.startswith("seat:") else 0
        mine, theirs = rank(card), rank(self.dealer)
        if bet.startswith("tie:"):
            return stake * (1 + TIE_PAYS) if mine == theirs else 0
        return 2 * stake if mine > theirs else stake if mine == theirs else 0

    def state(self) -> dict[str, Any]:
        return {
            "closed": self.closed,
            "dealer": self.dealer,
            "seats": {str(seat): card for seat, card in self.done.items()},
        }


class PlayedRound:
    """How the simulated players play: surrender against a queen or a king."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def next_move(self) -> tuple[str, str, Draw | None] | None:
        moves = self.table.moves()
        if not moves:
            return None
        actor, offered = next(iter(moves.items()))
        if actor == DEALER:
            action = next(iter(offered))
        else:
            assert self.table.dealer is not None
            action = "surrender" if rank(self.table.dealer) >= SURRENDER_AGAINST else "draw"
        return actor, action, offered[action]

    def apply(self, actor: str, action: str, drawn: Sequence[int]) -> None:
        self.table.apply(actor, action, drawn)


@hookimpl
def ledger_register_games(registry: GameRegistry) -> None:
    registry.add(CardWar())
