"""What a dealer device sends: a throw or a faulty throw, signed with its own key."""

from __future__ import annotations

from typing import Any

from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.domain.round import fault_fact, throw_fact


def throw_report(
    signer: Signer, round_id: str, throw: int, outcome: dict[str, Any]
) -> dict[str, Any]:
    """The `source` of a physical throw, for `Casino.record_outcome`."""
    signed = sign_fact(signer, throw_fact(round_id, throw, outcome), Role.DEALER_DEVICE)
    return {"kind": "device", **signed}


def fault_report(signer: Signer, round_id: str, throw: int, reason: str) -> dict[str, Any]:
    """The `source` of a faulty physical throw, for `Casino.record_fault`."""
    signed = sign_fact(signer, fault_fact(round_id, throw, reason), Role.DEALER_DEVICE)
    return {"kind": "device", **signed}
