"""C2SP tlog-proof (https://c2sp.org/tlog-proof): one entry's inclusion in the
log, in one offline file.

    c2sp.org/tlog-proof@v1
    extra <base64 of the entry>        (optional, unauthenticated)
    index <the entry's 0-based index>
    <base64 proof hash>                (zero or more: RFC 6962/9162 audit path, leaf side first)
    <empty line>
    <the checkpoint note, verbatim>

The ledger puts the entry itself (the event's envelope header, whose RFC 9162
leaf hash is in the tree) in the `extra` line, so a proof stands alone; it is
trusted only once its leaf hash, index and path lead to the root of a
checkpoint whose signature verifies (`TlogProof.check`). Parsing is strict,
one spelling per proof: the files are the attacker's to edit.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import HASH_SIZE, hash_leaf, root_from_inclusion
from ledger.crypto.note import NoteError, strict_b64decode
from ledger.errors import VerificationError

MAGIC = "c2sp.org/tlog-proof@v1"
SUFFIX = ".tlog-proof"
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class TlogProof:
    index: int
    proof: tuple[bytes, ...]
    note: str  # the checkpoint, verbatim
    extra: bytes | None = None

    def format(self) -> str:
        lines = [MAGIC]
        if self.extra is not None:
            lines.append(f"extra {base64.b64encode(self.extra).decode()}")
        lines.append(f"index {self.index}")
        lines += [base64.b64encode(h).decode() for h in self.proof]
        return "\n".join(lines) + "\n\n" + self.note

    @classmethod
    def parse(cls, text: str) -> TlogProof:
        """The proof `text` holds, in its one canonical spelling; else `VerificationError`."""
        head, separator, note = text.partition("\n\n")
        if not separator:
            raise VerificationError("no empty line before the checkpoint")
        lines = head.split("\n")
        if lines[0] != MAGIC:
            raise VerificationError(f"the first line is not {MAGIC!r}")
        rest = lines[1:]
        try:
            extra = None
            if rest and rest[0].startswith("extra "):
                extra = strict_b64decode(rest.pop(0).removeprefix("extra "), "the extra data")
            if not rest or not rest[0].startswith("index "):
                raise VerificationError("no 'index' line")
            number = rest.pop(0).removeprefix("index ")
            if not _DECIMAL.fullmatch(number) or int(number) > 2**63 - 1:
                raise VerificationError(f"index {number!r} is not a decimal number")
            proof = []
            for position, line in enumerate(rest, 1):
                decoded = strict_b64decode(line, f"proof hash {position}")
                if len(decoded) != HASH_SIZE:
                    raise VerificationError(f"proof hash {position} is not {HASH_SIZE} bytes")
                proof.append(decoded)
        except NoteError as exc:
            raise VerificationError(str(exc)) from None
        Checkpoint.from_note(note)  # well formed (its signature is `check`'s to judge)
        return cls(int(number), tuple(proof), note, extra)

    @property
    def checkpoint(self) -> Checkpoint:
        return Checkpoint.from_note(self.note)

    def check(self, leaf_hash: bytes, keyring: Keyring, *, origin: str | None = None) -> Checkpoint:
        """The checkpoint under which `leaf_hash` is entry `index`, once its
        signature verifies with `keyring` and the path leads to its root."""
        checkpoint = self.signed_checkpoint(keyring, origin=origin)
        self.check_path(leaf_hash, checkpoint)
        return checkpoint

    def signed_checkpoint(self, keyring: Keyring, *, origin: str | None = None) -> Checkpoint:
        """The proof's checkpoint, once its signature verifies with `keyring`."""
        checkpoint = self.checkpoint
        checkpoint.verify(keyring, origin=origin)
        return checkpoint

    def check_path(self, leaf_hash: bytes, checkpoint: Checkpoint) -> None:
        """The entry is `leaf_hash`'s, and the path leads from it to `checkpoint`'s root."""
        if self.extra is not None and hash_leaf(self.extra) != leaf_hash:
            raise VerificationError("its extra data is not the entry")
        root = root_from_inclusion(self.index, checkpoint.size, leaf_hash, self.proof)
        if root != checkpoint.root:
            raise VerificationError(
                f"the path from entry {self.index} does not lead to the root of the checkpoint "
                f"of size {checkpoint.size}"
            )
