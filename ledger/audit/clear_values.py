"""What the log holds of personal data in clear (`ledger privacy report`):
the values a store recorded before sealing (docs/privacy.md), which no
erasure can reach without breaking every proof above them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from ledger.audit.significant import log_envelopes
from ledger.domain.account import HOUSE
from ledger.store.application import LedgerApplication


@dataclass(frozen=True)
class ClearValue:
    """A personal value a store recorded in clear, before sealing: it cannot be erased."""

    position: int  # log position
    event: str  # Account.Opened or Round.Opened
    field: str  # owner or dealer
    stream: str  # the account's or the round's id


_PERSONAL_FIELDS: Final = {
    "ledger.domain.account:Account.Opened": "owner",
    "ledger.domain.round:Round.Opened": "dealer",
}


def clear_values(
    app: LedgerApplication, progress: Callable[[int], None] | None = None
) -> Iterator[ClearValue]:
    """Every personal value the log holds in clear (`ledger privacy report`): a
    player's owner or a dealer recorded before sealing. A table's house account
    names no person (`house of table NAME`) and is not listed. Each row is
    checked against its signed header before it is read."""
    transcoder = app.mapper.transcoder
    for position, stream, _, topic, envelope in log_envelopes(app, progress):
        field = _PERSONAL_FIELDS.get(topic)
        if field is None:
            continue
        payload: dict[str, Any] = transcoder.decode(envelope.payload)
        if isinstance(payload.get(field), str) and payload.get("kind") != HOUSE:
            yield ClearValue(position, topic.rpartition(":")[2], field, stream)
