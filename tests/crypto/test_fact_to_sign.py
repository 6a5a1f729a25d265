"""`Casino.fact_to_sign` (issue 20, item 5): the exact bytes an operator signs,
from a dry run of the command itself, so a command that would be refused is
refused then, and nothing is recorded (both stores)."""

from __future__ import annotations

import pytest

from ledger.crypto.actor import ACTOR_FACT_DOMAIN
from ledger.crypto.canonical import canonical
from ledger.domain.signed_facts import operator_fact
from ledger.errors import InvalidCommandError
from ledger.node import Node
from tests.casino_support import (
    HEADS,
    LIMITS,
    casino_on,
    event_count,
    operator_signer,
    seen,
    table_of,
)


def test_the_bytes_are_the_commands_own_and_nothing_is_recorded(node: Node) -> None:
    casino = casino_on(node)
    operator = operator_signer(node)
    round_id = casino.open_round(
        request_id="r", table_id=table_of(casino, "coin", LIMITS), dealer="D"
    )
    before = event_count(node.app)
    message = casino.fact_to_sign(
        command="void", round_id=round_id, key_id=operator.key_id, reason="the shoe jammed"
    )
    assert message == ACTOR_FACT_DOMAIN + canonical(
        operator_fact("void", round_id, "the shoe jammed")
    )
    assert event_count(node.app) == before and casino.round(round_id).status == "betting"
    casino.void_round(
        request_id="v", round_id=round_id, reason="the shoe jammed", operator=operator
    )
    assert casino.round(round_id).status == "voided"


def test_a_command_that_would_be_refused_is_refused_before_anyone_signs(node: Node) -> None:
    casino = casino_on(node)
    operator = operator_signer(node)
    player = casino.open_account(request_id="p", owner="ann", currency="EUR")
    casino.deposit(request_id="d", account_id=player, amount=1_000)
    round_id = casino.open_round(
        request_id="r", table_id=table_of(casino, "coin", LIMITS), dealer="D"
    )
    casino.place_bet(request_id="b", round_id=round_id, account_id=player, bet=HEADS, stake=100)
    casino.close_betting(request_id="c", round_id=round_id)
    casino.record_outcome(
        request_id="o",
        round_id=round_id,
        outcome={"face": "heads"},
        source=seen(node, casino, round_id, {"face": "heads"}),
    )
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError):
        casino.fact_to_sign(command="void", round_id=round_id, key_id=operator.key_id, reason="x")
    assert event_count(node.app) == before


def test_a_dry_run_among_bets_of_one_batch_keeps_every_bet_and_nothing_of_its_own(
    node: Node,
) -> None:
    """Bets queued before and after a fact-to-sign of a void of their round:
    every bet is placed, the round is not voided, nothing else is recorded."""
    from concurrent.futures import ThreadPoolExecutor

    casino = casino_on(node)
    operator = operator_signer(node)
    player = casino.open_account(request_id="p", owner="ann", currency="EUR")
    casino.deposit(request_id="d", account_id=player, amount=10_000)
    round_id = casino.open_round(
        request_id="r", table_id=table_of(casino, "coin", LIMITS), dealer="D"
    )

    def bet(n: int) -> object:
        return casino.submit_bet(
            request_id=f"b{n}", round_id=round_id, account_id=player, bet=HEADS, stake=10
        )

    before = event_count(node.app)
    first = [bet(n) for n in range(20)]
    with ThreadPoolExecutor(1) as pool:
        fact = pool.submit(
            casino.fact_to_sign,
            command="void",
            round_id=round_id,
            key_id=operator.key_id,
            reason="asked mid-burst",
        )
        then = [bet(n) for n in range(20, 40)]
        message = fact.result()
    placed = [f.result() for f in first + then]  # type: ignore[attr-defined]
    assert b"asked mid-burst" in message
    game_round = casino.round(round_id)
    assert game_round.status == "betting" and set(game_round.bets) == set(placed)
    # 40 bets: each a round event (its request's record too) and a wallet event.
    assert event_count(node.app) - before == 40 * 2
