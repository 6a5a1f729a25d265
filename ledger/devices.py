"""What a dealer device sends: a draw or a faulty draw, signed with its own key.

Only a physical table takes outcomes and faults, and only from such reports
(docs/rules.md §1.4). The device signs the fact (round, draw counter, what it
saw); the casino checks the signature against a `dealer-device` key valid
now before anything is recorded, and `verify` checks it again.
"""

from __future__ import annotations

from typing import Any

from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.domain.signed_facts import action_fact, fault_fact, throw_fact
from ledger.errors import InvalidCommandError, with_article


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


def action_report(
    signer: Signer,
    round_id: str,
    step: int,
    actor: str,
    action: str,
    args: dict[str, Any],
    drawn: list[int],
) -> dict[str, Any]:
    """The `source` of a physical table's action (dice or cards read, a fault), for
    `Casino.act`: what the device saw, signed as the round's action number `step`."""
    fact = action_fact(round_id, step, actor, action, args, drawn)
    return {"kind": "device", "drawn": list(drawn), **sign_fact(signer, fact, Role.DEALER_DEVICE)}


class DealerDevice:
    """A device at a physical table (a shaker's camera, a card shoe) holding
    its own `dealer-device` key: it reports each throw it sees, by counter."""

    def __init__(self, signer: Signer) -> None:
        if signer.role is not Role.DEALER_DEVICE:
            raise InvalidCommandError(
                "a dealer device signs with a dealer-device key, not "
                f"{with_article(signer.role.value)} key",
                code="key_refused",
            )
        self.signer = signer

    @property
    def key_id(self) -> str:
        return self.signer.key_id

    def throw(self, round_id: str, throw: int, outcome: dict[str, Any]) -> dict[str, Any]:
        return throw_report(self.signer, round_id, throw, outcome)

    def fault(self, round_id: str, throw: int, reason: str) -> dict[str, Any]:
        return fault_report(self.signer, round_id, throw, reason)

    def act(
        self,
        round_id: str,
        step: int,
        actor: str,
        action: str,
        args: dict[str, Any],
        drawn: list[int],
    ) -> dict[str, Any]:
        return action_report(self.signer, round_id, step, actor, action, args, drawn)
