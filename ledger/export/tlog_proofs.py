"""A round bundle's `tlog-proofs/`: one C2SP tlog-proof per event, named
`<log position>.tlog-proof`, against the checkpoint the bundle's inclusion
proofs are against (docs/tlog.md says how to check one by hand).

Each proof is checked on its own, as someone holding only that file and the
log's key would: its checkpoint's signature, its entry (the `extra` line) being
the event's header, its index being the event's log position, and the path
leading from the entry's leaf hash to the checkpoint's root. Then against the
bundle: its checkpoint must be one of the bundle's, the root the bundle's
checkpoint of its size states. A file valid alone can still show another log
than the bundle does (a checkpoint the real key signed for the same size and
another root, with a path to that root: a split view), and a checkpoint of a
size the bundle has none of is one nothing in the bundle ties to its log.

A whole-log bundle carries none: its roots are recomputed from its events.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import hash_leaf
from ledger.crypto.tlog_proof import SUFFIX, TlogProof
from ledger.errors import VerificationError
from ledger.export.bundle_files import CHECKPOINTS, TLOG_PROOFS


def proof_name(position: int) -> str:
    return f"{position}{SUFFIX}"


def write_tlog_proof(
    directory: Path, position: int, entry: bytes, path: list[bytes], note: str
) -> None:
    folder = directory / TLOG_PROOFS
    folder.mkdir(exist_ok=True)
    proof = TlogProof(position, tuple(path), note, extra=entry)
    (folder / proof_name(position)).write_text(proof.format(), encoding="utf-8")


def refuse_tlog_proofs(directory: Path) -> None:
    """A whole-log bundle holds no `tlog-proofs/`: one there is no part of it."""
    if (directory / TLOG_PROOFS).exists():
        raise VerificationError(
            f"bundle {TLOG_PROOFS}: a whole-log bundle carries no tlog-proofs (the ledger "
            "writes them in a round bundle only): they are no part of this bundle"
        )


def check_tlog_proofs(
    directory: Path,
    entries: Mapping[int, bytes],
    keyring: Keyring,
    checkpoints: Mapping[int, Checkpoint],
    *,
    origin: str | None,
) -> str | None:
    """Check the proof of every event (log position -> its header), each under one
    of the bundle's `checkpoints` (by size, their signatures verified); a line
    for the report, or None when the bundle has no `tlog-proofs/` (written
    before it existed)."""
    folder = directory / TLOG_PROOFS
    if not folder.exists():
        return None
    if not folder.is_dir():
        raise VerificationError(f"bundle {TLOG_PROOFS} is not a directory")
    names = {path.name for path in folder.iterdir()}
    extra = names - {proof_name(position) for position in entries}
    if extra:
        raise VerificationError(
            f"bundle {TLOG_PROOFS}/{min(extra)}: a file that is no event's proof in this bundle"
        )
    sizes = set()
    for position, header in entries.items():
        label = f"bundle {TLOG_PROOFS}/{proof_name(position)}"
        try:
            text = (folder / proof_name(position)).read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise VerificationError(f"{label} is missing (log position {position})") from None
        except UnicodeDecodeError:
            raise VerificationError(f"{label}: not UTF-8 text") from None
        except OSError as exc:  # a directory in its place, no permission
            raise VerificationError(f"{label} cannot be read ({exc.strerror})") from None
        try:
            proof = TlogProof.parse(text)
            if proof.index != position:
                raise VerificationError(f"its index is {proof.index}, not the event's {position}")
            if proof.extra is None:
                raise VerificationError("it carries no entry (no extra line)")
            if proof.extra != header:
                raise VerificationError("its entry is not the event's header")
            checkpoint = proof.signed_checkpoint(keyring, origin=origin)
            _one_of_the_bundles(checkpoint, checkpoints)
            proof.check_path(hash_leaf(header), checkpoint)
            sizes.add(checkpoint.size)
        except VerificationError as exc:
            raise VerificationError(f"{label}: {exc}") from None
    under = ", ".join(str(s) for s in sorted(sizes)) or "none"
    return (
        f"   {len(entries)} C2SP tlog-proofs ({TLOG_PROOFS}/) checked alone: each one's entry "
        f"is its event's header, at its log position, under a checkpoint of size {under} "
        f"whose signature verifies; and against the bundle: that checkpoint states the root "
        f"of the bundle's own of its size ({CHECKPOINTS}), no split view"
    )


def _one_of_the_bundles(checkpoint: Checkpoint, checkpoints: Mapping[int, Checkpoint]) -> None:
    """A proof's checkpoint states the root the bundle's checkpoint of its size states."""
    own = checkpoints.get(checkpoint.size)
    if own is None:
        sizes = ", ".join(str(size) for size in sorted(checkpoints)) or "none"
        raise VerificationError(
            f"its checkpoint of size {checkpoint.size} is none of the bundle's ({CHECKPOINTS} "
            f"holds sizes {sizes}): nothing ties it to the log the bundle shows"
        )
    if own.root != checkpoint.root:
        raise VerificationError(
            f"its checkpoint of size {checkpoint.size} states another root than the bundle's "
            f"checkpoint of that size ({CHECKPOINTS}), both signed by the log's key: a split "
            "view (two logs shown under one key)"
        )
