"""Keeping the log anchored: a bounded window of events not yet under a checkpoint.

Certificate transparency's maximum merge delay is the model: every writing
node runs an `Anchor`, a background thread woken by its writes, which signs a
checkpoint at most `seconds` after a write, or as soon as `events` events are
waiting. A node killed at any point leaves at most that window unanchored; a
clean close anchors everything it wrote.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ledger.errors import ConfigError, LedgerError
from ledger.store.checkpointer import Checkpointer

SECONDS_ENV = "LEDGER_ANCHOR_SECONDS"
EVENTS_ENV = "LEDGER_ANCHOR_EVENTS"
# One Ed25519 signature and one small transaction a second is noise next to
# the writes it anchors, and one second is a window an auditor can state.
DEFAULT_SECONDS = 1.0
DEFAULT_EVENTS = 1000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnchorSettings:
    """`seconds` after a write, or `events` waiting, whichever first (0 disables either)."""

    seconds: float = DEFAULT_SECONDS
    events: int = DEFAULT_EVENTS

    @property
    def enabled(self) -> bool:
        return self.seconds > 0 or self.events > 0

    @classmethod
    def resolve(cls, seconds: float | None, events: int | None) -> AnchorSettings:
        """Explicit values first, then the environment, then the defaults."""
        if seconds is None:
            seconds = _env_number(SECONDS_ENV, DEFAULT_SECONDS, float)
        if events is None:
            events = int(_env_number(EVENTS_ENV, DEFAULT_EVENTS, int))
        if seconds < 0 or events < 0:
            raise ConfigError("anchor window settings must be 0 (off) or positive")
        return cls(float(seconds), int(events))


def _env_number(name: str, default: float, kind: type[float] | type[int]) -> float:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected a number (0 turns it off)") from None
    if value < 0:
        raise ConfigError(f"{name}={text!r}: expected 0 (off) or a positive number")
    return value


class Anchor:
    """A background checkpointer driven by this node's writes."""

    def __init__(
        self,
        checkpointer: Checkpointer,
        settings: AnchorSettings,
        store_open: Callable[[], bool] = lambda: True,
    ) -> None:
        self._checkpointer = checkpointer
        self._store_open = store_open  # false once the application is closed
        self._settings = settings
        self._wake = threading.Condition()
        self._pending = 0  # events written since the last checkpoint we made
        self._first_write: float | None = None  # monotonic time of the oldest pending write
        self._closing = False
        self._busy = threading.Lock()  # one catch_up at a time (thread or close)
        self.error: LedgerError | None = None
        self._thread = threading.Thread(target=self._run, name="ledger-anchor", daemon=True)
        self._thread.start()

    def recorded(self, count: int) -> None:
        """Called after each committed save of `count` events."""
        with self._wake:
            self._pending += count
            if self._first_write is None:
                self._first_write = time.monotonic()
            self._wake.notify()

    def _due_in(self) -> float | None:
        """Seconds until a checkpoint is due (0: now), or None: nothing waiting."""
        if not self._pending:
            return None
        events, seconds = self._settings.events, self._settings.seconds
        if events and self._pending >= events:
            return 0.0
        if seconds and self._first_write is not None:
            return max(0.0, self._first_write + seconds - time.monotonic())
        return None  # only a count is set and it is not reached yet

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closing and (due := self._due_in()) != 0.0:
                    self._wake.wait(timeout=due)
                if self._closing:
                    return
                self._pending, self._first_write = 0, None
            if not self._anchor():
                return

    def _anchor(self) -> bool:
        with self._busy:
            if self.error is not None:
                return False
            try:
                self._checkpointer.catch_up(chase=False)
            except LedgerError as exc:
                # A store that fails the checks is not anchored again by this
                # node; `close` raises the error so the operator sees it.
                self.error = exc
                log.error("anchoring stopped: %s", exc)
                return False
            except Exception as exc:  # the store went away for a moment: try again later
                if not self._store_open():
                    return False  # closed under us (without `close`): nothing to anchor to
                log.warning("anchoring failed, will retry: %s", exc)
                self.recorded(0 if self._pending else 1)
            return True

    def close(self) -> None:
        """Stop the thread and anchor whatever is still waiting; raise what failed."""
        with self._wake:
            self._closing = True
            waiting = self._pending
            self._wake.notify()
        self._thread.join()
        if waiting and self.error is None:
            self._anchor()
        if self.error is not None:
            raise self.error
