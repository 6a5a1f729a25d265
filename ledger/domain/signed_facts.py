"""What a dealer device or an operator signs about a round: each fact's exact
shape, which the write path has signed and `ledger verify` checks the
signature over (docs/export.md)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from ledger.domain.stored_names import THROW_FACT


def operator_fact(action: str, round_id: UUID | str, reason: str) -> dict[str, str]:
    """What an operator signs to void or resume a round."""
    return {"action": action, "round": str(round_id), "reason": reason}


def throw_fact(round_id: UUID | str, counter: int, outcome: dict[str, Any]) -> dict[str, Any]:
    """What a dealer device signs when it reports a draw (dice or cards) as the
    round's draw number `counter`: the fact and its counter keep their stored
    name, `"throw"` (`ledger.domain.stored_names`)."""
    return {"action": THROW_FACT, "round": str(round_id), THROW_FACT: counter, "outcome": outcome}


#: The `action` of a fault fact: the fact's own name, whatever the game calls its fault.
FAULT_FACT = "fault"


def fault_fact(round_id: UUID | str, counter: int, reason: str) -> dict[str, Any]:
    """What a dealer device signs when it reports a faulty draw as the round's
    draw number `counter`."""
    return {"action": FAULT_FACT, "round": str(round_id), THROW_FACT: counter, "reason": reason}


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
