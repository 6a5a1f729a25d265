"""A bundle's newest checkpoint with every cosignature the bundle holds for it
(checkpoints.jsonl carries a cosigned checkpoint as a second line of the same
size: ledger.export.writer), for `verify --bundle --witness-policy`."""

from __future__ import annotations

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.crypto.witness_policy import with_cosignatures
from ledger.errors import VerificationError
from ledger.export.reader import Bundle, parse_checkpoint


def newest_cosigned(bundle: Bundle, keyring: Keyring) -> Checkpoint | None:
    """The largest valid checkpoint, with the signature lines of the bundle's
    other notes of that exact text (not verified here: the policy does)."""
    valid: list[Checkpoint] = []
    for _, note, label in bundle.checkpoints():
        try:
            checkpoint = parse_checkpoint(note, label)
            checkpoint.verify(keyring)
        except VerificationError:
            continue  # verify_bundle reports it; it is no cosigned checkpoint
        valid.append(checkpoint)
    if not valid:
        return None
    size = max(c.size for c in valid)
    same = [c for c in valid if c.size == size]
    return with_cosignatures(same[0], [c.to_note() for c in same[1:]])
