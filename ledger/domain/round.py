"""A round at a table: bets, the outcome, and its settlement or void.

Game-independent: the variant (a plugin) validates bets and decides each
bet's return from the recorded facts; the round keeps the money straight.
Every money movement carries its balanced postings: stakes move from the
wallet to the round's in-play account, and at settlement from in-play to
the wallet (returns) or the house (losses), the house paying any winnings.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypedDict
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from ledger.domain.copying import PlainCopy
from ledger.domain.money import Posting, check_amount, check_balanced, in_play, posting, wallet
from ledger.errors import InvalidCommandError

BETTING = "betting"  # open for bets
CLOSED = "closed"  # betting closed, awaiting the outcome
DECIDED = "decided"  # outcome recorded, awaiting settlement
SETTLED = "settled"
VOIDED = "voided"


class Limits(TypedDict):
    min_bet: int
    max_bet: int
    max_round: int  # one player's total stake in one round


class BetRecord(TypedDict):
    account_id: str
    bet: dict[str, Any]
    stake: int


class BetResult(TypedDict):
    bet_id: str
    account_id: str
    stake: int
    returned: int  # paid back to the wallet: 0 (lost), the stake (push), stake + win


class LogEntry(TypedDict, total=False):
    """One step of a round's life as recorded: the settlement-API-1 event shape
    (close_betting, outcome, fault), or an action as the game saw it."""

    close_betting: bool
    outcome: dict[str, Any]
    fault: str
    action: dict[str, Any]  # a RecordedAction: actor, action, args, drawn


class OperatorSignature(TypedDict):
    """An operator's own signature over the fact (see ledger.crypto.actor)."""

    key_id: str
    signature: str


def operator_fact(action: str, round_id: UUID | str, reason: str) -> dict[str, str]:
    """What an operator signs to void or resume a round."""
    return {"action": action, "round": str(round_id), "reason": reason}


def throw_fact(round_id: UUID | str, throw: int, outcome: dict[str, Any]) -> dict[str, Any]:
    """What a dealer device signs when it reports a throw."""
    return {"action": "throw", "round": str(round_id), "throw": throw, "outcome": outcome}


def fault_fact(round_id: UUID | str, throw: int, reason: str) -> dict[str, Any]:
    """What a dealer device signs when it reports a faulty throw."""
    return {"action": "fault", "round": str(round_id), "throw": throw, "reason": reason}


def action_fact(
    round_id: UUID | str, step: int, actor: str, action: str, args: dict[str, Any], drawn: list[int]
) -> dict[str, Any]:
    """What a dealer device signs when it reports an action (dice or cards it
    read, a fault) as the round's action number `step`."""
    return {
        "action": "act",
        "round": str(round_id),
        "step": step,
        "actor": actor,
        "move": action,
        "args": args,
        "drawn": drawn,
    }


def correction_fact(
    round_id: UUID | str,
    wrong: dict[str, Any],
    right: dict[str, Any],
    reason: str,
    step: int | None = None,
) -> dict[str, Any]:
    """What an operator signs to correct a settled round's outcome, or (settlement
    API 2) what action number `step` drew: `wrong` and `right` are {kind: drawn}."""
    fact = {
        "action": "correct",
        "round": str(round_id),
        "reason": reason,
        "wrong": wrong,
        "right": right,
    }
    return fact if step is None else {**fact, "step": step}


def check_limits(limits: Limits) -> Limits:
    for name in ("min_bet", "max_bet", "max_round"):
        check_amount(limits.get(name), f"limit {name}")
    if not limits["min_bet"] <= limits["max_bet"] <= limits["max_round"]:
        raise InvalidCommandError("limits must satisfy min_bet <= max_bet <= max_round")
    return {k: limits[k] for k in ("min_bet", "max_bet", "max_round")}  # type: ignore[return-value]


class Round(PlainCopy, Aggregate):
    class Opened(Aggregate.Created):
        """`variant` is the game id; `variant_version` the plugin distribution's
        version and `code_hash` its code, both for information: a round pins the
        game's rules (`rules_hash`) and `settlement_api`. `dice_seed` (its stored
        name, kept) is the committed RNG seed its randomness comes from, dice
        or cards (None: a physical table); the round holds it as `seed_id`."""

        class_version: ClassVar[int] = 2
        table_id: UUID
        variant: str
        variant_version: str
        rules_hash: str
        currency: str
        limits: Limits
        house_account: UUID
        dealer: str
        dice_seed: str | None
        settlement_api: int
        code_hash: str

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            # Release 0.2 and before: settle(outcome, bets), code not recorded.
            state["settlement_api"] = 1
            state["code_hash"] = ""

    class BetPlaced(Aggregate.Event):
        """A bet, and the request that placed it: `request_id` and `fingerprint`
        (the hex SHA-256 of the request's canonical arguments) are its request's
        record, so a retry is answered from this signed event (version 2; a
        version 1 bet's request has a `Request.Completed` of its own)."""

        class_version: ClassVar[int] = 2
        bet_id: str
        account_id: str
        bet: dict[str, Any]
        stake: int
        request_id: str
        fingerprint: str | None
        postings: list[Posting]

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["fingerprint"] = None  # its request was recorded on its own

    class BetWithdrawn(Aggregate.Event):
        class_version: ClassVar[int] = 1
        bet_id: str
        account_id: str
        stake: int
        request_id: str
        postings: list[Posting]

    class BettingClosed(Aggregate.Event):
        class_version: ClassVar[int] = 1

    class OutcomeRecorded(Aggregate.Event):
        class_version: ClassVar[int] = 1
        outcome: dict[str, Any]
        source: dict[str, Any]

    class FaultRecorded(Aggregate.Event):
        """A faulty throw (cocked, stacked, not flat, too few bounces): recorded,
        never settled."""

        class_version: ClassVar[int] = 1
        reason: str
        source: dict[str, Any]
        faults: int  # faulty throws in this round so far, this one included

    class BettingReopened(Aggregate.Event):
        class_version: ClassVar[int] = 1
        reason: str

    class Corrected(Aggregate.Event):
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

    class Resumed(Aggregate.Event):
        class_version: ClassVar[int] = 1
        reason: str
        operator: OperatorSignature

    class Voided(Aggregate.Event):
        class_version: ClassVar[int] = 1
        reason: str
        operator: OperatorSignature | None
        returns: list[BetResult]
        postings: list[Posting]

    class ActionRecorded(Aggregate.Event):
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

    class Settled(Aggregate.Event):
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
        variant: str,
        variant_version: str,
        rules_hash: str,
        currency: str,
        limits: Limits,
        house_account: UUID,
        dealer: str,
        dice_seed: str | None = None,
        settlement_api: int = 1,
        code_hash: str = "",
    ) -> None:
        self.table_id = table_id
        self.settlement_api = settlement_api
        self.code_hash = code_hash
        # What happened, in order, as the game replays it (see ledger.games.replay).
        self.log: list[LogEntry] = []
        self.seed_id = dice_seed  # the committed seed the RNG draws from (None: physical)
        # Dice draws and faulty draws so far: the RNG counter of the next dice draw
        # (cards are dealt by their position in the round's deck instead).
        self.draws = 0
        self.variant = variant
        self.variant_version = variant_version
        self.rules_hash = rules_hash
        self.currency = currency
        self.limits = limits
        self.house_account = house_account
        self.dealer = dealer
        self.status = BETTING
        self.bets: dict[str, BetRecord] = {}
        self.staked: dict[str, int] = {}  # account -> its standing stakes here
        self.outcome: dict[str, Any] | None = None
        self.results: list[BetResult] = []
        self.faults = 0
        self.settlement_postings: list[Posting] = []
        self.actions = 0  # actions recorded as ActionRecorded: the next one's step number
        self.dealt: list[int] = []  # cards dealt in this round, in order
        self.settled_bets: set[str] = set()  # bets settled by a step (settlement API 2)
        self.settled_at: dict[str, int] = {}  # bet -> the action number that settled it
        self.drawn = 0  # actions that drew randomness (dice, cards): part of the outcome

    # The names before issue 20 (`ledger/http` and integrators' code read them).
    @property
    def dice_seed(self) -> str | None:
        """Alias of `seed_id`."""
        return self.seed_id

    @property
    def throws(self) -> int:
        """Alias of `draws`."""
        return self.draws

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
        if self.status != BETTING:
            raise InvalidCommandError(f"round {self.id} is not taking bets (it is {self.status})")
        if bet_id in self.bets:
            raise InvalidCommandError(f"bet {bet_id} is already placed in round {self.id}")
        amount = check_amount(stake, "stake")
        limits = self.limits
        if not limits["min_bet"] <= amount <= limits["max_bet"]:
            raise InvalidCommandError(
                f"stake {amount} is outside the table's limits "
                f"{limits['min_bet']}..{limits['max_bet']}"
            )
        if self.staked_by(account_id) + amount > limits["max_round"]:
            raise InvalidCommandError(
                f"stake {amount} would take this player's total in the round past "
                f"{limits['max_round']}"
            )
        return amount

    def place_bet(
        self,
        bet_id: str,
        account_id: str,
        bet: dict[str, Any],
        stake: Any,
        request_id: str,
        fingerprint: str,
    ) -> int:
        amount = self.check_bet(bet_id, account_id, stake)
        postings = [
            posting(wallet(account_id), -amount, self.currency),
            posting(in_play(self.id), amount, self.currency),
        ]
        self._bet_placed(bet_id, account_id, bet, amount, request_id, fingerprint, postings)
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
    ) -> None:
        self.bets[bet_id] = {"account_id": account_id, "bet": bet, "stake": stake}
        self.staked[account_id] = self.staked.get(account_id, 0) + stake

    def withdraw_bet(self, bet_id: str, account_id: str, request_id: str) -> BetRecord:
        if self.status != BETTING:
            raise InvalidCommandError(f"round {self.id} is not taking bets (it is {self.status})")
        record = self.bets.get(bet_id)
        if record is None:
            raise InvalidCommandError(f"no bet {bet_id} in round {self.id}")
        if record["account_id"] != account_id:
            raise InvalidCommandError(f"bet {bet_id} is not account {account_id}'s to withdraw")
        postings = [
            posting(in_play(self.id), -record["stake"], self.currency),
            posting(wallet(record["account_id"]), record["stake"], self.currency),
        ]
        self._bet_withdrawn(bet_id, record["account_id"], record["stake"], request_id, postings)
        return record

    @event(BetWithdrawn)
    def _bet_withdrawn(
        self, bet_id: str, account_id: str, stake: int, request_id: str, postings: list[Posting]
    ) -> None:
        record = self.bets.pop(bet_id)
        self.staked[account_id] -= record["stake"]

    # Who may state an outcome (docs/rules.md §1.4): an RNG round's dice come only
    # from its committed seed, in throw order; a physical round's only from a
    # dealer device's report (its signature is checked by the casino, which
    # holds the keyring: the domain knows no crypto).
    @property
    def is_rng(self) -> bool:
        return self.seed_id is not None

    def rng_source(self) -> dict[str, Any]:
        """The only source an RNG round's next throw may have."""
        return {"kind": "rng", "seed_id": self.seed_id, "counter": self.draws}

    def check_source(self, source: Any, what: str) -> None:
        if not isinstance(source, dict):
            raise InvalidCommandError(f"{what}'s source is an object")
        if self.is_rng:
            if what == "a faulty throw":
                raise InvalidCommandError(
                    f"round {self.id} is on an RNG table: an RNG throw is never faulty "
                    "(if the RNG malfunctioned, void the round)"
                )
            if source != self.rng_source():
                raise InvalidCommandError(
                    f"round {self.id} is on an RNG table: its dice come only from seed "
                    f"{self.seed_id}, throw {self.draws} (use throw_dice)"
                )
        elif source.get("kind") != "device":
            kind = source.get("kind")
            given = "a source with no kind" if kind is None else f"a {kind!r} source"
            raise InvalidCommandError(
                f"round {self.id} is on a physical table: {what} comes only from a "
                f"dealer device's signed report (a source of kind 'device'), not from {given}"
            )

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
        if self.status in (SETTLED, VOIDED, DECIDED):
            raise InvalidCommandError(f"round {self.id} takes no action now (it is {self.status})")
        cards = action["drawn"] if source.get("draw") == "cards" else []
        again = sorted(set(cards) & set(self.dealt)) or sorted(
            c for c in set(cards) if cards.count(c) > 1
        )
        if again:
            raise InvalidCommandError(
                f"round {self.id}: card {again[0]} was already dealt from this round's deck"
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
        elif drawn or action == "fault" or source.get("signed") == "throw":
            self.draws += 1  # dice, or a faulty draw: the next dice draw's counter moves on
        if action == "fault":
            self.faults += 1
        self.status = BETTING if betting else CLOSED

    def settle_step(self, returns: dict[str, int], over: bool) -> list[BetResult]:
        """Settle the bets the last action settled (any subset of those unsettled)."""
        if self.status in (SETTLED, VOIDED) or not self.actions:
            raise InvalidCommandError(f"round {self.id} has no action to settle on")
        again = set(returns) & self.settled_bets
        if again or not set(returns) <= set(self.bets):
            raise InvalidCommandError("a step settles only standing bets, each once")
        subset = {b: r for b, r in self.bets.items() if b in returns}
        results = self._results_for(returns, subset)
        postings: list[Posting] = []
        for result in results:
            postings += self._settlement_postings(self.bets[result["bet_id"]], result["returned"])
        left = set(self.bets) - self.settled_bets - set(returns)
        if over != (not left):
            raise InvalidCommandError("the round is over exactly when every bet is settled")
        self._settled(results, check_balanced(postings) if postings else [], self.actions - 1, over)
        return results

    # Money out.
    def settle_on_outcome(self, returns: dict[str, int]) -> list[BetResult]:
        """Settlement API 1's settlement: every bet at once, on the outcome recorded
        (its game's return for each: 0, the stake, or more). Only `ledger
        migrate` records one now, to end a round left decided under API 1."""
        if self.status == SETTLED:
            raise InvalidCommandError(f"round {self.id} is already settled")
        if self.settlement_api >= 2 or self.status != DECIDED:
            raise InvalidCommandError(
                f"round {self.id} has no outcome of settlement API 1 to settle on "
                f"(it is {self.status})"
            )
        results = self._results_for(returns)
        postings: list[Posting] = []
        for result in results:
            postings += self._settlement_postings(self.bets[result["bet_id"]], result["returned"])
        self._settled(results, check_balanced(postings), None, True)
        return results

    def _results_for(
        self, returns: dict[str, int], bets: dict[str, BetRecord] | None = None
    ) -> list[BetResult]:
        bets = self.bets if bets is None else bets
        if set(returns) != set(bets):
            raise InvalidCommandError("a settlement must give a return for every bet, once")
        results: list[BetResult] = []
        for bet_id, record in bets.items():
            returned = returns[bet_id]
            if isinstance(returned, bool) or not isinstance(returned, int) or returned < 0:
                raise InvalidCommandError(f"return for bet {bet_id} must be an int >= 0")
            results.append(
                {
                    "bet_id": bet_id,
                    "account_id": record["account_id"],
                    "stake": record["stake"],
                    "returned": returned,
                }
            )
        return results

    def _settlement_postings(self, record: BetRecord, returned: int) -> list[Posting]:
        stake, currency = record["stake"], self.currency
        legs = [posting(in_play(self.id), -stake, currency)]
        if returned:
            legs.append(posting(wallet(record["account_id"]), returned, currency))
        if stake != returned:  # the house keeps a loss or pays a win
            legs.append(posting(wallet(self.house_account), stake - returned, currency))
        return legs

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
        if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < len(found):
            raise InvalidCommandError(f"round {self.id} has no action number {step!r}")
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
        if self.is_rng:
            raise InvalidCommandError(
                f"round {self.id} is on an RNG table: an RNG result is computed, never "
                "corrected (void the round if the RNG malfunctioned)"
            )
        if self.status != SETTLED:
            raise InvalidCommandError(f"only a settled round can be corrected ({self.status})")
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidCommandError("a correction needs a reason")
        self.action_entry(step)
        if right_outcome == wrong_outcome:
            raise InvalidCommandError("the corrected draw is the one already recorded")
        reversed_results = [r for r in self.results if self.settled_at.get(r["bet_id"], -1) >= step]
        if {r["bet_id"] for r in reversed_results} != set(returns):
            raise InvalidCommandError(
                "the corrected draw changes which bets are settled from that action on: "
                "void the round instead"
            )
        results = self._results_for(
            {b: returned for b, (_, returned) in returns.items()},
            {b: r for b, r in self.bets.items() if b in returns},
        )
        postings: list[Posting] = []
        for result in reversed_results:
            postings += [
                {**leg, "amount": -leg["amount"]}
                for leg in self._settlement_postings(
                    self.bets[result["bet_id"]], result["returned"]
                )
            ]
        for result in results:
            postings += self._settlement_postings(self.bets[result["bet_id"]], result["returned"])
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
        once a valid outcome is recorded, in part or whole (a settled bet, a
        throw, the first card dealt): the house may not void a round it lost, nor
        choose deals by voiding the ones it does not like (RULES §1.4). The
        game's own void (a fault policy, a device-reported misdeal) has
        `operator` None."""
        if self.status in (SETTLED, VOIDED):
            raise InvalidCommandError(f"round {self.id} is already {self.status}")
        if self.status == DECIDED:
            raise InvalidCommandError(
                f"round {self.id} has a recorded outcome: it can only be settled, not voided"
            )
        if operator is not None and self.drawn:
            raise InvalidCommandError(
                f"round {self.id} has drawn its outcome ({self.drawn} draws: every dealt card "
                "is part of it): an operator may not void it; it is played to its end "
                "(resume it if interrupted; a physical table's misdeal is its dealer "
                "device's signed fault report)"
            )
        if operator is not None and self.settled_bets:
            raise InvalidCommandError(
                f"round {self.id} has settled bets: an operator may not void it (the house "
                "may not void a round it is losing)"
            )
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidCommandError("a void needs a reason")
        returns: list[BetResult] = [
            {
                "bet_id": bet_id,
                "account_id": record["account_id"],
                "stake": record["stake"],
                "returned": record["stake"],
            }
            for bet_id, record in self.bets.items()
            if bet_id not in self.settled_bets  # a step already settled it
        ]
        postings: list[Posting] = []
        for result in returns:
            postings += [
                posting(in_play(self.id), -result["stake"], self.currency),
                posting(wallet(result["account_id"]), result["stake"], self.currency),
            ]
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
        if self.status in (SETTLED, VOIDED):
            raise InvalidCommandError(f"round {self.id} is already {self.status}")
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidCommandError("resuming a round needs a reason")
        self._resumed(reason, operator)

    @event(Resumed)
    def _resumed(self, reason: str, operator: OperatorSignature) -> None:
        pass

    @property
    def is_open(self) -> bool:
        return self.status not in (SETTLED, VOIDED)
