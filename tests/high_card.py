"""A small card game for the partial-settlement tests: high card against the dealer.

Players bet on a seat (``seat:1`` or ``seat:2``). Once betting closes the
dealer deals itself one card; then each seat with bets, in seat order, either
draws one card (its bets settle at once: a higher rank pays 1:1, a tie is a
push, a lower rank loses) or surrenders (half the stake back, no card). The
round is over when every seat with bets has acted: bets settle a seat at a
time, one settlement per action.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ledger.errors import InvalidCommandError
from ledger.games.api import CARDS, SETTLEMENT_API, BetView, Draw, DrawRange, RecordedAction, Step
from ledger.plugins import hookimpl
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import GameRegistry, LoadedGame

ONE_CARD: Draw = {"kind": "cards", "count": 1}
SEATS = (1, 2)


def rank(card: int) -> int:
    return card // 4 + 1


class HighCard:
    id = "high-card"
    rules: ClassVar[dict[str, Any]] = {"game": "high-card", "pays": 1, "surrender": "half"}
    bets: Sequence[str] = tuple(f"seat:{s}" for s in SEATS)
    settlement_api = SETTLEMENT_API
    capabilities: frozenset[str] = frozenset()
    close_action = "close_betting"
    fault_action = None
    draws: Mapping[str, DrawRange] = {"cards": CARDS}

    def validate_bet(self, bet: Mapping[str, Any], placed: Mapping[str, BetView]) -> dict[str, Any]:
        if set(bet) == {"seat"} and bet["seat"] in SEATS:  # the canonical form
            return {"seat": bet["seat"]}
        if set(bet) != {"bet"} or bet["bet"] not in self.bets:
            raise InvalidCommandError(f"unknown bet {dict(bet)!r}: bet on seat:1 or seat:2")
        return {"seat": int(str(bet["bet"]).split(":")[1])}

    def validate_args(self, actor: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if args:
            raise InvalidCommandError(f"{action} takes no arguments")
        return {}

    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        seats = sorted({view["bet"]["seat"] for view in bets.values()})
        closed, dealer, done = False, None, {}
        settle: dict[str, int] = {}
        for act in actions:
            settle = {}
            if act["action"] == "close_betting":
                closed = True
            elif act["action"] == "deal":
                dealer = act["drawn"][0]
            else:
                seat = int(act["actor"].split(":")[1])
                card = act["drawn"][0] if act["drawn"] else None
                done[seat] = card
                for bet_id, view in bets.items():
                    if view["bet"]["seat"] != seat:
                        continue
                    stake = view["stake"]
                    if card is None:
                        settle[bet_id] = stake // 2
                    else:
                        assert dealer is not None
                        mine, theirs = rank(card), rank(dealer)
                        settle[bet_id] = (
                            2 * stake if mine > theirs else stake if mine == theirs else 0
                        )
        waiting = [s for s in seats if s not in done]
        over = closed and dealer is not None and not waiting
        moves: dict[str, dict[str, Draw | None]]
        if not closed:
            moves = {"dealer": {"close_betting": None}}
        elif over:
            moves = {}
        elif dealer is None:
            moves = {"dealer": {"deal": ONE_CARD}}
        else:
            moves = {f"seat:{waiting[0]}": {"draw": ONE_CARD, "surrender": None}}
        return {
            "state": {"dealer": dealer, "seats": {str(s): c for s, c in done.items()}},
            "betting": not closed,
            "moves": moves,
            "settle": settle,
            "void": None,
            "over": over,
            "flags": [],
        }


class HighCardPlugin:
    @hookimpl
    def ledger_register_games(self, registry: GameRegistry) -> None:
        registry.add(HighCard())


def high_card_games(plugin: Any = None, version: str = "1.0") -> dict[str, LoadedGame]:
    extra = [("high-card", plugin or HighCardPlugin(), version)]
    return get_plugin_manager(load_entry_points=False, extra=extra).games()
