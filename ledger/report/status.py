"""The verification status the report states: what was checked, and against what.

Either the verifier ran now (`ledger report --verify`), and its own summary is
quoted with the newest checkpoint it checked the log against, or it did not,
and the report says "not verified" (what reading the log did check, every
event's envelope, signature and signer, is said too, and no more).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ledger.audit.proofs import newest_checkpoint
from ledger.audit.significant import SignificantEvent
from ledger.audit.verify import Level, Sinks, VerifyOptions, verify_store
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.errors import CannotCheckError, VerificationError
from ledger.plugins.registry import LoadedGame
from ledger.store.application import LedgerApplication


@dataclass(frozen=True)
class CheckpointInfo:
    origin: str
    size: int
    root: str  # base64, as in the note
    issued_at: str
    key_id: str  # the signing key as the note names it

    @classmethod
    def of(cls, checkpoint: Checkpoint) -> CheckpointInfo:
        return cls(
            checkpoint.origin,
            checkpoint.size,
            base64.b64encode(checkpoint.root).decode(),
            checkpoint.issued_at.isoformat(),
            checkpoint.key_label,
        )


@dataclass(frozen=True)
class Status:
    verdict: str  # "verified", "FAILED", "could not check", "not verified"
    lines: list[str] = field(default_factory=list)  # what was checked, in the verifier's words
    checkpoint: CheckpointInfo | None = None  # what the log was checked against (or found)
    keyring: str = ""  # the keyring's fingerprint the verdict rests on
    exit_code: int = 0  # what `ledger verify` would exit with for this verdict

    @property
    def failed(self) -> bool:
        return self.verdict in ("FAILED", "could not check")


READ_CHECKS = (
    "Reading the log for this report checked every event against its sealed envelope: "
    "the row (stream, version, event type, payload hash), the Ed25519 signature and the "
    "signer's key validity. Chains, Merkle roots, checkpoints and settlements were not "
    "checked, so a deleted or reordered event would not be seen: run `ledger report "
    "--verify` or `ledger verify`."
)


def not_verified(
    app: LedgerApplication,
    keyring: Keyring,
    recorded: SignificantEvent | None = None,
    self_run: SignificantEvent | None = None,
) -> Status:
    """Not verified by this report; the newest recorded `verify --record` run
    quoted, and the newest of the node's own scheduled runs."""
    newest = newest_checkpoint(app, keyring)
    lines = [READ_CHECKS]
    if recorded is None:
        lines.append("No verification run is recorded in the log.")
    else:
        run = recorded.details
        lines.append(
            f"The newest verification run recorded in the log (log position {recorded.position}, "
            f"signed {recorded.at.isoformat()}, auditor key {run.get('auditor_key_id')}): "
            f"{recorded.summary}. This report did not re-check it (`ledger verify` checks "
            f"every recorded run), and events after log position {run.get('tree_size')} are "
            "not covered by it."
        )
    if self_run is not None:
        lines.append(
            f"The node's newest self-verification (log position {self_run.position}, signed "
            f"{self_run.at.isoformat()} by its ledger-node key, not an auditor's): "
            f"{self_run.summary}. This report did not re-check it either."
        )
    return Status(
        "not verified",
        lines,
        CheckpointInfo.of(newest) if newest else None,
        keyring.fingerprint(),
    )


def run_verifier(
    app: LedgerApplication,
    keyring: Keyring,
    level: Level,
    games: Mapping[str, LoadedGame] | None,
    progress: Callable[[int], None] | None = None,
) -> Status:
    """Run `ledger verify`'s checks now; a failure is a status, not an exception."""
    fingerprint = keyring.fingerprint()
    try:
        report = verify_store(
            app, keyring, VerifyOptions(level=level, games=games), sinks=Sinks(progress=progress)
        )
    except VerificationError as exc:
        return Status("FAILED", [str(exc)], None, fingerprint, exc.exit_code)
    except CannotCheckError as exc:
        return Status("could not check", [str(exc)], None, fingerprint, exc.exit_code)
    newest = newest_checkpoint(app, keyring)
    return Status(
        "verified",
        report.summary().splitlines(),
        CheckpointInfo.of(newest) if newest else None,
        fingerprint,
    )
