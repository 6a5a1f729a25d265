"""The times `ledger verify` judges signing keys by: checkpoints' issue times,
and checkpoint keys' revocations."""

from __future__ import annotations

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring, to_micros
from ledger.errors import VerificationError


def checkpoint_times(checkpoints: list[Checkpoint], keyring: Keyring) -> list[tuple[int, int]]:
    """(size, issued_at µs) per size, ascending, of checkpoints whose signature
    already verified; each also checked against its key's revocation (a
    checkpoint key revoked at R signs nothing valid from R on). For two of one
    size, the earlier time: both are signed evidence the events existed then."""
    earliest: dict[int, int] = {}
    for checkpoint in checkpoints:
        label = f"checkpoint of size {checkpoint.size}"
        issued_at = checkpoint.issued_at
        if issued_at.tzinfo is None or issued_at.utcoffset() is None:
            raise VerificationError("its time has no time zone", where=label)
        record = checkpoint.key_record(keyring)
        if record is not None and record.revoked_at and issued_at >= record.revoked_at:
            raise VerificationError(
                f"signed at {issued_at.isoformat()} by a checkpoint key revoked at "
                f"{record.revoked_at.isoformat()}",
                where=label,
            )
        micros = to_micros(issued_at)
        earliest[checkpoint.size] = min(micros, earliest.get(checkpoint.size, micros))
    return sorted(earliest.items())
