"""Rounds as release 0.2 and before recorded them (settlement API 1), written
into a store today: the events of that write path, through the round's own
event classes (`Aggregate.trigger_event`), since the write path of one
generation records none of them any more.

A round of settlement API 1 pins `settlement_api` 1 when it opens, closes
betting with `Round.BettingClosed`, takes its outcome as `Round.OutcomeRecorded`
(a dealer device's signed throw report at a physical table, the committed
seed's dice at an RNG one) or faulty throws as `Round.FaultRecorded`, and was
settled by a command of its own, every bet at once (`Round.Settled`, step
None) with the request's record. These helpers write them all, and stop
where a store upgraded with rounds still open would: betting open, betting
closed, faulty throws, or an outcome recorded and not settled (`ledger
migrate` finishes them).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from ledger.casino import Casino
from ledger.casino.legality import step_of
from ledger.crypto.canonical import canonical
from ledger.domain.account import Account
from ledger.domain.request import Request
from ledger.domain.round import Round
from ledger.domain.round_records import BetResult
from ledger.node import Node
from ledger.rng.server import RngServer
from tests.casino_support import dealer_device


@dataclass
class Api1Round:
    """One round of settlement API 1 being written, event by event."""

    node: Node
    casino: Casino
    round: Round
    bets: dict[str, tuple[str, int]] = field(default_factory=dict)  # bet -> (wallet, stake)

    @property
    def id(self) -> str:
        return str(self.round.id)

    def bet(self, account_id: str, bet: dict[str, Any], stake: int) -> str:
        """A bet (in its game's canonical form) and the stake out of its wallet,
        in one save."""
        wallet = self.casino.account(account_id)
        bet = self.casino.game(self.round.game).validate_bet(bet, {})
        bet_id = str(uuid4())
        request_id = f"api-1-bet-{bet_id}"
        self.round.place_bet(bet_id, account_id, bet, stake, request_id, None)  # type: ignore[arg-type]
        wallet.debit(stake, self.round.id, f"stake {bet_id}")
        self.node.app.save(self.round, wallet)
        self.bets[bet_id] = (account_id, stake)
        return bet_id

    def close_betting(self) -> Api1Round:
        self.round.trigger_event(Round.BettingClosed)
        self.node.app.save(self.round)
        return self

    def outcome(self, outcome: dict[str, Any]) -> Api1Round:
        """A physical round's outcome, in its dealer device's signed throw report."""
        report = dealer_device(self.node).throw(self.id, self.round.draws, outcome)
        self.round.trigger_event(Round.OutcomeRecorded, outcome=outcome, source=report)
        self.node.app.save(self.round)
        return self

    def thrown(self, rng: RngServer) -> Api1Round:
        """An RNG round's dice, from its committed seed (as API 1 threw them)."""
        assert self.round.seed_id is not None
        counter = self.round.draws
        dice = list(rng.throw(self.round.seed_id, self.id, counter))
        source = {"kind": "rng", "seed_id": self.round.seed_id, "counter": counter}
        self.round.trigger_event(Round.OutcomeRecorded, outcome={"dice": dice}, source=source)
        self.node.app.save(self.round)
        return self

    def settle(self, request_id: str) -> list[BetResult]:
        """The decided round settled by API 1's own command, as `Casino.settle`
        answered request `request_id` then: every bet at once on the outcome,
        each wallet paid its return and the house the rest, with the request's
        record (a retry of it gets this answer back)."""
        context = self.casino.context
        returns = step_of(context, context.game_of(self.round), self.round)["settle"]
        results = self.round.settle_on_outcome(returns)
        changed: dict[str, Account] = {}
        for result in results:
            if result["returned"]:
                wallet = changed.get(result["account_id"]) or self.casino.account(
                    result["account_id"]
                )
                wallet.credit(result["returned"], self.round.id, f"return {result['bet_id']}")
                changed[result["account_id"]] = wallet
        house_net = sum(r["stake"] - r["returned"] for r in results)
        house = self.casino.account(self.round.house_account)
        if house_net > 0:
            house.credit(house_net, self.round.id, "round return")
        elif house_net < 0:
            house.debit(-house_net, self.round.id, "round return")
        args = {"round_id": self.id}
        fingerprint = hashlib.sha256(canonical({"command": "settle", "args": args})).hexdigest()
        record = Request(
            request_id=request_id, command="settle", fingerprint=fingerprint, result=results
        )
        self.node.app.save(self.round, *changed.values(), house, record)
        return results

    def fault(self, reason: str) -> Api1Round:
        """A faulty physical throw, in its dealer device's signed report."""
        report = dealer_device(self.node).fault(self.id, self.round.draws, reason)
        faults = self.round.faults + 1
        self.round.trigger_event(Round.FaultRecorded, reason=reason, source=report, faults=faults)
        self.node.app.save(self.round)
        return self


def api_1_round(node: Node, casino: Casino, table_id: str, dealer: str = "D0") -> Api1Round:
    """A round opened at `table_id` under settlement API 1, its game's rules
    pinned as the installed game declares them (release 0.2's plugin declared
    the same rules under API 1)."""
    table = casino.table(table_id)
    game = casino.game(table.game)
    game_round = Round(
        table_id=table.id,
        game=game.id,
        game_version="0.2",
        rules_hash=game.rules_hash,
        currency=table.currency,
        limits=table.limits,
        house_account=table.house_account,
        dealer=dealer,
        seed_id=table.active_seed,
        settlement_api=1,
        code_hash="",
    )
    if table.active_seed is None:
        node.app.save(game_round)
    else:  # an RNG table counts its rounds in play
        table.round_opened()
        node.app.save(game_round, table)
    return Api1Round(node, casino, game_round)
