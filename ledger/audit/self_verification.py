"""A running node's own verification, on a schedule (GLI-19: at least every
24 hours): `ledger serve` and `ledger checkpoint --follow` run it in a
process of their own (`ledger.http.self_verification_process`).

Each run is `ledger verify` at level settlement, in one process, resumed
from the state the last clean run saved (`verify --resume`: the rows before
it re-read and re-hashed, so an edit there is still caught; everything after
it checked in full); the first run of a node verifies everything, and so
does a run after a resumed one found something (to name the event, where the
resumed run names the chunk of old rows that changed). A run with a finding
saves no state, so every later run goes on from the last clean one
and finds it again until it is dealt with. Each run is recorded in the log
(`ledger.audit.record.record_self_run`, sealed by the node's key) and left in
a status file the health endpoint reads (`ledger.audit.self_status`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.audit.findings import Findings
from ledger.audit.level import Level
from ledger.audit.record import failed_run, passed_run, record_self_run
from ledger.audit.self_status import SelfStatus
from ledger.audit.verify import Sinks, VerificationReport, VerifyOptions, verify_store
from ledger.audit.verify_state import STATE_FILE, VerifyState
from ledger.crypto.envelope import now_micros
from ledger.crypto.keys import Keyring
from ledger.errors import CannotCheckError, LedgerError, StateOutdatedError, VerificationError
from ledger.plugins.registry import LoadedGame
from ledger.store.application import LedgerApplication

log = logging.getLogger("ledger.self-verification")

LEVEL = Level.SETTLEMENT  # what an auditor's `ledger verify` checks by default
FIRST_RUN_AFTER = 300  # seconds after the node starts, or one period if shorter
RETRY_AFTER = 60  # seconds, after a run that could not be made (the store away)


@dataclass(frozen=True)
class SelfRun:
    """One run, as recorded: the run's fact, its first finding (None: passed)."""

    run: dict[str, Any]
    finding: str | None
    findings: int


class SelfVerifier:
    """The node's verification of its own store, each run going on from the last clean one."""

    def __init__(
        self, app: LedgerApplication, games: Mapping[str, LoadedGame], state_dir: Path
    ) -> None:
        self.app, self.games, self.state_dir = app, games, state_dir

    def run_once(self) -> SelfRun:
        """Verify what is new (everything, the first time), record the run, say what it found."""
        keyring = self.app.current_keyring()
        fingerprint = keyring.fingerprint()
        started = now_micros()
        resume = VerifyState.load(self.state_dir) if self._has_state() else None
        try:
            try:
                report, found = self._verify(keyring, resume)
            except StateOutdatedError:  # events it covers were archived since: in full
                resume = None
                report, found = self._verify(keyring, None)
            if found and resume is not None:
                # A resumed run names the chunk of old rows that changed, not the
                # event: verify in full once, so the log names what was found.
                report, found = self._verify(keyring, None)
        except (VerificationError, CannotCheckError) as exc:  # (a sink keeps most of them)
            size = self.app.tables.event_count()[0]
            run = failed_run(LEVEL.value, size, str(exc), fingerprint, started)
            return self._recorded(run, str(exc), 1)
        headline = found.headline()
        if headline is None:
            assert report.state is not None  # (saved by a run with no finding)
            report.state.save(self.state_dir, report.rounds)
            return self._recorded(passed_run(report, fingerprint, started), None, 0)
        more = len(found) - 1
        message = str(headline) + (f" (and {more} more finding{'s' * (more > 1)})" if more else "")
        run = failed_run(LEVEL.value, report.events, message, fingerprint, started)
        run["counts"] = {
            "events": report.events,
            "streams": report.streams,
            "checkpoints": report.checkpoints,
            "findings": len(found),
        }
        return self._recorded(run, message, len(found))

    def _verify(
        self, keyring: Keyring, resume: VerifyState | None
    ) -> tuple[VerificationReport, Findings]:
        options = VerifyOptions(
            level=LEVEL, workers=1, games=self.games, resume=resume, save_state=True
        )
        found = Findings()
        return verify_store(self.app, keyring, options, Sinks(findings=found)), found

    def _has_state(self) -> bool:
        return (self.state_dir / STATE_FILE).is_file()

    def _recorded(self, run: dict[str, Any], finding: str | None, findings: int) -> SelfRun:
        record_self_run(self.app, run)
        return SelfRun(run, finding, findings)


def follow_schedule(
    run_once: Callable[[], SelfRun],
    every: float,
    stop: Callable[[], bool],
    status: SelfStatus | None = None,
    poll: float = 0.2,
) -> None:
    """Run `run_once` every `every` seconds (the first after `FIRST_RUN_AFTER`
    or one period, whichever is shorter) until `stop()`; each outcome logged
    in one line and left in `status`. A run that cannot be made (the store
    away) is logged and tried again after `RETRY_AFTER` seconds or one period."""
    due = time.monotonic() + min(every, FIRST_RUN_AFTER)
    while not stop():
        if time.monotonic() < due:
            time.sleep(poll)
            continue
        started = time.monotonic()
        try:
            outcome = run_once()
        except LedgerError as exc:
            log.error("self-verification could not run: %s", exc)
            due = time.monotonic() + min(every, RETRY_AFTER)
            continue
        due = started + every
        _tell(outcome, status)


def _tell(outcome: SelfRun, status: SelfStatus | None) -> None:
    """The one line the node's log gets, and the status the health endpoint reads."""
    run = outcome.run
    if outcome.finding is None:
        log.info(
            "self-verification passed: %d events at level %s, recorded in the log",
            run["tree_size"],
            run["level"],
        )
    else:
        log.error(
            "self-verification FAILED over %d events: %s (recorded in the log)",
            run["tree_size"],
            outcome.finding,
        )
    if status is not None:
        status.write(run["result"], run["tree_size"], run["verified_at"], outcome.finding)
