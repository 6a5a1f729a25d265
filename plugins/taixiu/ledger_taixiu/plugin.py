"""The plugin: two profiles of the three-dice game, on the games contract
(settlement API 2).

``taixiu`` and ``sicbo-void`` (docs/rules.md §1) share the bets and the
paytable and differ only in what a faulty throw does (docs/rules.md §1.2). A
round is one step: the dealer closes betting, then throws (three dice: every
bet settles) or the device reports a fault (the fault policy decides what
follows).
"""

from __future__ import annotations

import random
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ledger.plugins import (
    BET_FAMILIES,
    EXACT_PAYTABLE,
    SETTLEMENT_API,
    SIMULATED_PLAY,
    BetView,
    Draw,
    DrawRange,
    GameRegistry,
    InvalidCommandError,
    RecordedAction,
    SimulatedRound,
    Step,
    hookimpl,
)
from ledger_taixiu.families import FAULT_REASONS, MULTIPLIERS, by_family, family_of, pick_bet
from ledger_taixiu.rules import (
    ALL_OUTCOMES,
    BET_IDS,
    TAIXIU_PAYTABLE,
    Paytable,
    check_dice,
    parse_bet,
    paytable_profile,
    returned,
)

# What a faulty throw does, per profile.
TAIXIU_FAULTS = {
    "after_fault": "rethrow",  # bets locked, the dealer re-shakes
    "void_after": 2,  # the re-shake faulty too: void, every stake returned
}
SICBO_VOID_FAULTS = {
    "after_fault": "reopen-betting",  # the throw is void; withdrawals and new bets allowed
    "void_after": 3,
}

DEALER: Final = "dealer"
THREE_DICE: Final[Draw] = {"kind": "dice", "count": 3}
MAX_REASON: Final = 200


class DiceGame:
    """A three-dice game: its paytable and fault policy are its rules."""

    bets: Sequence[str] = BET_IDS
    settlement_api: int = SETTLEMENT_API
    capabilities: frozenset[str] = frozenset({EXACT_PAYTABLE, BET_FAMILIES, SIMULATED_PLAY})
    close_action: str = "close_betting"
    fault_action: str | None = "fault"  # a throw the device could not use (cocked dice)
    draws: Mapping[str, DrawRange] = {"dice": {"low": 1, "high": 6}}

    def __init__(self, game_id: str, paytable: Paytable, faults: Mapping[str, Any]) -> None:
        self.id = game_id
        self.paytable = paytable
        # Unchanged since settlement API 1, so the rules hash rounds pinned is too.
        self.rules: Mapping[str, Any] = {
            "game": "three-dice",
            "paytable": paytable_profile(paytable),
            "faults": dict(faults),
        }
        self.reopens = faults.get("after_fault") == "reopen-betting"
        self.void_after: int = int(faults["void_after"])
        self._families = by_family(self.bets)

    # Input.
    def validate_bet(self, bet: Mapping[str, Any], placed: Mapping[str, BetView]) -> dict[str, Any]:
        return {"bet": parse_bet(bet)}

    def validate_args(self, actor: str, action: str, args: Mapping[str, Any]) -> dict[str, Any]:
        if action == "fault":
            reason = args.get("reason")
            if set(args) != {"reason"} or not isinstance(reason, str) or not reason.strip():
                raise InvalidCommandError(
                    "a faulty throw needs a reason", code="invalid_action_args", param="args"
                )
            if len(reason) > MAX_REASON:
                raise InvalidCommandError(
                    f"a fault's reason is at most {MAX_REASON} characters",
                    code="invalid_action_args",
                    param="args",
                )
            return {"reason": reason}
        if args:
            raise InvalidCommandError(
                f"{action} takes no arguments, got {reprlib.repr(args)}",
                code="invalid_action_args",
                param="args",
            )
        return {}

    # The rules.
    def step(self, bets: Mapping[str, BetView], actions: Sequence[RecordedAction]) -> Step:
        betting, faults = True, 0
        for done in actions:
            action = done["action"]
            if action == "close_betting":
                betting = False
            elif action == "throw":
                dice = check_dice(done["drawn"])
                return self._step(
                    {"phase": "settled", "dice": list(dice), "faults": faults},
                    settle={
                        bet_id: returned(view["bet"]["bet"], view["stake"], dice, self.paytable)
                        for bet_id, view in bets.items()
                    },
                )
            elif action == "fault":
                faults += 1
                if faults >= self.void_after:
                    reason = f"{faults} faulty throws: {done['args'].get('reason', '')}"
                    return self._step({"phase": "voided", "faults": faults}, void=reason)
                betting = self.reopens
        phase = "betting" if betting else "closed"
        moves: dict[str, dict[str, Draw | None]] = (
            {DEALER: {"close_betting": None}}
            if betting
            else {DEALER: {"throw": THREE_DICE, "fault": None}}
        )
        return {
            "state": {"phase": phase, "faults": faults},
            "betting": betting,
            "moves": moves,
            "settle": {},
            "void": None,
            "over": False,
            "flags": [],
        }

    @staticmethod
    def _step(
        state: dict[str, Any], settle: dict[str, int] | None = None, void: str | None = None
    ) -> Step:
        return {
            "state": state,
            "betting": False,
            "moves": {},
            "settle": settle or {},
            "void": void,
            "over": True,
            "flags": [],
        }

    # Capability "exact-paytable": 216 equally likely throws.
    def sample_bets(self) -> Sequence[dict[str, Any]]:
        return [{"bet": bet_id} for bet_id in BET_IDS]

    def pays(self, bet: Mapping[str, Any]) -> str:
        pays = self.paytable[parse_bet(bet)]
        return " / ".join(f"{x}:1" for x in pays) if isinstance(pays, tuple) else f"{pays}:1"

    def equally_likely(self) -> Sequence[Sequence[RecordedAction]]:
        return [
            [
                {"actor": DEALER, "action": "close_betting", "args": {}, "drawn": []},
                {"actor": DEALER, "action": "throw", "args": {}, "drawn": list(dice)},
            ]
            for dice in ALL_OUTCOMES
        ]

    # Capability "bet-families": the seven kinds of three-dice bet.
    def families(self) -> Mapping[str, Sequence[str]]:
        return self._families

    def family_of(self, bet: Mapping[str, Any]) -> str:
        return family_of(parse_bet(bet))

    # Capability "simulated-play": one throw settles every bet.
    def seats(self) -> int:
        return 0  # one draw

    def pick_bet(self, rng: random.Random) -> str:
        return pick_bet(rng, self._families)

    def stake_multipliers(self, bet: str) -> Sequence[int]:
        return MULTIPLIERS[family_of(bet)]

    def fault_reasons(self) -> Sequence[str]:
        return FAULT_REASONS

    def simulated_round(self, bets: Mapping[str, BetView]) -> SimulatedRound | None:
        return None  # one draw: the session closes betting and throws


# The name plugins built on it (e.g. another house's paytable) imported before.
DiceVariant = DiceGame


@hookimpl
def ledger_register_games(registry: GameRegistry) -> None:
    registry.add(DiceGame("taixiu", TAIXIU_PAYTABLE, TAIXIU_FAULTS))
    registry.add(DiceGame("sicbo-void", TAIXIU_PAYTABLE, SICBO_VOID_FAULTS))
