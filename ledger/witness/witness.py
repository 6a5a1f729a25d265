"""The witness's one decision (C2SP tlog-witness `add-checkpoint`): cosign a
checkpoint only when its log's key signed it and it extends, by a verified
consistency proof, the last checkpoint this witness cosigned for the origin.

Answers, as the spec orders the checks:

- 400: a malformed request, or an old size beyond the checkpoint's size;
- 404: an origin this witness does not follow;
- 403: no signature line verifies against the log keys configured for it;
- 409 `text/x.tlog.size`: the old size is not the size it last cosigned (the
  body says which); 409 `text/plain`: the same size with another root (a
  split view);
- 422: the consistency proof does not verify (the log does not extend what
  was cosigned: a fork, or a bad proof);
- 200: the cosignature line(s), once the new checkpoint is stored.

409 on a root and 422 are kept in the witness's state as evidence.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ledger.crypto.cosignature import cosign
from ledger.crypto.keys import Role
from ledger.crypto.merkle import HASH_SIZE, verify_consistency
from ledger.crypto.note import (
    KEY_HASH_SIZE,
    NoteError,
    SignatureLine,
    key_hash,
    split_note,
    strict_b64decode,
)
from ledger.crypto.signing import NamedSigner, verify_signature
from ledger.crypto.witness_wire import SIZE_CONTENT_TYPE, AddCheckpoint, encode_size
from ledger.errors import ConfigError, VerificationError
from ledger.witness.state import Known, WitnessState

_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")
_TEXT = "text/plain; charset=utf-8"
LogKeys = Mapping[str, Sequence[tuple[str, bytes]]]  # origin -> [(key name, public key)]


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: bytes

    @classmethod
    def text(cls, status: int, message: str) -> Answer:
        return cls(status, _TEXT, (message + "\n").encode())


@dataclass(frozen=True)
class _Checkpoint:
    origin: str
    size: int
    root: bytes
    text: str
    lines: list[SignatureLine]


def _parse(note: str) -> _Checkpoint:
    """A C2SP checkpoint (origin, size, root, extension lines) and its signatures."""
    text, lines = split_note(note)
    body = text.split("\n")[:-1]
    if len(body) < 3:
        raise NoteError("a checkpoint has an origin, a tree size and a root hash line")
    origin, size, root_text = body[:3]
    if not origin:
        raise NoteError("the origin line is empty")
    if not _DECIMAL.fullmatch(size) or int(size) > 2**63 - 1:
        raise NoteError(f"tree size {size!r} is not a decimal number without leading zeros")
    root = strict_b64decode(root_text, "the root hash")
    if len(root) != HASH_SIZE:
        raise NoteError("the root hash is not 32 bytes")
    if any(not line for line in body[3:]):
        raise NoteError("an empty extension line")
    return _Checkpoint(origin, int(size), root, text, lines)


class Witness:
    def __init__(
        self,
        name: str,
        signer: NamedSigner,
        logs: LogKeys,
        state: WitnessState,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if signer.role is not Role.WITNESS:
            # The log's own key (or an operator's) cosigning would be the house
            # vouching for itself.
            raise ConfigError(f"a witness signs with a witness key, not {signer.role.value}")
        try:
            key_hash(name, signer.public_key)  # a name a signature line can carry
        except NoteError as exc:
            raise ConfigError(f"witness name: {exc}") from None
        self.name = name
        self.signer = signer
        self.logs = logs
        self.state = state
        self.clock = clock

    def add_checkpoint(self, body: bytes) -> Answer:
        try:
            request = AddCheckpoint.decode(body)
            checkpoint = _parse(request.note)
        except NoteError as exc:
            return Answer.text(400, f"malformed add-checkpoint request: {exc}")
        keys = self.logs.get(checkpoint.origin)
        if keys is None:
            return Answer.text(404, f"this witness does not follow the log {checkpoint.origin!r}")
        if not self._signed_by_log(checkpoint, keys):
            return Answer.text(
                403, f"no signature of a key of log {checkpoint.origin!r} verifies on it"
            )
        if request.old_size > checkpoint.size:
            return Answer.text(
                400, f"old size {request.old_size} is beyond the checkpoint's {checkpoint.size}"
            )
        refused: list[tuple[int, str]] = []

        def decide(known: Known) -> tuple[Answer, tuple[int, bytes, str] | None]:
            if request.old_size != known.size:
                return Answer(409, SIZE_CONTENT_TYPE, encode_size(known.size)), None
            if known.root is not None and request.old_size == checkpoint.size:
                if known.root != checkpoint.root:
                    reason = (
                        f"split view: this witness cosigned size {known.size} with another "
                        "root; refused"
                    )
                    refused.append((409, reason))
                    return Answer.text(409, reason), None
                if request.proof:
                    return Answer.text(422, "the proof between equal sizes is empty"), None
            elif known.root is None:
                if request.proof:
                    return Answer.text(422, "the proof must be empty from size 0"), None
            else:
                try:
                    verify_consistency(
                        known.size,
                        checkpoint.size,
                        list(request.proof),
                        known.root,
                        checkpoint.root,
                    )
                except (VerificationError, ValueError) as exc:
                    reason = (
                        f"not consistent with the checkpoint of size {known.size} this witness "
                        f"cosigned ({exc}): the log does not extend it; refused"
                    )
                    refused.append((422, reason))
                    return Answer.text(422, reason), None
            line = cosign(
                checkpoint.text, self.name, self.signer, self.signer.public_key, int(self.clock())
            )
            answer = Answer(200, _TEXT, line.format().encode())
            return answer, (checkpoint.size, checkpoint.root, request.note)

        answer = self.state.advance(checkpoint.origin, decide)
        for status, reason in refused:
            self.state.refuse(checkpoint.origin, status, reason, body.decode())
        return answer

    @staticmethod
    def _signed_by_log(checkpoint: _Checkpoint, keys: Sequence[tuple[str, bytes]]) -> bool:
        message = checkpoint.text.encode()
        for name, public_key in keys:
            expected = key_hash(name, public_key)
            for line in checkpoint.lines:
                if (
                    line.name == name
                    and len(line.blob) == KEY_HASH_SIZE + 64
                    and line.blob[:KEY_HASH_SIZE] == expected
                    and verify_signature(public_key, message, line.blob[KEY_HASH_SIZE:])
                ):
                    return True
        return False
