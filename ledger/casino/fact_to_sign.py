"""The exact bytes an operator signs for a void, a resume or a correction,
before they sign it: the command runs as a dry run with a signer that keeps
what it was asked to sign, so the bytes are the command's own and a command
that would be refused is refused now, with nothing recorded."""

from __future__ import annotations

from typing import Any, Literal

from ledger.casino import corrections, rounds
from ledger.casino.context import Context
from ledger.casino.runner import Body
from ledger.crypto.keys import Role
from ledger.errors import InvalidCommandError

OperatorCommand = Literal["void", "resume", "correct", "correct_step"]
_PLACEHOLDER = bytes(64)  # never verified, never kept: the dry run saves nothing


class FactRecorder:
    """A `Signer` for the operator key `key_id` that keeps the message it is
    asked to sign."""

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id
        self.role = Role.OPERATOR
        self.message: bytes | None = None

    def sign(self, message: bytes) -> bytes:
        self.message = message
        return _PLACEHOLDER


def operator_body(
    context: Context,
    command: OperatorCommand,
    round_id: str,
    reason: str,
    signer: FactRecorder,
    *,
    outcome: dict[str, Any] | None = None,
    step: int | None = None,
    drawn: list[int] | None = None,
) -> Body:
    """The command's body, signing with `signer`."""
    if command == "void":
        return rounds.void_round(context, round_id, reason, signer)
    if command == "resume":
        return rounds.resume_round(context, round_id, reason, signer)
    if command == "correct":
        return corrections.correct(context, round_id, outcome or {}, reason, signer)
    if step is None or drawn is None:
        raise InvalidCommandError(
            "a step correction needs its step and drawn", code="invalid_value"
        )
    return corrections.correct_step(context, round_id, step, drawn, reason, signer)
