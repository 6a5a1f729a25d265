"""Who may state a round's outcome (docs/rules.md §1.4): an RNG round's draws
come only from its committed seed, in draw order; a physical round's only
from a dealer device's report (its signature is checked by the casino, which
holds the keyring: the domain knows no crypto)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger.errors import InvalidCommandError

FAULTY_DRAW = "a faulty draw"  # what a fault report states (`check_source`'s `what`)


def rng_source(seed_id: str | None, draws: int) -> dict[str, Any]:
    """The only source an RNG round's next draw may have."""
    return {"kind": "rng", "seed_id": seed_id, "counter": draws}


def check_source(
    round_id: UUID | str, seed_id: str | None, draws: int, source: Any, what: str
) -> None:
    """Refuse `source` for `what` (e.g. "a faulty draw") in this round, if it may not state it."""
    if not isinstance(source, dict):
        raise InvalidCommandError(
            f"{what}'s source is an object", code="invalid_value", param="source"
        )
    if seed_id is not None:
        if what == FAULTY_DRAW:
            raise InvalidCommandError(
                f"round {round_id} is on an RNG table: an RNG draw is never faulty "
                "(if the RNG malfunctioned, void the round)",
                code="wrong_table_kind",
            )
        if source != rng_source(seed_id, draws):
            raise InvalidCommandError(
                f"round {round_id} is on an RNG table: its dice come only from seed "
                f"{seed_id}, draw {draws} (use throw_dice)",
                code="wrong_table_kind",
            )
    elif source.get("kind") != "device":
        kind = source.get("kind")
        given = "a source with no kind" if kind is None else f"a {kind!r} source"
        raise InvalidCommandError(
            f"round {round_id} is on a physical table: {what} comes only from a "
            f"dealer device's signed report (a source of kind 'device'), not from {given}",
            code="device_report_refused",
            param="source",
        )
