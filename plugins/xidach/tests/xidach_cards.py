"""Test helpers: cards by name, deals in deal order, bets and recorded actions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledger_xidach.game import XiDach

from ledger.plugins import BetView, RecordedAction, Step

RANKS = {"A": 1, "J": 11, "Q": 12, "K": 13, **{str(n): n for n in range(2, 11)}}


class Shoe:
    """Hands out distinct cards by rank name (the suit cycles), as one deck would."""

    def __init__(self) -> None:
        self.used: set[int] = set()

    def card(self, name: str) -> int:
        rank = RANKS[name]
        for suit in range(4):
            card = (rank - 1) * 4 + suit
            if card not in self.used:
                self.used.add(card)
                return card
        raise AssertionError(f"no fifth {name}")

    def cards(self, names: str) -> list[int]:
        return [self.card(n) for n in names.split()]


def deal(shoe: Shoe, hands: Mapping[int, str], dealer: str) -> list[int]:
    """The drawn cards of a deal giving each seat (ascending) then the dealer two cards."""
    order = [shoe.cards(hands[seat]) for seat in sorted(hands)] + [shoe.cards(dealer)]
    return [hand[i] for i in range(2) for hand in order]


def bets(stakes: Mapping[int, int]) -> dict[str, BetView]:
    return {
        f"b{seat}": {"account_id": f"acct{seat}", "bet": {"seat": seat}, "stake": stake}
        for seat, stake in stakes.items()
    }


def act(actor: str, action: str, drawn: Sequence[int] = ()) -> RecordedAction:
    return {"actor": actor, "action": action, "args": {}, "drawn": list(drawn)}


class Script:
    """Records actions one by one, checking each is offered, and keeps every step."""

    def __init__(self, game: XiDach, stakes: Mapping[int, int]) -> None:
        self.game = game
        self.bets = bets(stakes)
        self.actions: list[RecordedAction] = []
        self.step: Step = game.step(self.bets, [])

    def __call__(self, actor: str, action: str, drawn: Sequence[int] = ()) -> Step:
        assert action in self.step["moves"].get(actor, {}), (actor, action, self.step["moves"])
        self.actions.append(act(actor, action, drawn))
        self.step = self.game.step(self.bets, self.actions)
        return self.step

    def start(self, shoe: Shoe, hands: Mapping[int, str], dealer: str) -> Step:
        self("dealer", "close_betting")
        return self("dealer", "deal", deal(shoe, hands, dealer))

    def seat(self, n: int) -> dict[str, Any]:
        seat: dict[str, Any] = self.step["state"]["seats"][str(n)]
        return seat
