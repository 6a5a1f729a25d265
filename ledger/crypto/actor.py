"""Facts an actor vouches for (an operator voiding a round, a dealer device
reporting dice) carry that actor's own signature, besides the node's."""

from __future__ import annotations

import base64
import binascii
from typing import Any, TypedDict

from ledger.crypto.canonical import ACTOR_FACT_DOMAIN, canonical
from ledger.crypto.keys import Keyring, PublicKeyRecord, Role
from ledger.crypto.signing import Signer, verify_signature
from ledger.crypto.validity import key_problem
from ledger.errors import FindingKind, InvalidCommandError, VerificationError, with_article

FORGED = FindingKind.ALTERED


class ActorSignature(TypedDict):
    key_id: str
    signature: str  # base64


def sign_fact(signer: Signer, fact: dict[str, Any], role: Role) -> ActorSignature:
    if signer.role is not role:
        raise InvalidCommandError(
            f"this needs {with_article(role.value)} key, not {with_article(signer.role.value)} key",
            code="key_refused",
        )
    signature = signer.sign(ACTOR_FACT_DOMAIN + canonical(fact))
    return {"key_id": signer.key_id, "signature": base64.b64encode(signature).decode()}


def actor_signature(source: dict[str, Any]) -> ActorSignature:
    """The signature fields of a reported fact's source (empty when absent)."""
    return {"key_id": str(source.get("key_id", "")), "signature": str(source.get("signature", ""))}


def check_fact_signature(
    keyring: Keyring, fact: dict[str, Any], signed: ActorSignature, role: Role, where: str
) -> PublicKeyRecord:
    """An actor's signature over `fact` by a key of `role` in `keyring` (not yet
    whether the key may sign at the fact's time: `verify_fact` does both)."""
    record = keyring.get(signed["key_id"])
    if record is None:
        raise VerificationError("signed by a key not in the keyring", where=where, kind=FORGED)
    if record.role is not role:
        raise VerificationError(
            f"signed by {with_article(record.role.value)} key, not {role.value}",
            where=where,
            kind=FORGED,
        )
    try:
        signature = base64.b64decode(signed["signature"], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise VerificationError("malformed actor signature", where=where, kind=FORGED) from exc
    if not verify_signature(record.public_key, ACTOR_FACT_DOMAIN + canonical(fact), signature):
        raise VerificationError(f"bad {role.value} signature", where=where, kind=FORGED)
    return record


def verify_fact(
    keyring: Keyring,
    fact: dict[str, Any],
    signed: ActorSignature,
    role: Role,
    where: str,
    *,
    at: int,
    covered_at: int | None = None,
    covered_size: int | None = None,
) -> PublicKeyRecord:
    """Check an actor's signature over `fact`: a key of `role` in `keyring`, its
    signature, and that the key may sign at `at` (µs) for an event first
    covered by a checkpoint issued at `covered_at` (`ledger.crypto.validity`:
    a revoked key signs nothing but what a checkpoint older than its
    revocation covers). Returns the signer's keyring entry."""
    record = check_fact_signature(keyring, fact, signed, role, where)
    problem = key_problem(record, at, covered_at, covered_size)
    if problem is not None:
        raise VerificationError(
            f"{role.value} key {record.name}: {problem}", where=where, kind=FORGED
        )
    return record
