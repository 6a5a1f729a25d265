"""The key registry: the one stream where key revocations are recorded.

Its id is fixed (a uuid5 of a well-known name), so `ledger verify` finds every
revocation by an indexed stream lookup, never by scanning the log. Each
revocation is a fact an operator signs (`key-revoked`: key id, reason, time in
µs since the epoch); the node seals the event like any other.
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

KEY_REGISTRY_ID = uuid5(NAMESPACE_URL, "casino-ledger/key-registry")
REVOCATION_KIND = "key-revoked"
REVOKED_TOPIC = "ledger.domain.key_registry:KeyRegistry.KeyRevoked"  # a test holds it to the class


def revocation_fact(key_id: str, reason: str, revoked_at: int) -> dict[str, Any]:
    """Exactly what the operator signs for a revocation."""
    return {"kind": REVOCATION_KIND, "key_id": key_id, "reason": reason, "revoked_at": revoked_at}


class KeyRegistry(Aggregate):
    """Revocations of keys, in the order they were recorded."""

    @staticmethod
    def create_id() -> UUID:
        return KEY_REGISTRY_ID

    @event("Created")
    def __init__(self) -> None:
        self.revoked: dict[str, int] = {}

    @event("KeyRevoked")
    def revoke(self, key_id: str, reason: str, revoked_at: int, operator: dict[str, str]) -> None:
        """`operator` is the operator's signature over `revocation_fact(...)`."""
        self.revoked.setdefault(key_id, revoked_at)
