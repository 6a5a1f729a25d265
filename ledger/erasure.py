"""Erasing a data subject (`ledger erase`): an operator-signed event in the
erasure register, then the subject's key destroyed (docs/privacy.md).

The event holds the subject's id and the reason, never a personal value; it
is recorded first, so an erasure is never lost: a crash after the event and
before the key is gone is finished by `finish_erasures` (the next erase, and
every writable `open_ledger`: every command that writes, `serve`). Every
signed byte stays as it was: the sealed values no longer open, and every
proof still verifies.
(`ledger.revocation` is its sibling: the key registry's one command.)
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from ledger.crypto.actor import sign_fact
from ledger.crypto.envelope import now_micros
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.crypto.validity import operator_may_sign_now
from ledger.domain.account import Account
from ledger.domain.erasures import ERASURES_ID, Erasures, erasure_fact
from ledger.domain.names import MAX_TEXT, check_name
from ledger.errors import InvalidCommandError, NotFoundError
from ledger.privacy.personal import PersonalData
from ledger.privacy.subject_keys import check_subject
from ledger.store.application import LedgerApplication


@dataclass(frozen=True)
class Erased:
    subject: str
    operator_key: str  # the key id that signed the erasure
    key_destroyed: bool  # False: this node held no key for it (recorded all the same)


def erase_subject(
    app: LedgerApplication, personal: PersonalData, subject: str, reason: str, operator: Signer
) -> Erased:
    """Record the erasure of `subject`, signed by `operator`, then destroy its key.
    Refused (nothing recorded, no key touched): an unknown subject, one already
    erased, an empty reason, a key that is not a valid operator key now."""
    subject = check_subject(subject)
    reason = check_name(reason, "--reason", limit=MAX_TEXT, param="reason")
    register = _register(app)
    finish_erasures(app, personal, register)
    if subject in register.erased:
        raise InvalidCommandError(
            f"data subject {subject} is already erased", code="already_erased"
        )
    if not personal.holds(subject):
        raise NotFoundError(_not_held(app, subject))
    operator_may_sign_now(app.signing_keyring(), operator.key_id, now_micros())
    signature = sign_fact(operator, erasure_fact(subject, reason), Role.OPERATOR)
    register.erase(
        subject=subject,
        reason=reason,
        operator={"key_id": signature["key_id"], "signature": signature["signature"]},
    )
    app.save(register)
    return Erased(subject, operator.key_id, personal.erase(subject))


def _not_held(app: LedgerApplication, subject: str) -> str:
    """Why there is nothing to erase for `subject`: an account whose owner the
    log holds in clear says so (a house account, or a store written before
    sealing), any other names no subject this node holds a key for."""
    kind, _, account_id = subject.partition("-")
    if kind == "account":
        account: object = None
        with contextlib.suppress(AggregateNotFoundError, ValueError):  # no such account
            account = app.repository.get(UUID(account_id))
        if isinstance(account, Account) and isinstance(account.owner, str):
            return (
                f"account {account_id}'s owner is recorded in clear (a table's house account, "
                "or a store written before sealing): nothing sealed to erase "
                "(ledger privacy report lists such values)"
            )
    return f"no data subject {subject} on this node (no key is held for it)"


def finish_erasures(
    app: LedgerApplication, personal: PersonalData, register: Erasures | None = None
) -> list[str]:
    """Destroy the key of every subject the register says is erased and whose key
    is still here (a crash between the event and the key): those subjects."""
    if register is None:
        register = _register(app)
    return [s for s in register.erased if personal.holds(s) and personal.erase(s)]


def erased_subjects(app: LedgerApplication) -> frozenset[str]:
    """The subjects the log's erasure register says are erased (as the node's
    repository reads it: `ledger verify` checks each erasure's signature)."""
    return frozenset(_register(app).erased)


def _register(app: LedgerApplication) -> Erasures:
    try:
        found: Erasures = app.repository.get(ERASURES_ID)
    except AggregateNotFoundError:
        return Erasures()
    return found
