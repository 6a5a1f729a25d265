"""What a round refuses, whatever the game (docs/rules.md §1.4): a bet once
betting closed or outside the table's limits, a void an operator may not make,
a correction that cannot be made, a card dealt twice. Each check raises
`InvalidCommandError`, with its code (`ledger.error_codes`), before anything
is recorded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from ledger.domain.round_records import BETTING, DECIDED, SETTLED, VOIDED, Limits
from ledger.errors import InvalidCommandError


def check_taking_bets(round_id: UUID | str, status: str) -> None:
    if status != BETTING:
        raise InvalidCommandError(
            f"round {round_id} is not taking bets (it is {status})", code="betting_closed"
        )


def check_stake(limits: Limits, staked: int, amount: int) -> None:
    """Within the table's limits: a bet's, and the player's total in the round
    (`staked`: their standing stakes before this one)."""
    if not limits["min_bet"] <= amount <= limits["max_bet"]:
        raise InvalidCommandError(
            f"stake {amount} is outside the table's limits "
            f"{limits['min_bet']}..{limits['max_bet']}",
            code="stake_below_minimum" if amount < limits["min_bet"] else "stake_over_limit",
            param="stake",
        )
    if staked + amount > limits["max_round"]:
        raise InvalidCommandError(
            f"stake {amount} would take this player's total in the round past "
            f"{limits['max_round']}",
            code="round_total_over_limit",
            param="stake",
        )


def check_not_over(round_id: UUID | str, status: str) -> None:
    if status in (SETTLED, VOIDED):
        raise InvalidCommandError(
            f"round {round_id} is already {status}",
            code="round_settled" if status == SETTLED else "round_voided",
        )


def check_resume(round_id: UUID | str, status: str, reason: Any) -> None:
    check_not_over(round_id, status)
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidCommandError(
            "resuming a round needs a reason", code="reason_required", param="reason"
        )


def check_takes_actions(round_id: UUID | str, status: str) -> None:
    if status in (SETTLED, VOIDED, DECIDED):
        raise InvalidCommandError(
            f"round {round_id} takes no action now (it is {status})", code="move_not_offered"
        )


def check_outcome_to_settle(round_id: UUID | str, status: str, settlement_api: int) -> None:
    """Settlement API 1's settlement: only a round that recorded its outcome under it."""
    if status == SETTLED:
        raise InvalidCommandError(f"round {round_id} is already settled", code="round_settled")
    if settlement_api >= 2 or status != DECIDED:
        raise InvalidCommandError(
            f"round {round_id} has no outcome of settlement API 1 to settle on (it is {status})",
            code="nothing_to_settle",
        )


def check_action_number(round_id: UUID | str, step: Any, actions: int) -> None:
    if not isinstance(step, int) or isinstance(step, bool) or not 0 <= step < actions:
        raise InvalidCommandError(
            f"round {round_id} has no action number {step!r}",
            code="correction_refused",
            param="step",
        )


def check_step_returns(
    round_id: UUID | str,
    status: str,
    actions: int,
    returns: Mapping[str, int],
    settled_bets: set[str],
    bets: Mapping[str, Any],
) -> None:
    """A step settles standing bets only, each once, after an action."""
    if status in (SETTLED, VOIDED) or not actions:
        raise InvalidCommandError(
            f"round {round_id} has no action to settle on", code="invalid_settlement"
        )
    if set(returns) & settled_bets or not set(returns) <= set(bets):
        raise InvalidCommandError(
            "a step settles only standing bets, each once", code="invalid_settlement"
        )


def check_void(
    round_id: UUID | str,
    status: str,
    drawn: int,
    settled_bets: set[str],
    by_operator: bool,
    reason: Any,
) -> None:
    """Never by an operator once a valid outcome is recorded, in part or whole (a
    settled bet, dice drawn, the first card dealt): the house may not void a round it
    lost, nor choose deals by voiding the ones it does not like."""
    check_not_over(round_id, status)
    if status == DECIDED:
        raise InvalidCommandError(
            f"round {round_id} has a recorded outcome: it can only be settled, not voided",
            code="void_refused",
        )
    if by_operator and drawn:
        raise InvalidCommandError(
            f"round {round_id} has drawn its outcome ({drawn} draws: every dealt card "
            "is part of it): an operator may not void it; it is played to its end "
            "(resume it if interrupted; a physical table's misdeal is its dealer "
            "device's signed fault report)",
            code="void_refused",
        )
    if by_operator and settled_bets:
        raise InvalidCommandError(
            f"round {round_id} has settled bets: an operator may not void it (the house "
            "may not void a round it is losing)",
            code="void_refused",
        )
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidCommandError("a void needs a reason", code="reason_required", param="reason")


def check_correction(round_id: UUID | str, is_rng: bool, status: str, reason: Any) -> None:
    """Only a physical table's settled round, and with a reason."""
    if is_rng:
        raise InvalidCommandError(
            f"round {round_id} is on an RNG table: an RNG result is computed, never "
            "corrected (void the round if the RNG malfunctioned)",
            code="wrong_table_kind",
        )
    if status != SETTLED:
        raise InvalidCommandError(
            f"only a settled round can be corrected ({status})", code="correction_refused"
        )
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidCommandError(
            "a correction needs a reason", code="reason_required", param="reason"
        )


def check_corrected_step(
    wrong_outcome: Mapping[str, Any],
    right_outcome: Mapping[str, Any],
    reversed_bets: set[str],
    resettled_bets: set[str],
) -> None:
    """A step correction changes the draw, and re-settles exactly the bets whose
    settlements it reverses (any other change is a void's to make)."""
    if right_outcome == wrong_outcome:
        raise InvalidCommandError(
            "the corrected draw is the one already recorded", code="correction_refused"
        )
    if reversed_bets != resettled_bets:
        raise InvalidCommandError(
            "the corrected draw changes which bets are settled from that action on: "
            "void the round instead",
            code="correction_refused",
        )


def check_fresh_cards(round_id: UUID | str, cards: list[int], dealt: list[int]) -> None:
    """No card dealt twice from a round's deck: not one already dealt, not one twice now."""
    again = sorted(set(cards) & set(dealt)) or sorted(c for c in set(cards) if cards.count(c) > 1)
    if again:
        raise InvalidCommandError(
            f"round {round_id}: card {again[0]} was already dealt from this round's deck",
            code="invalid_draw",
        )
