"""A round at a table: bets, the outcome, and its settlement or void.

Game-independent: the game (a plugin) validates bets and decides each bet's
return from the recorded facts; the round keeps the money straight, every
movement with its balanced postings (`round_records`), and refuses what no
game may allow (`round_rules`; who may state an outcome: `round_sources`).
"""

from __future__ import annotations

from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from ledger.domain.aliases import RoundAliases
from ledger.domain.copying import PlainCopy
from ledger.domain.money import Posting, check_amount, check_balanced
from ledger.domain.names import PersonalValue
from ledger.domain.round_records import (
    BETTING,
    CLOSED,
    DECIDED,
    SETTLED,
    VOIDED,
    BetRecord,
    BetResult,
    Limits,
    LogEntry,
    OperatorSignature,
    bet_results,
    return_legs,
    settlement_legs,
    stake_legs,
    stakes_returned,
)
from ledger.domain.round_rules import (
    check_action_number,
    check_corrected_step,
    check_correction,
    check_fresh_cards,
    check_outcome_to_settle,
    check_resume,
    check_stake,
    check_step_returns,
    check_takes_actions,
    check_taking_bets,
    check_void,
)
from ledger.domain.round_sources import check_source, rng_source
from ledger.domain.stored_names import ROUND_OPENED, SIGNED_THROW, is_fault, upcast
from ledger.errors import InvalidCommandError


class Round(RoundAliases, PlainCopy, Aggregate):
    class Event(Aggregate.Event):  # declared: the events below are used as written, not rebuilt
        pass

    class Opened(Aggregate.Created, Event):
        """`game` is the game's id; `game_version` the plugin distribution's
        version and `code_hash` its code, both for information: a round pins the
        game's rules (`rules_hash`) and `settlement_api`. `seed_id` is the
        committed RNG seed its draws come from, dice or cards (None: a physical
        table). Versions 1 and 2 stored three of them under older names
        (`ledger.domain.stored_names`), upcast as they are read."""

        class_version: ClassVar[int] = 3
        table_id: UUID
        game: str
        game_version: str
        rules_hash: str
        currency: str
        limits: Limits
        house_account: UUID
        dealer: PersonalValue
        seed_id: str | None
        settlement_api: int
        code_hash: str

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            # Release 0.2 and before: settle(outcome, bets), code not recorded.
            state["settlement_api"] = 1
            state["code_hash"] = ""

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            upcast(ROUND_OPENED, 2, state)

    class BetPlaced(Event):
        """A bet, and the request that placed it: `request_id` and `fingerprint`
        (the hex SHA-256 of the request's canonical arguments) are its request's
        record, so a retry is answered from this signed event (version 2; a
        version 1 bet's request has a `Request.Completed` of its own); `asked_by`
        who asked (`ledger.domain.asked_by`; None: the node's own, or before v3)."""

        class_version: ClassVar[int] = 3
        bet_id: str
        account_id: str
        bet: dict[str, Any]
        stake: int
        request_id: str
        fingerprint: str | None
        postings: list[Posting]
        asked_by: dict[str, str] | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["fingerprint"] = None  # its request was recorded on its own

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            state["asked_by"] = None

    class BetWithdrawn(Event):
        class_version: ClassVar[int] = 1
        bet_id: str
        account_id: str
        stake: int
        request_id: str
        postings: list[Posting]

    class BettingClosed(Event):
        class_version: ClassVar[int] = 1

    class OutcomeRecorded(Event):
        class_version: ClassVar[int] = 1
        outcome: dict[str, Any]
        source: dict[str, Any]

    class FaultRecorded(Event):
        """A faulty draw of dice (cocked, stacked, not flat, too few bounces),
        settlement API 1: recorded, never settled."""

        class_version: ClassVar[int] = 1
        reason: str
        source: dict[str, Any]
        faults: int  # faulty draws in this round so far, this one included

    class BettingReopened(Event):
        class_version: ClassVar[int] = 1
        reason: str

    class Corrected(Event):
        """A settled result recorded wrongly, corrected by an operator: the first
        settlement is reversed with compensating postings and the round is
        settled again on the right outcome. Nothing is edited."""

        class_version: ClassVar[int] = 2
        wrong_outcome: dict[str, Any]
        right_outcome: dict[str, Any]
        reason: str
        operator: OperatorSignature
        reversed_results: list[BetResult]
        results: list[BetResult]
        postings: list[Posting]
        # Settlement API 2: the action whose draw is corrected ({kind: drawn} in
        # wrong/right_outcome) and, per bet re-settled, the action settling it now.
        # Every settlement from that action on is reversed and re-derived.
        step: int | None
        settled_at: dict[str, int]

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["step"] = None
            state["settled_at"] = {}

    class Resumed(Event):
        class_version: ClassVar[int] = 1
        reason: str
        operator: OperatorSignature

    class Voided(Event):
        class_version: ClassVar[int] = 1
        reason: str
        operator: OperatorSignature | None
        returns: list[BetResult]
        postings: list[Posting]

    class ActionRecorded(Event):
        """Action number `step` of the round, as the game offered it: who took it,
        its arguments, the randomness it drew (dice faces or cards) and the
        source attesting it (the RNG with its seed and counter or deck
        positions, a dealer device's signed report, or the node's own command),
        with the game's state and flags after it and whether betting is open."""

        class_version: ClassVar[int] = 1
        step: int
        actor: str
        action: str
        args: dict[str, Any]
        drawn: list[int]
        source: dict[str, Any]
        state: dict[str, Any]
        flags: list[str]
        betting: bool

    class Settled(Event):
        """Bets settled with their balanced postings. Settlement API 1: every
        bet at once (`step` None). API 2: the bets action number `step`
        settled (any subset); `over` when no bet is left unsettled."""

        class_version: ClassVar[int] = 2
        results: list[BetResult]
        postings: list[Posting]
        step: int | None
        over: bool

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["step"] = None
            state["over"] = True

    @event(Opened)
    def __init__(
        self,
        table_id: UUID,
        game: str,
        game_version: str,
        rules_hash: str,
        currency: str,
        limits: Limits,
        house_account: UUID,
        dealer: PersonalValue,
        seed_id: str | None = None,
        settlement_api: int = 1,
        code_hash: str = "",
    ) -> None:
        self.table_id = table_id
        self.settlement_api = settlement_api
        self.code_hash = code_hash
        # What happened, in order, as the game replays it (see ledger.games.replay).
        self.log: list[LogEntry] = []
        self.seed_id = seed_id  # the committed seed the RNG draws from (None: physical)
        # Dice draws and faulty draws so far: the RNG counter of the next dice draw
        # (cards are dealt by their position in the round's deck instead).
        self.draws = 0
        self.game = game
        self.game_version = game_version
        self.rules_hash = rules_hash
        self.currency = currency
        self.limits = limits
        self.house_account = house_account
        self.dealer = dealer
        self.status = BETTING
        self.bets: dict[str, BetRecord] = {}
        self.staked: dict[str, int] = {}  # account -> its standing stakes here
        self.bets_asked_by: dict[str, dict[str, str]] = {}  # bet -> the session that asked
        self.outcome: dict[str, Any] | None = None
        self.results: list[BetResult] = []
        self.faults = 0
        self.settlement_postings: list[Posting] = []
        self.actions = 0  # actions recorded as ActionRecorded: the next one's step number
        self.dealt: list[int] = []  # cards dealt in this round, in order
        self.settled_bets: set[str] = set()  # bets settled by a step (settlement API 2)
        self.settled_at: dict[str, int] = {}  # bet -> the action number that settled it
        self.drawn = 0  # actions that drew randomness (dice, cards): part of the outcome

    # Bets.
    @property
    def taking_bets(self) -> bool:
        """Open for bets: as the game's last step said (settlement API 2 records it
        with every action), or betting not yet closed (API 1)."""
        return self.status == BETTING

    def staked_by(self, account_id: str) -> int:
        """This player's standing stakes in the round (a running total: O(1))."""
        return self.staked.get(account_id, 0)

    def check_bet(self, bet_id: str, account_id: str, stake: Any) -> int:
        """The stake, if the round takes this bet now; raise (nothing changed) if not."""
        check_taking_bets(self.id, self.status)
        if bet_id in self.bets:
            raise InvalidCommandError(
                f"bet {bet_id} is already placed in round {self.id}", code="invalid_bet"
            )
        amount = check_amount(stake, "stake", param="stake")
        check_stake(self.limits, self.staked_by(account_id), amount)
        return amount

    def place_bet(
        self,
        bet_id: str,
        account_id: str,
        bet: dict[str, Any],
        stake: Any,
        request_id: str,
        fingerprint: str,
        asked_by: dict[str, str] | None = None,
    ) -> int:
        amount = self.check_bet(bet_id, account_id, stake)
        postings = stake_legs(self.id, self.currency, account_id, amount)
        self._bet_placed(
            bet_id, account_id, bet, amount, request_id, fingerprint, postings, asked_by
        )
        return amount

    @event(BetPlaced)
    def _bet_placed(
        self,
        bet_id: str,
        account_id: str,
        bet: dict[str, Any],
        stake: int,
        request_id: str,
        fingerprint: str | None,
        postings: list[Posting],
        asked_by: dict[str, str] | None,
    ) -> None:
        self.bets[bet_id] = {"account_id": account_id, "bet": bet, "stake": stake}
        self.staked[account_id] = self.staked.get(account_id, 0) + stake
        if asked_by is not None:  # who asked for each bet, for the round's view
            self.bets_asked_by[bet_id] = asked_by

    def withdraw_bet(self, bet_id: str, account_id: str, request_id: str) -> BetRecord:
        check_taking_bets(self.id, self.status)
        record = self.bets.get(bet_id)
        if record is None:
            raise InvalidCommandError(
                f"no bet {bet_id} in round {self.id}", code="no_such_bet", param="bet_id"
            )
        if record["account_id"] != account_id:
            raise InvalidCommandError(
                f"bet {bet_id} is not account {account_id}'s to withdraw",
                code="bet_of_another_account",
                param="account_id",
            )
        postings = return_legs(self.id, self.currency, record["account_id"], record["stake"])
        self._bet_withdrawn(bet_id, record["account_id"], record["stake"], request_id, postings)
        return record

    @event(BetWithdrawn)
    def _bet_withdrawn(
        self, bet_id: str, account_id: str, stake: int, request_id: str, postings: list[Posting]
    ) -> None:
        record = self.bets.pop(bet_id)
        self.staked[account_id] -= record["stake"]

    # Who may state an outcome (docs/rules.md §1.4; ledger.domain.round_sources).
    @property
    def is_rng(self) -> bool:
        return self.seed_id is not None

    def rng_source(self) -> dict[str, Any]:
        """The only source an RNG round's next draw of dice may have."""
        return rng_source(self.seed_id, self.draws)

    def check_source(self, source: Any, what: str) -> None:
        check_source(self.id, self.seed_id, self.draws, source, what)

    # Settlement API 1's events (release 0.2 and before), read and never written
    # again: each applies what it recorded (ledger migrate settles a round left
    # decided under it with `settle_on_outcome`).
    @event(BettingClosed)
    def _betting_closed(self) -> None:
        self.log.append({"close_betting": True})
        self.status = CLOSED

    @event(OutcomeRecorded)
    def _outcome_recorded(self, outcome: dict[str, Any], source: dict[str, Any]) -> None:
        self.draws += 1
        self.log.append({"outcome": outcome})
        self.outcome = outcome
        self.status = DECIDED

    @event(FaultRecorded)
    def _fault_recorded(self, reason: str, source: dict[str, Any], faults: int) -> None:
        self.draws += 1
        self.log.append({"fault": reason})
        self.faults = faults

    @event(BettingReopened)
    def _betting_reopened(self, reason: str) -> None:
        self.status = BETTING

    # Settlement API 2: actions as the game offers them.
    def record_action(
        self, action: dict[str, Any], source: dict[str, Any], step: dict[str, Any]
    ) -> int:
        """Record an action the game offered (the caller checked it is legal and
        its source attested); `step` is the game's step after it. Returns its step
        number. A card already dealt in this round is refused."""
        check_takes_actions(self.id, self.status)
        check_fresh_cards(
            self.id, action["drawn"] if source.get("draw") == "cards" else [], self.dealt
        )
        number = self.actions
        self._action_recorded(
            number,
            action["actor"],
            action["action"],
            action["args"],
            action["drawn"],
            source,
            step["state"],
            step["flags"],
            step["betting"],
        )
        return number

    @event(ActionRecorded)
    def _action_recorded(
        self,
        step: int,
        actor: str,
        action: str,
        args: dict[str, Any],
        drawn: list[int],
        source: dict[str, Any],
        state: dict[str, Any],
        flags: list[str],
        betting: bool,
    ) -> None:
        self.log.append(
            {"action": {"actor": actor, "action": action, "args": args, "drawn": drawn}}
        )
        self.actions = step + 1
        if drawn:
            self.drawn += 1
        if source.get("draw") == "cards":
            self.dealt.extend(drawn)
        elif drawn or is_fault(action, source) or source.get("signed") == SIGNED_THROW:
            self.draws += 1  # dice, or a faulty draw: the next dice draw's counter moves on
        self.faults += is_fault(action, source)
        self.status = BETTING if betting else CLOSED

    def settle_step(self, returns: dict[str, int], over: bool) -> list[BetResult]:
        """Settle the bets the last action settled (any subset of those unsettled)."""
        check_step_returns(
            self.id, self.status, self.actions, returns, self.settled_bets, self.bets
        )
        subset = {b: r for b, r in self.bets.items() if b in returns}
        results = self._results_for(returns, subset)
        postings = self._legs(results)
        left = set(self.bets) - self.settled_bets - set(returns)
        if over != (not left):
            raise InvalidCommandError(
                "the round is over exactly when every bet is settled", code="invalid_settlement"
            )
        self._settled(results, check_balanced(postings) if postings else [], self.actions - 1, over)
        return results

    # Money out.
    def settle_on_outcome(self, returns: dict[str, int]) -> list[BetResult]:
        """Settlement API 1's settlement: every bet at once, on the outcome recorded
        (its game's return for each: 0, the stake, or more). Only `ledger
        migrate` records one now, to end a round left decided under API 1."""
        check_outcome_to_settle(self.id, self.status, self.settlement_api)
        results = self._results_for(returns)
        postings = self._legs(results)
        self._settled(results, check_balanced(postings), None, True)
        return results

    def _results_for(
        self, returns: dict[str, int], bets: dict[str, BetRecord] | None = None
    ) -> list[BetResult]:
        return bet_results(returns, self.bets if bets is None else bets)

    def _settlement_postings(self, record: BetRecord, returned: int) -> list[Posting]:
        return settlement_legs(self.id, self.currency, self.house_account, record, returned)

    def _legs(self, results: list[BetResult]) -> list[Posting]:
        """Each result's settlement postings, in order."""
        bets = self.bets
        return [
            leg
            for r in results
            for leg in self._settlement_postings(bets[r["bet_id"]], r["returned"])
        ]

    @event(Settled)
    def _settled(
        self, results: list[BetResult], postings: list[Posting], step: int | None, over: bool
    ) -> None:
        if step is None:
            self.results = results
            self.settlement_postings = postings
        else:
            self.results = [*self.results, *results]
            self.settlement_postings = [*self.settlement_postings, *postings]
            self.settled_bets |= {r["bet_id"] for r in results}
            self.settled_at.update({r["bet_id"]: step for r in results})
        if over:
            self.status = SETTLED

    def action_entry(self, step: int) -> int:
        """Where action number `step` is in the log."""
        found = [i for i, entry in enumerate(self.log) if "action" in entry]
        check_action_number(self.id, step, len(found))
        return found[step]

    def correct_step(
        self,
        step: int,
        wrong_outcome: dict[str, Any],
        right_outcome: dict[str, Any],
        returns: dict[str, tuple[int, int]],
        reason: str,
        operator: OperatorSignature,
    ) -> list[BetResult]:
        """Settlement API 2, a physical table: action number `step` was
        `right_outcome` ({kind: drawn}, or its arguments), not what its device
        reported. Every settlement from that action on is
        reversed with compensating postings and the bets re-settled as the game
        re-derives them (`returns`: bet -> (action number settling it, return))."""
        check_correction(self.id, self.is_rng, self.status, reason)
        self.action_entry(step)
        reversed_results = [r for r in self.results if self.settled_at.get(r["bet_id"], -1) >= step]
        reversed_bets = {r["bet_id"] for r in reversed_results}
        check_corrected_step(wrong_outcome, right_outcome, reversed_bets, set(returns))
        results = self._results_for(
            {b: returned for b, (_, returned) in returns.items()},
            {b: r for b, r in self.bets.items() if b in returns},
        )
        # The settlements in force reversed by compensating legs, then replaced.
        reversing = [{**leg, "amount": -leg["amount"]} for leg in self._legs(reversed_results)]
        postings: list[Posting] = [*reversing, *self._legs(results)]  # type: ignore[list-item]
        self._corrected(
            wrong_outcome,
            right_outcome,
            reason,
            operator,
            reversed_results,
            results,
            check_balanced(postings),
            step,
            {b: at for b, (at, _) in returns.items()},
        )
        return results

    @event(Corrected)
    def _corrected(
        self,
        wrong_outcome: dict[str, Any],
        right_outcome: dict[str, Any],
        reason: str,
        operator: OperatorSignature,
        reversed_results: list[BetResult],
        results: list[BetResult],
        postings: list[Posting],
        step: int | None,
        settled_at: dict[str, int],
    ) -> None:
        if step is not None:  # an action's draw: its settlements from then on replaced
            at = self.action_entry(step)
            done = self.log[at]["action"]
            if done["drawn"]:  # a draw: {kind: drawn}
                (wrong,) = wrong_outcome.values()
                (right,) = right_outcome.values()
                self.log[at] = {"action": {**done, "drawn": list(right)}}
                if "cards" in right_outcome:
                    self.dealt = [right[wrong.index(c)] if c in wrong else c for c in self.dealt]
            else:  # a move that draws nothing: its arguments
                self.log[at] = {"action": {**done, "args": dict(right_outcome)}}
            again = {r["bet_id"] for r in reversed_results}
            self.results = [*(r for r in self.results if r["bet_id"] not in again), *results]
            self.settled_at.update(settled_at)
            return
        self.outcome = right_outcome
        self.log[-1] = {"outcome": right_outcome}
        self.results = results
        # The first legs reverse the settlement in force; the rest replace it.
        self.settlement_postings = postings[len(self.settlement_postings) :]

    def void(self, reason: str, operator: OperatorSignature | None) -> list[BetResult]:
        """Void the round: every stake goes back to its wallet. Never by an operator
        once a valid outcome is recorded, in part or whole (a settled bet, dice
        drawn, the first card dealt): the house may not void a round it lost, nor
        choose deals by voiding the ones it does not like (RULES §1.4). The
        game's own void (a fault policy, a device-reported misdeal) has
        `operator` None."""
        by_operator = operator is not None
        check_void(self.id, self.status, self.drawn, self.settled_bets, by_operator, reason)
        unsettled = {b: r for b, r in self.bets.items() if b not in self.settled_bets}
        returns, postings = stakes_returned(self.id, self.currency, unsettled)
        self._voided(reason, operator, returns, check_balanced(postings) if postings else [])
        return returns

    @event(Voided)
    def _voided(
        self,
        reason: str,
        operator: OperatorSignature | None,
        returns: list[BetResult],
        postings: list[Posting],
    ) -> None:
        self.results = returns
        self.status = VOIDED

    def resume(self, reason: str, operator: OperatorSignature) -> None:
        check_resume(self.id, self.status, reason)
        self._resumed(reason, operator)

    @event(Resumed)
    def _resumed(self, reason: str, operator: OperatorSignature) -> None:
        pass

    @property
    def is_open(self) -> bool:
        return self.status not in (SETTLED, VOIDED)
