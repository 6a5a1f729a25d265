"""Many bets on one round in one call: what a betting window's aggregator sends.

Each bet of a batch is a command of its own (`Casino.submit_bet`): its own
request id (a retried batch answers each bet as the first time), accepted or
refused on its own (one refused bet records nothing and spoils no other),
and answered only once the commit holding it is durable. The writer takes
them into its commit batches as it takes concurrent single bets.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final

from ledger.errors import LedgerError

MAX_BETS: Final = 1_000  # bets in one batch, at most


@dataclass(frozen=True)
class BetRequest:
    """One bet of a batch: as `Casino.place_bet` takes it, with its own request id."""

    request_id: str
    account_id: str
    bet: dict[str, Any]
    stake: int
    attested_by: Mapping[str, str] | None = None  # the session that asked (`Casino.asked_by`)


@dataclass(frozen=True)
class BetOutcome:
    """A bet's answer: its id when placed (or placed before, on a retry), else the
    ledger's error refusing it."""

    request_id: str
    bet_id: str | None
    error: LedgerError | None


def refused(error: LedgerError) -> Future[str]:
    """A bet refused before it reached the writer, answered as one it refused."""
    answer: Future[str] = Future()
    answer.set_exception(error)
    return answer


def outcome(request: BetRequest, answer: Future[str]) -> BetOutcome:
    """Wait for one bet's answer. A ledger error is the bet's own; anything else
    (the store went away) is raised: the batch can be sent again as it was."""
    try:
        return BetOutcome(request.request_id, str(answer.result()), None)
    except LedgerError as error:
        return BetOutcome(request.request_id, None, error)
