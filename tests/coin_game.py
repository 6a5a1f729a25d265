"""A tiny game for the money tests: a coin toss paying 1:1 (a push on its edge).

The dealer device reports the face as the `toss` move's argument (a coin is
neither dice nor cards, so the core draws nothing for it: RNG tables cannot
play it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ledger.errors import InvalidCommandError
from ledger.games.api import SETTLEMENT_API, BetView, DrawRange, RecordedAction, Step
from ledger.plugins import hookimpl
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import GameRegistry, LoadedGame

FACES = ("heads", "tails", "edge")


class CoinDefinition:
    """The coin toss as a plugin declares it (the contract's view)."""

    id = "coin"
    rules: ClassVar[dict[str, Any]] = {"pays": {"heads": 1, "tails": 1}, "edge": "push"}
    bets: Sequence[str] = ("heads", "tails")
    settlement_api = SETTLEMENT_API
    capabilities: frozenset[str] = frozenset()
    close_action = "close_betting"
    fault_action: str | None = "fault"
    draws: Mapping[str, DrawRange] = {}  # the face is the toss's argument: nothing drawn

    def validate_bet(self, bet: Mapping[str, Any], placed: Mapping[str, BetView]) -> dict[str, Any]:
        if "bet" in bet:  # the catalogue form {"bet": id}
            if set(bet) != {"bet"} or bet["bet"] not in self.bets:
                raise InvalidCommandError(f"unknown bet {dict(bet)!r}")
            return {"on": bet["bet"]}
        if dict(bet) not in ({"on": "heads"}, {"on": "tails"}):
            raise InvalidCommandError(f"unknown bet {dict(bet)!r}: bet on heads or tails")
        return dict(bet)

    def validate_args(self, actor: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if action == "toss" and (set(args) != {"face"} or args["face"] not in FACES):
            raise InvalidCommandError(f"bad outcome {dict(args)!r}")
        if action == "fault" and not str(args.get("reason", "")).strip():
            raise InvalidCommandError("a faulty throw needs a reason")
        return dict(args)

    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        closed = any(a["action"] == "close_betting" for a in actions)
        tossed = [a for a in actions if a["action"] == "toss"]
        over = bool(tossed)
        settle: dict[str, int] = {}
        if tossed:
            face = tossed[-1]["args"]["face"]
            settle = {
                bet_id: (
                    view["stake"]
                    if face == "edge"
                    else 2 * view["stake"]
                    if view["bet"]["on"] == face
                    else 0
                )
                for bet_id, view in bets.items()
            }
        moves: dict[str, Any] = (
            {}
            if over
            else {"dealer": {"toss": None, "fault": None}}
            if closed
            else {"dealer": {"close_betting": None}}
        )
        return {
            "state": {"closed": closed, "face": tossed[-1]["args"]["face"] if tossed else None},
            "betting": not closed,
            "moves": moves,
            "settle": settle,
            "void": None,
            "over": over,
            "flags": [],
        }


class CoinPlugin:
    """A plugin object registering the coin toss (tests register it directly)."""

    @hookimpl
    def ledger_register_games(self, registry: GameRegistry) -> None:
        registry.add(CoinDefinition())


# Plugin objects as an entry point would name them (module attributes).
coin_plugin = CoinPlugin()
other_coin_plugin = CoinPlugin()


def coin_games(version: str = "1.0", plugin: Any = None) -> dict[str, LoadedGame]:
    """The coin game loaded the way the core loads every game."""
    extra = [("coin", plugin or CoinPlugin(), version)]
    return get_plugin_manager(load_entry_points=False, extra=extra).games()


COIN_GAMES = coin_games()
CoinToss = CoinDefinition
