"""Each round's life re-derived from its events (`verify --level settlement`):
the order of its steps, who may void it, and its variant's fault policy
(RULES.md §1.2, §1.4), read from the rules data of the variant version the
round opened with, never from the variant's name.

- Bets are placed and withdrawn only while betting is open; an outcome or a
  faulty throw only once betting is closed; a settlement only on an outcome;
  a correction only of a settled round.
- After a faulty throw, a `rethrow` policy (e.g. `taixiu`) keeps the bets
  locked: no bet placed or withdrawn, betting never reopened, the next throw
  comes with the same bets. A `reopen-betting` policy (e.g. `sicbo-void`)
  reopens betting before the next throw.
- At the policy's limit of faulty throws (`void_after`) the round is voided
  at once, every standing stake returned in full.
- A void without an operator's signature is only the game's own void (its
  fault policy, a device-reported misdeal); an operator's void is never made
  once a valid outcome is recorded, in part or whole: an outcome, a settled
  bet, or any draw of randomness (the first card dealt, RULES §1.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eventsourcing.utils import get_topic

from ledger.audit.round_variants import RoundVariants
from ledger.domain.round import BETTING, CLOSED, DECIDED, SETTLED, VOIDED, LogEntry, Round
from ledger.errors import InvalidCommandError, VerificationError
from ledger.games.replay import replay
from ledger.plugins.registry import LoadedGame

_OPENED = get_topic(Round.Opened)
_BET = get_topic(Round.BetPlaced)
_WITHDRAWN = get_topic(Round.BetWithdrawn)
_CLOSED = get_topic(Round.BettingClosed)
_REOPENED = get_topic(Round.BettingReopened)
_OUTCOME = get_topic(Round.OutcomeRecorded)
_FAULT = get_topic(Round.FaultRecorded)
_SETTLED = get_topic(Round.Settled)
_VOIDED = get_topic(Round.Voided)
_CORRECTED = get_topic(Round.Corrected)
_ACTION = get_topic(Round.ActionRecorded)


@dataclass
class _Policy:
    """What the game's step said after the last faulty throw."""

    reopens_betting: bool = False

    def describe(self) -> str:
        return (
            "its game reopened betting after the faulty throw"
            if self.reopens_betting
            else "its game kept bets locked after the faulty throw"
        )


@dataclass
class _Life:
    variant: str
    game: LoadedGame
    policy: _Policy = field(default_factory=_Policy)
    log: list[LogEntry] = field(default_factory=list)
    status: str = BETTING
    faults: int = 0
    after_fault: bool = False  # a faulty throw, and no throw since
    must_void: bool = False  # the policy's limit was reached
    bets: dict[str, tuple[str, int]] = field(default_factory=dict)  # bet id -> (account, stake)
    settled: set[str] = field(default_factory=set)  # bets a step settled (settlement API 2)
    drawn: int = 0  # actions that drew randomness (dice, cards): part of the outcome
    views: dict[str, dict[str, Any]] = field(default_factory=dict)  # bet id -> as placed


class RoundRulesAudit:
    def __init__(self, variants: RoundVariants) -> None:
        self.variants = variants
        self.rounds: dict[str, _Life] = {}
        self.checked = 0  # rounds whose whole life was re-derived
        self.faults = 0  # faulty throws whose policy consequence was re-derived

    def observe(self, stream: str, topic: str, state: dict[str, Any], where: str) -> None:
        if topic == _OPENED:
            variant = self.variants.of(stream, state)
            self.rounds[stream] = _Life(str(state["variant"]), variant)
            self.checked += 1
            return
        life = self.rounds.get(stream)
        if life is None:
            return

        def fail(message: str) -> VerificationError:
            return VerificationError(f"round {stream} ({life.variant}): {message}", where=where)

        if topic in (_BET, _WITHDRAWN):
            if life.after_fault and not life.policy.reopens_betting:
                raise fail(
                    f"a bet {'placed' if topic == _BET else 'withdrawn'} after a faulty throw, "
                    f"but its rules lock bets ({life.policy.describe()})"
                )
            if life.status != BETTING:
                raise fail(f"a bet changed while the round was {life.status}")
            if topic == _BET:
                life.bets[state["bet_id"]] = (str(state["account_id"]), int(state["stake"]))
                life.views[state["bet_id"]] = {
                    "account_id": state["account_id"],
                    "bet": state["bet"],
                    "stake": state["stake"],
                }
            else:
                life.bets.pop(state["bet_id"], None)
                life.views.pop(state["bet_id"], None)
        elif topic == _CLOSED:
            self._expect(life, BETTING, "betting closed", fail)
            life.status = CLOSED
            life.log.append({"close_betting": True})
        elif topic == _REOPENED:
            self._expect(life, CLOSED, "betting reopened", fail)
            if not (life.after_fault and life.policy.reopens_betting):
                raise fail(
                    "betting reopened"
                    + (" after a faulty throw" if life.after_fault else " without a faulty throw")
                    + f", but its rules say: {life.policy.describe()}"
                )
            life.status, life.after_fault = BETTING, False
        elif topic in (_OUTCOME, _FAULT):
            what = "an outcome" if topic == _OUTCOME else "a faulty throw"
            self._expect(life, CLOSED, what, fail)
            if life.must_void:
                raise fail(
                    f"{what} after {life.faults} faulty throws: its rules void the round "
                    f"({life.policy.describe()})"
                )
            if life.after_fault and life.policy.reopens_betting:
                raise fail(
                    f"{what} after a faulty throw without betting reopened first "
                    f"({life.policy.describe()})"
                )
            if topic == _OUTCOME:
                life.status, life.after_fault = DECIDED, False
                life.log.append({"outcome": state["outcome"]})
            else:
                life.log.append({"fault": state["reason"]})
                self._fault(life, state, fail)
        elif topic == _ACTION:
            # Settlement API 2: the game's step after it says what may follow.
            if life.must_void:
                raise fail(
                    f"{state['action']} after {life.faults} faulty throws: its rules void the round"
                )
            if life.status in (DECIDED, SETTLED, VOIDED):
                raise fail(f"an action while the round was {life.status}")
            life.log.append({"action": {k: state[k] for k in ("actor", "action", "args", "drawn")}})
            if state["drawn"]:
                life.drawn += 1
            if state["action"] == "fault":
                self.faults += 1
                life.faults += 1
            try:
                _, step = replay(life.game, life.views, life.log)  # type: ignore[arg-type]
            except InvalidCommandError as exc:
                raise fail(f"the game does not accept this action: {exc}") from None
            if step["betting"] != state["betting"] and state["action"] == "fault":
                done = "reopened" if state["betting"] else "kept locked"
                raise fail(
                    f"betting {done} after a faulty throw, but its rules say: "
                    f"{_Policy(reopens_betting=step['betting']).describe()}"
                )
            if step["betting"] != state["betting"]:
                raise fail("the action records betting open or closed against the game's step")
            life.status = BETTING if step["betting"] else CLOSED
            life.must_void = step["void"] is not None
            life.policy = _Policy(reopens_betting=step["betting"])
            life.after_fault = False
        elif topic == _SETTLED and state.get("step") is not None:
            if life.status != CLOSED or life.must_void:
                raise fail(f"a step's settlement while the round was {life.status}")
            life.settled |= {r["bet_id"] for r in state["results"]}
            if state["over"]:
                life.status = SETTLED
        elif topic == _SETTLED:
            self._expect(life, DECIDED, "a settlement", fail)
            life.status = SETTLED
        elif topic == _CORRECTED:
            self._expect(life, SETTLED, "a correction", fail)
        elif topic == _VOIDED:
            self._voided(life, state, fail)
            life.status = VOIDED

    def _fault(self, life: _Life, state: dict[str, Any], fail: Any) -> None:
        life.faults += 1
        self.faults += 1
        if state.get("faults") != life.faults:
            raise fail(f"faulty throw {life.faults} is recorded as number {state.get('faults')}")
        life.after_fault = True
        # The fault policy is the game's: its step after this fault says.
        bets = {b: {"account_id": a, "bet": {}, "stake": s} for b, (a, s) in life.bets.items()}
        try:
            _, step = replay(life.game, bets, life.log)  # type: ignore[arg-type]
        except InvalidCommandError as exc:
            raise fail(f"the game does not accept this faulty throw: {exc}") from None
        life.policy = _Policy(reopens_betting=step["betting"])
        life.must_void = step["void"] is not None

    def _voided(self, life: _Life, state: dict[str, Any], fail: Any) -> None:
        if life.status in (SETTLED, VOIDED):
            raise fail(f"voided when already {life.status}")
        if state.get("operator") is None:
            if not life.must_void:
                raise fail(
                    f"voided without an operator's signature after {life.faults} faulty "
                    f"throws, and its rules do not void it ({life.policy.describe()})"
                )
        elif life.status == DECIDED:
            raise fail("an operator voided the round after its outcome was recorded")
        elif life.settled:
            raise fail("an operator voided the round after some of its bets were settled")
        elif life.drawn:
            raise fail(
                f"an operator voided the round after it drew its outcome ({life.drawn} draws: "
                "every dealt card is part of it); only the game's own void (a fault, a "
                "device-reported misdeal) may end it then"
            )
        returned = sorted(
            (r["bet_id"], r["account_id"], r["stake"], r["returned"]) for r in state["returns"]
        )
        standing = sorted((b, a, s, s) for b, (a, s) in life.bets.items() if b not in life.settled)
        if returned != standing:
            raise fail("the void does not return every standing stake in full")

    @staticmethod
    def _expect(life: _Life, status: str, what: str, fail: Any) -> None:
        if life.status != status:
            raise fail(f"{what} while the round was {life.status}")
