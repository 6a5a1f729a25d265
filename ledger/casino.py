"""The casino's Python API: commands from outside, each idempotent by request id.

Every command loads what it touches, lets the aggregates decide (refusing bad
input before anything is recorded), and saves every aggregate it changed in
one atomic save together with the request's record. A concurrent writer makes
that save conflict; the command is then retried from fresh state, and a
retry of a request already done returns the first result and records nothing.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from uuid import UUID, uuid4

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError
from rfc8785 import CanonicalizationError

from ledger.crypto.actor import actor_signature, sign_fact, verify_fact
from ledger.crypto.canonical import canonical
from ledger.crypto.envelope import now_micros
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.signing import Signer
from ledger.crypto.validity import key_problem
from ledger.domain.account import HOUSE, PLAYER, Account
from ledger.domain.asked_by import by_problem
from ledger.domain.game_table import GameTable
from ledger.domain.money import check_currency
from ledger.domain.names import check_name
from ledger.domain.request import Request, request_uuid
from ledger.domain.round import (
    BETTING,
    SETTLED,
    BetResult,
    Limits,
    Round,
    action_fact,
    check_limits,
    correction_fact,
    fault_fact,
    operator_fact,
    throw_fact,
)
from ledger.errors import (
    ConflictError,
    InvalidCommandError,
    LedgerError,
    NotFoundError,
    RequestIdReusedError,
    VerificationError,
)
from ledger.games.api import DECK_SIZE, BetView, Draw, RecordedAction, Step
from ledger.games.replay import (
    CLOSE_BETTING,
    FAULT,
    actor_for,
    outcome_action,
    outcome_move,
    replay,
    settlements_from,
)
from ledger.games.step_cache import StepCache
from ledger.plugins.registry import LoadedGame
from ledger.rng.deck import shuffled_deck
from ledger.rng.server import RngServer
from ledger.store.application import LedgerApplication

A = TypeVar("A", bound=Aggregate)
Result = Any  # JSON-safe: it is stored with the request
MAX_REQUEST_ID = 200
# Picks a settlement-API-2 round's next action and its attested source.
Chooser = Callable[[LoadedGame, Round, Step, int], tuple[RecordedAction, dict[str, Any]]]


class Casino:
    """Accounts, tables and rounds on a sealed ledger."""

    def __init__(
        self,
        app: LedgerApplication,
        variants: Mapping[str, LoadedGame],
        *,
        max_attempts: int = 50,
    ) -> None:
        self.app = app
        self.variants = variants
        self.max_attempts = max_attempts
        # Each round's last replay, so a command continues it (see step_cache).
        self.steps = StepCache()

    # Plumbing.
    def _get(self, cls: type[A], aggregate_id: UUID | str, what: str) -> A:
        try:
            key = aggregate_id if isinstance(aggregate_id, UUID) else UUID(str(aggregate_id))
            found: Aggregate = self.app.repository.get(key)
        except (AggregateNotFoundError, ValueError):
            raise NotFoundError(f"unknown {what} {aggregate_id}") from None
        if not isinstance(found, cls):
            raise NotFoundError(f"unknown {what} {aggregate_id}")
        return found

    def account(self, account_id: UUID | str) -> Account:
        return self._get(Account, account_id, "account")

    def round(self, round_id: UUID | str) -> Round:
        return self._get(Round, round_id, "round")

    def table(self, table_id: UUID | str) -> GameTable:
        return self._get(GameTable, table_id, "table")

    def variant(self, variant_id: str) -> LoadedGame:
        try:
            return self.variants[variant_id]
        except KeyError:
            raise NotFoundError(f"unknown variant {variant_id!r}") from None

    def _run(
        self,
        command: str,
        request_id: str,
        args: dict[str, Any],
        body: Callable[[], tuple[Result, list[Aggregate]]],
        *,
        look_first: bool = False,
    ) -> Result:
        """Run `body` and save what it changed with the request's record, once.

        A request is not looked up before its first attempt (a read per command):
        its record is the first event of a stream named by the request id, so
        saving it conflicts if the request was done before, and the request is
        looked up then, as it is when the body refuses (the round may have moved
        on since the request was done). `look_first` looks it up before the body
        runs, for a body with effects outside the ledger (a new RNG seed)."""
        if not isinstance(request_id, str) or not 0 < len(request_id) <= MAX_REQUEST_ID:
            raise InvalidCommandError(f"a request id is 1..{MAX_REQUEST_ID} characters")
        try:
            fingerprint = hashlib.sha256(canonical({"command": command, "args": args})).hexdigest()
        except CanonicalizationError as exc:  # e.g. an int past 2**53, NaN, bytes
            raise InvalidCommandError(f"{command}: arguments are not plain JSON: {exc}") from None
        if look_first:
            done = self._done(request_id, command, fingerprint)
            if done is not None:
                return done.result
        for attempt in range(self.max_attempts):
            try:
                result, changed = body()
            except LedgerError:
                done = self._done(request_id, command, fingerprint)
                if done is not None:
                    return done.result
                raise
            record = Request(
                request_id=request_id, command=command, fingerprint=fingerprint, result=result
            )
            try:
                self.app.save(*changed, record)
            except IntegrityError:
                # This request was done already, or someone else wrote one of
                # these streams first: start again from what they wrote
                # (jittered, so racers spread out).
                done = self._done(request_id, command, fingerprint)
                if done is not None:
                    return done.result
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                continue
            return result
        raise ConflictError(f"{command}: still conflicting after {self.max_attempts} attempts")

    def _done(self, request_id: str, command: str, fingerprint: str) -> Request | None:
        try:
            found: Aggregate = self.app.repository.get(request_uuid(request_id))
        except AggregateNotFoundError:
            return None
        assert isinstance(found, Request)
        if found.fingerprint != fingerprint:
            raise RequestIdReusedError(
                f"request id {request_id!r} was already used for a different {found.command}"
            )
        return found

    # Accounts.
    def open_account(
        self, *, request_id: str, owner: str, currency: str, kind: str = PLAYER
    ) -> str:
        def body() -> tuple[Result, list[Aggregate]]:
            account = Account.open(kind, owner, currency)
            return str(account.id), [account]

        args = {"owner": owner, "currency": currency, "kind": kind}
        return str(self._run("open_account", request_id, args, body))

    def deposit(self, *, request_id: str, account_id: str, amount: int) -> int:
        def body() -> tuple[Result, list[Aggregate]]:
            account = self.account(account_id)
            account.deposit(amount, request_id)
            return account.balance, [account]

        args = {"account_id": str(account_id), "amount": amount}
        return int(self._run("deposit", request_id, args, body))

    def withdraw(self, *, request_id: str, account_id: str, amount: int) -> int:
        def body() -> tuple[Result, list[Aggregate]]:
            account = self.account(account_id)
            account.withdraw(amount, request_id)
            return account.balance, [account]

        args = {"account_id": str(account_id), "amount": amount}
        return int(self._run("withdraw", request_id, args, body))

    def close_account(self, *, request_id: str, account_id: str, reason: str) -> None:
        def body() -> tuple[Result, list[Aggregate]]:
            account = self.account(account_id)
            account.close(reason)
            return None, [account]

        self._run("close_account", request_id, {"account_id": str(account_id)}, body)

    # Tables and rounds.
    def open_table(
        self, *, request_id: str, name: str, variant: str, currency: str, limits: Limits
    ) -> str:
        def body() -> tuple[Result, list[Aggregate]]:
            self.variant(variant)
            code = check_currency(currency)  # one spelling for the table and its house
            house = Account.open(
                HOUSE, f"house of table {check_name(name, 'table name', limit=100)}", code
            )
            table = GameTable(
                name=name,
                variant=variant,
                currency=code,
                limits=check_limits(limits),
                house_account=house.id,
            )
            return str(table.id), [house, table]

        args = {"name": name, "variant": variant, "currency": currency, "limits": dict(limits)}
        return str(self._run("open_table", request_id, args, body))

    def open_round(self, *, request_id: str, table_id: str, dealer: str) -> str:
        def body() -> tuple[Result, list[Aggregate]]:
            table = self.table(table_id)
            variant = self.variant(table.variant)
            game_round = Round(
                table_id=table.id,
                variant=variant.id,
                variant_version=variant.version,
                rules_hash=variant.rules_hash,
                settlement_api=variant.settlement_api,
                code_hash=variant.code_hash,
                currency=table.currency,
                limits=table.limits,
                house_account=table.house_account,
                dealer=dealer,
                dice_seed=table.active_seed,
            )
            if table.active_seed is None:
                return str(game_round.id), [game_round]
            table.round_opened()
            return str(game_round.id), [game_round, table]

        args = {"table_id": str(table_id), "dealer": dealer}
        return str(self._run("open_round", request_id, args, body))

    def place_bet(
        self, *, request_id: str, round_id: str, account_id: str, bet: dict[str, Any], stake: int
    ) -> str:
        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            account = self.account(account_id)
            if account.kind != PLAYER:
                raise InvalidCommandError(f"account {account.id} is not a player's wallet")
            account.check_currency(game_round.currency)
            variant = self._variant_of(game_round)
            self._check_betting(variant, game_round, "place a bet")
            canonical_bet = variant.validate_bet(bet, dict(game_round.bets))
            bet_id = str(uuid4())
            amount = game_round.place_bet(bet_id, str(account.id), canonical_bet, stake, request_id)
            account.debit(amount, game_round.id, f"stake {bet_id}")
            return bet_id, [game_round, account]

        args = {
            "round_id": str(round_id),
            "account_id": str(account_id),
            "bet": bet,
            "stake": stake,
        }
        return str(self._run("place_bet", request_id, args, body))

    def withdraw_bet(self, *, request_id: str, round_id: str, account_id: str, bet_id: str) -> None:
        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            self._check_betting(self._variant_of(game_round), game_round, "withdraw a bet")
            account = self.account(account_id)
            record = game_round.withdraw_bet(bet_id, str(account.id), request_id)
            account.credit(record["stake"], game_round.id, f"withdrawn {bet_id}")
            return None, [game_round, account]

        args = {"round_id": str(round_id), "account_id": str(account_id), "bet_id": bet_id}
        self._run("withdraw_bet", request_id, args, body)

    def close_betting(self, *, request_id: str, round_id: str) -> None:
        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            if game_round.settlement_api >= 2:
                return None, self._play(game_round, self._wrapped(CLOSE_BETTING, None))[1]
            self._legal(self._variant_of(game_round), game_round, "close_betting")
            game_round.close_betting()
            return None, [game_round]

        self._run("close_betting", request_id, {"round_id": str(round_id)}, body)

    def record_outcome(
        self,
        *,
        request_id: str,
        round_id: str,
        outcome: dict[str, Any],
        source: dict[str, Any],
    ) -> None:
        """A physical table's outcome, as its dealer device reported it: `source`
        is the device's signed report (`ledger.devices.throw_report`) of this
        outcome as the round's next throw. An RNG round refuses it: its dice
        come only from `throw_dice`. A settlement-API-2 round records it as the
        game's next action (`Round.ActionRecorded`, the report kept as its
        source) and settles in the same save what that step settles."""

        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            if game_round.settlement_api >= 2:
                return None, self._play(game_round, self._reported(outcome, source))[1]
            variant = self._variant_of(game_round)
            checked = self._outcome(variant, game_round, outcome)
            game_round.check_awaiting_throw()
            self._check_source(
                game_round, source, throw_fact(game_round.id, game_round.throws, checked)
            )
            game_round.record_outcome(checked, source)
            return None, [game_round]

        args = {"round_id": str(round_id), "outcome": outcome, "source": source}
        self._run("record_outcome", request_id, args, body)

    # Provably fair dice (RNG tables).
    def commit_seed(self, *, request_id: str, table_id: str, rng: RngServer) -> str:
        """Commit the table to a new secret seed (its SHA-256, in a signed event)
        before any round throws from it."""

        def body() -> tuple[Result, list[Aggregate]]:
            table = self.table(table_id)
            table.check_no_seed_in_use()  # before the RNG makes a seed nobody will use
            seed_id, committed = rng.new_seed()
            table.commit_seed(seed_id, committed)
            return seed_id, [table]

        args = {"table_id": str(table_id)}
        return str(self._run("commit_seed", request_id, args, body, look_first=True))

    def retire_seed(self, *, request_id: str, table_id: str, rng: RngServer) -> str:
        """Reveal the table's seed, so anyone can recompute every throw made with it."""

        def body() -> tuple[Result, list[Aggregate]]:
            table = self.table(table_id)
            if table.active_seed is None:
                raise InvalidCommandError(f"table {table.name} has no seed in use")
            seed_id = table.active_seed
            table.reveal_seed(seed_id, rng.seed(seed_id).hex())
            return seed_id, [table]

        return str(self._run("retire_seed", request_id, {"table_id": str(table_id)}, body))

    def throw_dice(self, *, request_id: str, round_id: str, rng: RngServer) -> dict[str, Any]:
        """Throw from the round's committed seed and record the outcome; on a
        settlement-API-2 round, as the game's action, settling what it settles."""

        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            if game_round.dice_seed is None:
                raise InvalidCommandError(
                    f"round {game_round.id} has no RNG seed: a physical table"
                )
            variant = self._variant_of(game_round)
            step = self._step(variant, game_round)
            move = outcome_move(step)
            draw = move[2] if move is not None else None
            if draw is None or draw["kind"] != "dice":
                raise InvalidCommandError(
                    f"round {game_round.id}: the game draws no dice now ({self._offers(step)})"
                )
            if game_round.settlement_api >= 2:  # the throw settles what the game says
                assert move is not None
                played, changed = self._play(game_round, self._wrapped(move[1], rng))
                return {draw["kind"]: played["drawn"]}, changed
            counter = game_round.throws
            drawn = list(rng.throw(game_round.dice_seed, str(game_round.id), counter))
            outcome = self._outcome(variant, game_round, {draw["kind"]: drawn[: draw["count"]]})
            game_round.record_outcome(outcome, game_round.rng_source())
            return outcome, [game_round]

        return dict(self._run("throw_dice", request_id, {"round_id": str(round_id)}, body))

    def _check_source(
        self, game_round: Round, source: dict[str, Any], fact: dict[str, Any]
    ) -> None:
        """Who may state an outcome or a fault (RULES.md §1.4): on an RNG round
        nobody (throw_dice computes it); on a physical round only a dealer
        device, with its own `dealer-device` key, valid now. Anything else is
        refused before a thing is recorded."""
        if not isinstance(source, dict):
            raise InvalidCommandError("a throw's source is an object")
        if source.get("kind") == "rng":
            raise InvalidCommandError("RNG throws are made by throw_dice, not reported")
        # Refuses every source on an RNG round, and any but a device's elsewhere.
        game_round.check_source(
            source, "a faulty throw" if fact["action"] == "fault" else "an outcome"
        )
        self._check_device(source, fact)

    def record_fault(
        self, *, request_id: str, round_id: str, reason: str, source: dict[str, Any]
    ) -> dict[str, Any]:
        """A faulty throw at a physical table, as its dealer device reported it
        (`ledger.devices.fault_report`; an RNG throw is never faulty), then what
        the variant's fault policy says: throw again with bets locked, reopen
        betting, or void the round after too many (every stake returned), all
        in one save."""

        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            variant = self._variant_of(game_round)
            actor = self._legal(variant, game_round, FAULT)
            reason_args = variant.validate_args(actor, FAULT, {"reason": reason})
            if game_round.settlement_api >= 2:
                played, changed = self._play(game_round, self._fault_reported(reason_args, source))
                after = changed[0]  # the round, as the fault left it
                assert isinstance(after, Round)
                then = (
                    "voided"
                    if played["void"] is not None
                    else "betting reopened"
                    if after.status == BETTING
                    else "throw again"
                )
                return {"faults": after.faults, "then": then}, changed
            game_round.check_awaiting_throw("a throw")
            self._check_source(
                game_round, source, fault_fact(game_round.id, game_round.throws, reason)
            )
            faults = game_round.record_fault(reason_args["reason"], source)
            # What follows is the game's fault policy: its step says.
            step = self._step(variant, game_round)
            if step["void"] is not None:
                returns = game_round.void(step["void"], None)
                changed = [game_round, *self._pay(game_round, returns), *self._ended(game_round)]
                return {"faults": faults, "then": "voided"}, changed
            if step["betting"]:
                game_round.reopen_betting(f"faulty throw: {reason}")
                return {"faults": faults, "then": "betting reopened"}, [game_round]
            return {"faults": faults, "then": "throw again"}, [game_round]

        args = {"round_id": str(round_id), "reason": reason, "source": source}
        return dict(self._run("record_fault", request_id, args, body))

    def settle(self, *, request_id: str, round_id: str) -> list[BetResult]:
        """Settle a settlement-API-1 round on its outcome. On an API-2 round the
        throw already settled it: what it settled, recording nothing new."""

        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            if game_round.settlement_api >= 2:
                # The throw settled the round (a one-step game): say what it settled.
                if game_round.status != SETTLED:
                    raise InvalidCommandError(
                        f"round {game_round.id} has no outcome to settle on "
                        f"(it is {game_round.status})"
                    )
                return list(game_round.results), []
            game_round.check_settleable()
            variant = self._variant_of(game_round)
            returns = self._step(variant, game_round)["settle"]
            results = game_round.settle(returns)
            return results, [game_round, *self._pay(game_round, results), *self._ended(game_round)]

        return list(self._run("settle", request_id, {"round_id": str(round_id)}, body))

    def correct(
        self,
        *,
        request_id: str,
        round_id: str,
        outcome: dict[str, Any],
        reason: str,
        operator: Signer,
    ) -> list[BetResult]:
        """An operator corrects a settled round's outcome (signed with an operator
        key): the settlement is reversed with compensating postings and the round
        settled again, every wallet and the house adjusted, in one save. A wallet
        that can no longer cover what it must give back stops the correction."""

        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            variant = self._variant_of(game_round)
            if game_round.actions:  # played action by action: correct its last action
                number = game_round.actions - 1
                at = game_round.action_entry(number)
                _, before_step = replay(variant, self._bets(game_round), game_round.log[:at])
                right_action = self._outcome_action(variant, game_round, before_step, outcome)
                right = self._stored(before_step, right_action)
                return self._correction(variant, game_round, number, right, reason, operator)
            if game_round.status != "settled":
                raise InvalidCommandError(
                    f"only a settled round can be corrected ({game_round.status})"
                )
            # The right outcome replaces the wrong one as the round's last action.
            actions, _ = replay(variant, self._bets(game_round), game_round.log[:-1])
            before_step = variant.step(self._bets(game_round), actions)
            right_action = self._outcome_action(variant, game_round, before_step, outcome)
            right = self._stored(before_step, right_action)
            returns = variant.step(self._bets(game_round), [*actions, right_action])["settle"]
            before = {r["bet_id"]: r["returned"] for r in game_round.results}
            fact = correction_fact(game_round.id, game_round.outcome or {}, right, reason)
            signed = sign_fact(self._operator(operator), fact, Role.OPERATOR)
            results = game_round.correct(right, returns, reason, {**signed})
            deltas: list[BetResult] = [
                {
                    "bet_id": r["bet_id"],
                    "account_id": r["account_id"],
                    "stake": before[r["bet_id"]],  # what the first settlement returned
                    "returned": r["returned"],
                }
                for r in results
            ]
            return results, [game_round, *self._pay(game_round, deltas, label="correction")]

        args = {"round_id": str(round_id), "outcome": outcome, "reason": reason}
        return list(self._run("correct", request_id, args, body))

    def correct_step(
        self,
        *,
        request_id: str,
        round_id: str,
        step: int,
        drawn: list[int],
        reason: str,
        operator: Signer,
    ) -> list[BetResult]:
        """An operator corrects what a physical table's device misread (settlement
        API 2): action number `step` drew `drawn`. The game replays the round
        with the corrected draw and the same later actions; every settlement from
        that action on is reversed with compensating postings and the bets
        re-settled as re-derived, every wallet and the house adjusted, in one
        save. Refused on an RNG table, on a round not yet over, and when the
        corrected draw would make a later action illegal, void the round, or
        change which bets are settled from that action on."""

        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            variant = self._variant_of(game_round)
            return self._correction(
                variant, game_round, step, drawn, reason, operator, as_drawn=True
            )

        args = {"round_id": str(round_id), "step": step, "drawn": drawn, "reason": reason}
        return list(self._run("correct_step", request_id, args, body))

    def _correction(
        self,
        variant: LoadedGame,
        game_round: Round,
        step: int,
        right: Any,
        reason: str,
        operator: Signer,
        *,
        as_drawn: bool = False,
    ) -> tuple[Result, list[Aggregate]]:
        """`right` is what action `step` drew (`as_drawn`), else its outcome as
        rounds store it ({kind: drawn}, or a move's arguments)."""
        if game_round.is_rng:
            raise InvalidCommandError(
                f"round {game_round.id} is on an RNG table: an RNG result is computed, never "
                "corrected (void the round if the RNG malfunctioned)"
            )
        if game_round.status != SETTLED:
            raise InvalidCommandError(
                f"only a settled round can be corrected ({game_round.status})"
            )
        wrong, fixed, returns = self._rederive(variant, game_round, step, right, as_drawn)
        fact = correction_fact(game_round.id, wrong, fixed, reason, step)
        signed = sign_fact(self._operator(operator), fact, Role.OPERATOR)
        before = {r["bet_id"]: r["returned"] for r in game_round.results}
        results = game_round.correct_step(step, wrong, fixed, returns, reason, {**signed})
        deltas: list[BetResult] = [
            {
                "bet_id": r["bet_id"],
                "account_id": r["account_id"],
                "stake": before[r["bet_id"]],  # what the reversed settlement returned
                "returned": r["returned"],
            }
            for r in results
        ]
        return results, [game_round, *self._pay(game_round, deltas, label="correction")]

    def _rederive(
        self, variant: LoadedGame, game_round: Round, step: int, right: Any, as_drawn: bool
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, tuple[int, int]]]:
        """Replay the round with action `step` corrected: its wrong and right
        outcome ({kind: drawn}, or its arguments for a move that draws nothing),
        and per bet settled from that action on (action number, return)."""
        at = game_round.action_entry(step)
        done = game_round.log[at]["action"]
        bets = self._bets(game_round)
        _, current = replay(variant, bets, game_round.log[:at])
        draw = current["moves"].get(done["actor"], {}).get(done["action"])
        if draw is None:
            if as_drawn or done["action"] in (CLOSE_BETTING, FAULT):
                raise InvalidCommandError(f"action {step} drew nothing to correct")
            if not isinstance(right, Mapping):
                raise InvalidCommandError(f"an outcome is an object, not {right!r}")
            wrong = dict(done["args"])
            fixed = variant.validate_args(done["actor"], done["action"], right)
            corrected = {**done, "args": fixed}
        else:
            kind = draw["kind"]
            wrong = {kind: list(done["drawn"])}
            if not as_drawn:  # {kind: drawn}, as `correct` is given it
                right = right.get(kind) if isinstance(right, Mapping) and len(right) == 1 else None
            low, high = (1, 6) if kind == "dice" else (0, DECK_SIZE - 1)
            if (
                not isinstance(right, list)
                or len(right) != draw["count"]
                or not all(type(v) is int and low <= v <= high for v in right)
            ):
                raise InvalidCommandError(
                    f"bad correction: action {step} draws {draw['count']} {kind} "
                    f"({low}..{high}), got {right!r}"
                )
            others = [c for c in game_round.dealt if c not in wrong[kind]]
            if kind == "cards" and (set(right) & set(others) or len(set(right)) < len(right)):
                raise InvalidCommandError(
                    "bad correction: a card would be dealt twice from the round's deck"
                )
            fixed = {kind: list(right)}
            corrected = {**done, "drawn": list(right)}
        if fixed == wrong:
            raise InvalidCommandError("the corrected draw is the one already recorded")
        log = list(game_round.log)
        log[at] = {"action": corrected}
        try:
            returns, last = settlements_from(variant, bets, log, at)
        except InvalidCommandError as exc:
            raise InvalidCommandError(
                f"round {game_round.id}: with the corrected draw, {exc}: void the round instead"
            ) from None
        if not last["over"]:
            raise InvalidCommandError(
                f"round {game_round.id}: with the corrected draw the round is not over: "
                "void it instead"
            )
        return wrong, fixed, returns

    def void_round(
        self, *, request_id: str, round_id: str, reason: str, operator: Signer
    ) -> list[BetResult]:
        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            fact = operator_fact("void", game_round.id, reason)
            signed = sign_fact(self._operator(operator), fact, Role.OPERATOR)
            returns = game_round.void(reason, {**signed})
            return returns, [game_round, *self._pay(game_round, returns), *self._ended(game_round)]

        args = {"round_id": str(round_id), "reason": reason}
        return list(self._run("void_round", request_id, args, body))

    def resume_round(
        self, *, request_id: str, round_id: str, reason: str, operator: Signer
    ) -> None:
        def body() -> tuple[Result, list[Aggregate]]:
            game_round = self.round(round_id)
            fact = operator_fact("resume", game_round.id, reason)
            signed = sign_fact(self._operator(operator), fact, Role.OPERATOR)
            game_round.resume(reason, {**signed})
            return None, [game_round]

        self._run("resume_round", request_id, {"round_id": str(round_id), "reason": reason}, body)

    def _operator(self, operator: Signer) -> Signer:
        """An operator key the keyring knows that may sign now (valid, not revoked in
        the keyring or the log: `ledger.crypto.validity`): else nothing is recorded."""
        record = self._signing_keyring().get(operator.key_id)
        if record is None or record.role is not Role.OPERATOR:
            raise InvalidCommandError(
                f"key {operator.key_id[:16]} is not an operator key in the keyring"
            )
        problem = key_problem(record, now_micros())
        if problem is not None:
            raise InvalidCommandError(f"operator key {record.name} may not sign now: {problem}")
        return operator

    def _signing_keyring(self) -> Keyring:
        """The keyring now, with every revocation the key registry holds merged in:
        a key revoked through another node (its own keys directory) is revoked here."""
        return self.app.signing_keyring()

    # Legality comes from the game: what its last step offers.
    @staticmethod
    def _bets(game_round: Round) -> dict[str, BetView]:
        return dict(game_round.bets)

    def _step(self, variant: LoadedGame, game_round: Round) -> Step:
        """The game's step after everything the round recorded."""
        return self.steps.replay(variant, game_round.id, self._bets(game_round), game_round.log)[1]

    @staticmethod
    def _offers(step: Step) -> str:
        moves = [f"{actor} may {a}" for actor, offered in step["moves"].items() for a in offered]
        return "; ".join(moves) or ("it is over" if step["over"] else "no move is offered")

    def _refuse(
        self, game_round: Round, actor: str, action: str, step: Step
    ) -> InvalidCommandError:
        return InvalidCommandError(
            f"round {game_round.id} ({game_round.variant}): {actor} may not {action} now "
            f"({self._offers(step)})"
        )

    def _legal(self, variant: LoadedGame, game_round: Round, action: str) -> str:
        """The actor the game lets take `action` now, or refuse naming round and action."""
        step = self._step(variant, game_round)
        actor = actor_for(step, action)
        if actor is None:
            raise InvalidCommandError(
                f"round {game_round.id} ({game_round.variant}): nobody may {action} now "
                f"({self._offers(step)})"
            )
        return actor

    def _check_betting(self, variant: LoadedGame, game_round: Round, what: str) -> None:
        step = self._step(variant, game_round)
        if not step["betting"]:
            raise InvalidCommandError(
                f"round {game_round.id} is not taking bets (it is {game_round.status}): "
                f"a player may not {what} now ({self._offers(step)})"
            )

    def _outcome_action(
        self, variant: LoadedGame, game_round: Round, step: Step, outcome: Any
    ) -> RecordedAction:
        if not isinstance(outcome, Mapping):
            raise InvalidCommandError(f"an outcome is an object, not {outcome!r}")
        move = outcome_move(step)
        if move is None:
            raise InvalidCommandError(
                f"round {game_round.id} is not awaiting an outcome (it is {game_round.status}): "
                f"nobody may report one now ({self._offers(step)})"
            )
        actor, action, draw = move
        if draw is None:
            outcome = variant.validate_args(actor, action, outcome)
        found = outcome_action(step, outcome)
        if found is None:
            assert draw is not None  # an argument-only move takes any validated outcome
            raise InvalidCommandError(
                f"bad outcome {dict(outcome)!r}: {action} draws {draw['count']} {draw['kind']}"
            )
        return found

    def _outcome(self, variant: LoadedGame, game_round: Round, outcome: Any) -> dict[str, Any]:
        """The outcome in canonical form, once the game accepts it as its next move."""
        bets = self._bets(game_round)
        actions, step = self.steps.replay(variant, game_round.id, bets, game_round.log)
        action = self._outcome_action(variant, game_round, step, outcome)
        variant.step(bets, [*actions, action])  # the game's own refusal of bad randomness
        return self._stored(step, action)

    @staticmethod
    def _stored(step: Step, action: RecordedAction) -> dict[str, Any]:
        """An outcome as rounds store it: {kind: drawn} for randomness, else its args."""
        move = outcome_move(step)
        if move is not None and move[2] is not None:
            return {move[2]["kind"]: action["drawn"]}
        return dict(action["args"])

    def act(
        self,
        *,
        request_id: str,
        round_id: str,
        actor: str,
        action: str,
        args: Mapping[str, Any] | None = None,
        source: dict[str, Any] | None = None,
        rng: RngServer | None = None,
        attested_by: Mapping[str, str] | None = None,
    ) -> Any:
        """Take one of the moves the game offers now: legality from its last step
        (an illegal move is refused naming round, actor and action, and nothing
        is recorded), randomness drawn by the core (RNG, `rng`: dice from the
        round's committed seed, cards from its shuffled deck by position) or
        taken from a dealer device's signed report (`source`,
        `ledger.devices.action_report`). Settlement API 2 rounds record it as
        `Round.ActionRecorded`, then settle in the same save whatever bets the
        game's step settles (`Round.Settled` of that step) or void it.

        `attested_by` ({"token": id, "role": API role}: the HTTP API's
        authenticated session) is recorded as the `by` of a command-sourced
        action, the node's statement of who asked (`ledger.domain.asked_by`);
        without it such an action is the node's own command. It is part of the
        request: the same request id from another session is refused."""
        by = None if attested_by is None else dict(attested_by)
        if by is not None and (problem := by_problem(by)) is not None:
            raise InvalidCommandError(f"act: the session that asked is malformed: {problem}")
        game_round = self.round(round_id)
        if game_round.settlement_api < 2:
            return self._act_v1(request_id, game_round, actor, action, args, source, rng)

        def choose(
            variant: LoadedGame, game_round: Round, step: Step, number: int
        ) -> tuple[RecordedAction, dict[str, Any]]:
            offered = step["moves"].get(actor, {}) if isinstance(actor, str) else {}
            if not isinstance(action, str) or action not in offered:
                raise self._refuse(game_round, str(actor), str(action), step)
            given = variant.validate_args(actor, action, dict(args or {}))
            drawn, attested = self._attest(
                game_round,
                number,
                actor,
                action,
                given,
                offered[action],
                source,
                rng,
                betting_open=step["betting"],
                asked_by=by,
            )
            done: RecordedAction = {"actor": actor, "action": action, "args": given, "drawn": drawn}
            return done, attested

        loaded = [game_round]  # the first attempt plays on the round just loaded

        def body() -> tuple[Result, list[Aggregate]]:
            return self._play(loaded.pop() if loaded else self.round(round_id), choose)

        fingerprint_args = {
            "round_id": str(round_id),
            "actor": actor,
            "action": action,
            "args": dict(args or {}),
            "source": source,
        }
        if by is not None:  # only when given: an earlier request's fingerprint is unchanged
            fingerprint_args["attested_by"] = by
        return dict(self._run("act", request_id, fingerprint_args, body))

    # The convenience commands on settlement-API-2 rounds: each picks an action for `_play`.

    def _wrapped(self, action: str, rng: RngServer | None) -> Chooser:
        """The one move named `action` the game offers now, attested as `act` would."""

        def choose(
            variant: LoadedGame, game_round: Round, step: Step, number: int
        ) -> tuple[RecordedAction, dict[str, Any]]:
            actor = actor_for(step, action)
            if actor is None:
                raise InvalidCommandError(
                    f"round {game_round.id} ({game_round.variant}): nobody may {action} now "
                    f"({self._offers(step)})"
                )
            given = variant.validate_args(actor, action, {})
            draw = step["moves"][actor][action]
            drawn, attested = self._attest(
                game_round,
                number,
                actor,
                action,
                given,
                draw,
                None,
                rng,
                betting_open=step["betting"],
            )
            return {"actor": actor, "action": action, "args": given, "drawn": drawn}, attested

        return choose

    def _reported(self, outcome: Any, source: dict[str, Any]) -> Chooser:
        """An outcome a dealer device signed as the round's next throw (`throw_fact`)."""

        def choose(
            variant: LoadedGame, game_round: Round, step: Step, number: int
        ) -> tuple[RecordedAction, dict[str, Any]]:
            done = self._outcome_action(variant, game_round, step, outcome)
            checked = self._stored(step, done)
            self._check_source(
                game_round, source, throw_fact(game_round.id, game_round.throws, checked)
            )
            return done, self._signed_as(source, "throw", step, done)

        return choose

    def _fault_reported(self, reason_args: dict[str, Any], source: dict[str, Any]) -> Chooser:
        """A faulty throw a dealer device signed (`fault_fact`)."""

        def choose(
            variant: LoadedGame, game_round: Round, step: Step, number: int
        ) -> tuple[RecordedAction, dict[str, Any]]:
            actor = actor_for(step, FAULT)
            assert actor is not None  # checked by the caller
            self._check_source(
                game_round,
                source,
                fault_fact(game_round.id, game_round.throws, reason_args["reason"]),
            )
            done: RecordedAction = {
                "actor": actor,
                "action": FAULT,
                "args": reason_args,
                "drawn": [],
            }
            return done, self._signed_as(source, "fault", step, done)

        return choose

    @staticmethod
    def _signed_as(
        source: dict[str, Any], fact: str, step: Step, done: RecordedAction
    ) -> dict[str, Any]:
        """A device report signed over a throw or fault fact (by throw counter), as
        recorded: verify checks that fact's signature, not an action fact's."""
        recorded: dict[str, Any] = {
            k: source[k] for k in ("kind", "key_id", "signature") if k in source
        }
        draw = step["moves"][done["actor"]][done["action"]]
        if draw is not None:
            recorded["draw"] = draw["kind"]
        return {**recorded, "signed": fact}

    def _play(
        self,
        game_round: Round,
        choose: Chooser,
    ) -> tuple[Result, list[Aggregate]]:
        """Record the action `choose` picks (legal, attested) on a settlement-API-2
        round (as the command just loaded it), then settle in the same save what
        the game's step settles, or void."""
        variant = self._variant_of(game_round)
        bets = self._bets(game_round)
        actions, step = self.steps.replay(variant, game_round.id, bets, game_round.log)
        number = game_round.actions
        done, attested = choose(variant, game_round, step, number)
        actions.append(done)
        after = variant.step(bets, actions)
        game_round.record_action(dict(done), attested, dict(after))
        self.steps.remember(variant, game_round.id, bets, game_round.log, actions, after)
        changed: list[Aggregate] = [game_round]
        settled: list[BetResult] = []
        if after["void"] is not None:
            settled = game_round.void(after["void"], None)
            changed += [*self._pay(game_round, settled), *self._ended(game_round)]
        elif after["settle"] or after["over"]:
            settled = game_round.settle_step(after["settle"], after["over"])
            changed += self._pay(game_round, settled)
            if after["over"]:
                changed += self._ended(game_round)
        result = {
            "step": number,
            "drawn": done["drawn"],
            "state": after["state"],
            "settled": settled,
            "void": after["void"],
            "over": after["over"],
        }
        return result, changed

    def _attest(
        self,
        game_round: Round,
        number: int,
        actor: str,
        action: str,
        args: dict[str, Any],
        draw: Draw | None,
        source: dict[str, Any] | None,
        rng: RngServer | None,
        *,
        betting_open: bool,
        asked_by: dict[str, str] | None = None,
    ) -> tuple[list[int], dict[str, Any]]:
        """What the action drew and the source attesting it (RULES.md §1.4): on an
        RNG table the core draws (never a fault) and any other move is the
        node's own command (with `asked_by`, the session that asked for it); on
        a physical table, once betting is closed, every action — draws, faults
        and decisions alike — comes only in a dealer device's signed report
        (while betting is open the node may close it)."""
        command: dict[str, Any] = {"kind": "command"}
        if asked_by is not None:
            command["by"] = dict(asked_by)
        if game_round.is_rng:
            if action == FAULT:
                raise InvalidCommandError(
                    f"round {game_round.id} is on an RNG table: an RNG draw is never faulty "
                    "(if the RNG malfunctioned, void the round)"
                )
            if source is not None:
                raise InvalidCommandError(
                    f"round {game_round.id} is on an RNG table: the core draws its randomness, "
                    "nobody reports it"
                )
            if draw is None:
                return [], command
            if rng is None:
                raise InvalidCommandError(f"round {game_round.id} is on an RNG table: pass its RNG")
            seed_id = str(game_round.dice_seed)
            if draw["kind"] == "dice":
                if draw["count"] != 3:
                    raise InvalidCommandError("the RNG throws three dice at a time")
                counter = game_round.throws
                dice = list(rng.throw(seed_id, str(game_round.id), counter))
                drew = {"kind": "rng", "seed_id": seed_id, "draw": "dice", "counter": counter}
                return dice, drew if asked_by is None else {**drew, "by": dict(asked_by)}
            first = len(game_round.dealt)
            positions = list(range(first, first + draw["count"]))
            if positions[-1] >= DECK_SIZE:
                raise InvalidCommandError(f"round {game_round.id}: the deck is exhausted")
            deck = shuffled_deck(rng.seed(seed_id), str(game_round.id))
            cards = [deck[p] for p in positions]
            dealt = {"kind": "rng", "seed_id": seed_id, "draw": "cards", "positions": positions}
            # A hit is a decision too: who asked for it, beside the RNG's cards.
            return cards, dealt if asked_by is None else {**dealt, "by": dict(asked_by)}
        # A physical table: once bets are locked, every action, decisions included,
        # is what its dealer device saw and signed (RULES.md §1.4); while betting
        # is open the node may end it by its own command (no randomness, no bet
        # decided by it).
        if source is None and betting_open and draw is None and action != FAULT:
            return [], command
        if not isinstance(source, dict) or source.get("kind") != "device":
            raise InvalidCommandError(
                f"round {game_round.id} is on a physical table: {action} comes only from a "
                "dealer device's signed report"
            )
        drawn = source.get("drawn")
        count = 0 if draw is None else draw["count"]
        low, high = (1, 6) if draw is not None and draw["kind"] == "dice" else (0, DECK_SIZE - 1)
        if (
            not isinstance(drawn, list)
            or len(drawn) != count
            or not all(type(v) is int and low <= v <= high for v in drawn)
        ):
            what = "nothing" if draw is None else f"{count} {draw['kind']} ({low}..{high})"
            raise InvalidCommandError(f"bad report: {action} draws {what}, got {drawn!r}")
        fact = action_fact(game_round.id, number, actor, action, args, drawn)
        self._check_device(source, fact)
        recorded: dict[str, Any] = {
            k: source[k] for k in ("kind", "key_id", "signature") if k in source
        }
        if draw is not None:
            recorded["draw"] = draw["kind"]
        return list(drawn), recorded

    def _check_device(self, source: dict[str, Any], fact: dict[str, Any]) -> None:
        """A dealer device's report: its signature over `fact`, by a `dealer-device`
        key that may sign now (valid, not revoked: `ledger.crypto.validity`)."""
        try:
            verify_fact(
                self._signing_keyring(),
                fact,
                actor_signature(source),
                Role.DEALER_DEVICE,
                "report",
                at=now_micros(),
            )
        except VerificationError as exc:
            raise InvalidCommandError(f"dealer device report refused: {exc}") from None

    def _act_v1(
        self,
        request_id: str,
        game_round: Round,
        actor: str,
        action: str,
        args: Mapping[str, Any] | None,
        source: dict[str, Any] | None,
        rng: RngServer | None,
    ) -> Any:
        """A settlement-API-1 round (opened before games): its old commands."""
        round_id = str(game_round.id)
        variant = self._variant_of(game_round)
        step = self._step(variant, game_round)
        if action not in step["moves"].get(actor, {}):
            raise self._refuse(game_round, actor, action, step)
        given = variant.validate_args(actor, action, dict(args or {}))
        if action == "close_betting":
            return self.close_betting(request_id=request_id, round_id=round_id)
        if action == FAULT:
            return self.record_fault(
                request_id=request_id,
                round_id=round_id,
                reason=given.get("reason", ""),
                source=source or {},
            )
        draw = step["moves"][actor][action]
        if game_round.is_rng and draw is not None:
            if rng is None:
                raise InvalidCommandError(f"round {game_round.id} is on an RNG table: pass its RNG")
            return self.throw_dice(request_id=request_id, round_id=round_id, rng=rng)
        outcome = given if draw is None else dict(args or {})
        return self.record_outcome(
            request_id=request_id, round_id=round_id, outcome=outcome, source=source or {}
        )

    def _variant_of(self, game_round: Round) -> LoadedGame:
        """The game the round opened with: same id, rules and settlement API (the
        plugin's release may differ: the round pins rules, not wheels)."""
        variant = self.variant(game_round.variant)
        if variant.rules_hash != game_round.rules_hash or (
            game_round.settlement_api != 1 and variant.settlement_api != game_round.settlement_api
        ):
            raise InvalidCommandError(
                f"round {game_round.id} opened with {game_round.variant} "
                f"{game_round.variant_version} (rules {game_round.rules_hash[:12]}, settlement "
                f"API {game_round.settlement_api}), but {variant.version} (rules "
                f"{variant.rules_hash[:12]}, settlement API {variant.settlement_api}) is installed"
            )
        return variant

    def _ended(self, game_round: Round) -> list[Aggregate]:
        """An RNG table counts one round fewer in play."""
        if game_round.dice_seed is None:
            return []
        table = self.table(game_round.table_id)
        table.round_ended()
        return [table]

    def _pay(
        self, game_round: Round, results: list[BetResult], label: str = "return"
    ) -> list[Account]:
        """Mirror a settlement, void or correction on every wallet and the house.

        Each result moves `returned - stake` to the wallet beyond its stake: for a
        settlement or void `stake` is what the bet put in play; for a correction
        it is what the first settlement returned, so only the difference moves.
        """
        accounts: dict[str, Account] = {}
        house_net = 0
        for result in results:
            change = (
                result["returned"]
                if label != "correction"
                else (result["returned"] - result["stake"])
            )
            if change:
                account = accounts.get(result["account_id"]) or self.account(result["account_id"])
                accounts[result["account_id"]] = account
                reference = f"{label} {result['bet_id']}"
                if change > 0:
                    account.credit(change, game_round.id, reference)
                else:
                    account.debit(-change, game_round.id, reference)
            house_net += result["stake"] - result["returned"]
        changed = list(accounts.values())
        if house_net:  # zero for a void: every stake goes back
            house = self.account(game_round.house_account)
            if house_net > 0:
                house.credit(house_net, game_round.id, f"round {label}")
            else:
                house.debit(-house_net, game_round.id, f"round {label}")
            changed.append(house)
        return changed
