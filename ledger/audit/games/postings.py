"""The postings a settlement or a void must carry, from its per-bet results
alone: what the money audit compares with what was recorded, and what a
round's facts expect of its settlement."""

from __future__ import annotations

from typing import Any

from ledger.domain.money import in_play, posting, wallet


def expected_settlement_postings(
    round_id: str, house: str, currency: str, results: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """What a settlement's postings must be, from its per-bet results alone."""
    legs = []
    for result in results:
        stake, returned = result["stake"], result["returned"]
        legs.append(posting(in_play(round_id), -stake, currency))
        if returned:
            legs.append(posting(wallet(result["account_id"]), returned, currency))
        if stake != returned:
            legs.append(posting(wallet(house), stake - returned, currency))
    return legs  # type: ignore[return-value]


def expected_void_postings(
    round_id: str, currency: str, returns: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    legs = []
    for result in returns:
        legs.append(posting(in_play(round_id), -result["stake"], currency))
        legs.append(posting(wallet(result["account_id"]), result["stake"], currency))
    return legs  # type: ignore[return-value]
