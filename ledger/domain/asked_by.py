"""Who asked the node for a command-sourced action: `{"token": id, "role": role}`.

Every command asked through a session records it with its request, as
`asked_by` (`Request.Completed`, or the `Round.BetPlaced` recording a bet's
request); None there is the node's own command (the CLI, the Python API).

On an electronic table a decision (stand, check, stop...) is the node's own
command; when the command came through the HTTP API the node records which
authenticated session asked for it, as `source["by"]`. That is the node's
statement, sealed under the node's own signature like the rest of the event,
not a signature of the player: it tells an auditor which token asked, and it is
only as trustworthy as the node. One shape, checked by the casino before it
records and by `ledger verify` after.
"""

from __future__ import annotations

from typing import Any

from ledger.domain.api_roles import ApiRole

MAX_TOKEN_ID = 64
ROLES = frozenset(role.value for role in ApiRole)


def asked_by(token: str, role: str) -> dict[str, str]:
    """The `by` of a command-sourced action, or `ValueError` saying what is wrong."""
    by = {"token": token, "role": role}
    problem = by_problem(by)
    if problem is not None:
        raise ValueError(problem)
    return by


def by_problem(by: Any) -> str | None:
    """What is wrong with a recorded `by`, or None when it is exactly
    {"token": 1..64 characters, "role": an API role}."""
    if not isinstance(by, dict) or set(by) != {"token", "role"}:
        shown = sorted(by) if isinstance(by, dict) else type(by).__name__
        return f"its 'by' must be exactly {{token, role}}, got {shown}"
    token, role = by["token"], by["role"]
    if not isinstance(token, str) or not 0 < len(token) <= MAX_TOKEN_ID:
        return f"its 'by' token must be 1..{MAX_TOKEN_ID} characters, got {token!r}"
    if not isinstance(role, str) or role not in ROLES:
        return f"its 'by' role must be one of {', '.join(sorted(ROLES))}, got {role!r}"
    return None


def describe_by(source: dict[str, Any]) -> str | None:
    """Who asked for a command-sourced action or an RNG draw (a hit), for a person;
    None for other sources and for draws no session asked for."""
    kind = source.get("kind")
    if kind not in ("command", "rng") or (kind == "rng" and "by" not in source):
        return None
    return describe_asked(source.get("by"))


def describe_asked(by: Any) -> str:
    """Who asked, for a person: a command's recorded `asked_by` (or an action's
    `by`), None being the node's own command."""
    if by is None:
        return "node command"
    if by_problem(by) is not None:
        return f"by a malformed attestation {by!r}"
    return f"by token {by['token']} (role {by['role']})"
