"""The body of a C2SP tlog-witness `add-checkpoint` request, both ways:

    old <size>\\n
    <base64 hash>\\n          zero to 63 consistency proof lines
    \\n
    <the checkpoint note>

and the witness's `409 Conflict` answer, its latest cosigned size
(`text/x.tlog.size`: the decimal size and a newline).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from ledger.crypto.merkle import HASH_SIZE
from ledger.crypto.note import NoteError, strict_b64decode

MAX_PROOF_LINES = 63
SIZE_CONTENT_TYPE = "text/x.tlog.size"
_DECIMAL = re.compile(r"0|[1-9][0-9]{0,18}")
_MAX_SIZE = 2**63 - 1


@dataclass(frozen=True)
class AddCheckpoint:
    old_size: int
    proof: tuple[bytes, ...]
    note: str

    def encode(self) -> bytes:
        lines = [f"old {self.old_size}\n"]
        lines += [base64.b64encode(node).decode() + "\n" for node in self.proof]
        return ("".join(lines) + "\n" + self.note).encode()

    @classmethod
    def decode(cls, body: bytes) -> AddCheckpoint:
        """Strictly: anything else raises `NoteError` (the witness answers 400)."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise NoteError("the request is not UTF-8 text") from None
        head, sep, note = text.partition("\n\n")
        if not sep:
            raise NoteError("no empty line between the old size and proof, and the checkpoint")
        lines = head.split("\n")
        first = lines[0]
        if not first.startswith("old ") or not _DECIMAL.fullmatch(first[4:]):
            raise NoteError("the first line is not 'old <size>' (decimal, no leading zeros)")
        old_size = int(first[4:])
        if old_size > _MAX_SIZE:
            raise NoteError("the old size is beyond 2^63-1")
        if len(lines) - 1 > MAX_PROOF_LINES:
            raise NoteError(f"more than {MAX_PROOF_LINES} consistency proof lines")
        proof = []
        for number, line in enumerate(lines[1:], start=1):
            node = strict_b64decode(line, f"proof line {number}")
            if len(node) != HASH_SIZE:
                raise NoteError(f"proof line {number} is not a {HASH_SIZE}-byte hash")
            proof.append(node)
        return cls(old_size, tuple(proof), note)


def encode_size(size: int) -> bytes:
    return f"{size}\n".encode()


def decode_size(body: bytes) -> int:
    """A `text/x.tlog.size` body."""
    text = body.decode("ascii", errors="replace")
    if not text.endswith("\n") or not _DECIMAL.fullmatch(text[:-1]):
        raise NoteError(f"not a tree size: {text[:40]!r}")
    return int(text[:-1])
