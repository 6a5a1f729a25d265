"""What a round refuses, whatever the game (docs/rules.md §1.4): a void an
operator may not make, a correction that cannot be made, a card dealt twice.
Each check raises `InvalidCommandError` before anything is recorded."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger.domain.round_records import DECIDED, SETTLED, VOIDED
from ledger.errors import InvalidCommandError


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
    if status in (SETTLED, VOIDED):
        raise InvalidCommandError(
            f"round {round_id} is already {status}",
            code="round_settled" if status == SETTLED else "round_voided",
        )
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


def check_fresh_cards(round_id: UUID | str, cards: list[int], dealt: list[int]) -> None:
    """No card dealt twice from a round's deck: not one already dealt, not one twice now."""
    again = sorted(set(cards) & set(dealt)) or sorted(c for c in set(cards) if cards.count(c) > 1)
    if again:
        raise InvalidCommandError(
            f"round {round_id}: card {again[0]} was already dealt from this round's deck",
            code="invalid_draw",
        )
