"""When a key may sign: the one rule every signature check of the ledger calls.

A key signs validly at time `at` (integer µs since the epoch) when `at` lies
inside its validity period and, if the key is revoked, the signature is
proven older than the revocation. A signing time is the signer's own word
(whoever holds a stolen key can back-date it); what cannot be moved under an
auditor who kept it is the issue time of a checkpoint that covers the signed
event. So a revoked key's signature counts only under a checkpoint issued
before the revocation; with no such checkpoint (a new command at the API, the
unanchored tail of the log) a revoked key signs nothing, whatever time it
claims.

The same rule judges node envelopes, checkpoints, operator facts (voids,
resumes, corrections, revocations), dealer device reports and auditor runs:
the API (`at` = now, nothing covering yet) and `ledger verify` (`at` = the
carrying event's signing time, `covered_at` = its first covering checkpoint).
"""

from __future__ import annotations

from ledger.crypto.keys import NEVER, Keyring, PublicKeyRecord, Role, from_micros
from ledger.errors import InvalidCommandError

Window = tuple[int, int, int]  # a key's (not_before, not_after, revoked_at) in µs; NEVER: none


def trusted_span(window: Window, covered_at: int | None) -> tuple[int, int]:
    """The signing times [low, high] this key's signatures are trusted at, for an
    event first covered by a checkpoint issued at `covered_at` (None: none yet).
    An empty span (high < low) when nothing the key signed there is trusted."""
    not_before, not_after, revoked_at = window
    high = not_after - 1
    if covered_at is not None and covered_at < high:
        high = covered_at  # signed no later than the checkpoint that covers it
    if revoked_at != NEVER and (covered_at is None or covered_at >= revoked_at):
        high = not_before - 1  # no checkpoint older than the revocation vouches for it
    return not_before, high


def signing_problem(
    at: int,
    window: Window,
    covered_at: int | None = None,
    covered_size: int | None = None,
) -> str | None:
    """Why a signature made at `at` by a key with `window` is not trusted, or None.

    `covered_at` is the issue time of the first checkpoint covering the signed
    event (of size `covered_size`), None when none covers it. A reader holding
    one event alone, with no checkpoint to judge it by, passes its own signing
    time as `covered_at` and no size: a revoked key's event is then trusted
    only as far as its own time is before the revocation (provisional: `ledger
    verify` judges it by the checkpoints)."""
    low, high = trusted_span(window, covered_at)
    if low <= at <= high:
        return None
    not_before, not_after, revoked_at = window
    if at < not_before:
        return f"signed at {_iso(at)}, before its key is valid (from {_iso(not_before)})"
    if at >= not_after:
        return f"signed at {_iso(at)}, after its key expired ({_iso(not_after)})"
    if revoked_at != NEVER and (covered_at is None or covered_at >= revoked_at):
        if at >= revoked_at:
            return f"signed at {_iso(at)}, after its key was revoked (at {_iso(revoked_at)})"
        if covered_at is not None and covered_size is None:  # judged by its own time
            return f"signed at {_iso(at)} by a key revoked at {_iso(revoked_at)}"
        first = (
            ""
            if covered_at is None
            else f" (the first that covers it, of size {covered_size}, was issued "
            f"{_iso(covered_at)})"
        )
        return (
            f"signed by a key revoked at {_iso(revoked_at)}, and no checkpoint issued "
            f"before the revocation covers it{first}"
        )
    return (
        f"signed at {_iso(at)}, later than the checkpoint of size {covered_size} "
        f"that covers it was issued ({_iso(covered_at or 0)})"
    )


def key_problem(
    record: PublicKeyRecord,
    at: int,
    covered_at: int | None = None,
    covered_size: int | None = None,
) -> str | None:
    """`signing_problem` for a keyring entry: why `record` may not sign at `at`."""
    return signing_problem(at, record.window_micros(), covered_at, covered_size)


def operator_may_sign_now(keyring: Keyring, key_id: str, now: int) -> PublicKeyRecord:
    """The keyring's operator key `key_id`, when it may sign at `now` (µs: valid,
    not revoked); else one clear refusal, before anything is recorded."""
    record = keyring.get(key_id)
    if record is None or record.role is not Role.OPERATOR:
        raise InvalidCommandError(
            f"key {key_id[:16]} is not an operator key in the keyring", code="key_refused"
        )
    problem = key_problem(record, now)
    if problem is not None:
        raise InvalidCommandError(
            f"operator key {record.name} may not sign now: {problem}", code="key_refused"
        )
    return record


def _iso(micros: int) -> str:
    try:
        return from_micros(micros).isoformat()
    except OverflowError:
        return f"{micros} µs since the epoch"
