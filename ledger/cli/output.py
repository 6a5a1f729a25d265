"""stdout and stderr that a reader may close early (`ledger simulate | head -1`,
`ledger verify 2>&1 | head -2`).

A closed pipe must not end a command half-way or change its exit code:
`simulate` still verifies what it recorded, `verify`'s exit code still says
whether verification passed (1), could not check (3) or was refused (2), even
when the one error line it ends with has nowhere to go. So the first
BrokenPipeError on either stream points that stream at /dev/null (the Python
docs' recipe, `dup2` over the descriptor) and the command goes on; what is
still buffered when the interpreter exits is flushed there too, where a failed
final flush would have turned the exit code into 120 (or 1).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO


class _PipeSafe:
    """Wraps a text stream; swallows a broken pipe once and for all."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.closed_by_reader = False

    def write(self, text: str) -> int:
        if self.closed_by_reader:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
            return len(text)

    def flush(self) -> None:
        if self.closed_by_reader:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def _silence(self) -> None:
        self.closed_by_reader = True
        silence(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def silence(stream: TextIO) -> None:
    """Point `stream`'s descriptor at /dev/null: what it still holds, and
    anything written to it later, goes nowhere, without an error."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


@contextlib.contextmanager
def tolerate_closed_pipes() -> Iterator[None]:
    """stdout and stderr each pipe-safe while the command runs; both flushed
    at the end, whatever ended it."""
    originals = sys.stdout, sys.stderr
    safe_out, safe_err = _PipeSafe(sys.stdout), _PipeSafe(sys.stderr)
    sys.stdout, sys.stderr = safe_out, safe_err
    try:
        yield
    finally:
        safe_out.flush()
        safe_err.flush()
        sys.stdout, sys.stderr = originals


def flush_before_exit() -> None:
    """Flush stdout and stderr as the interpreter would at exit, silencing a
    stream whose reader is gone, so the exit code stays the command's."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            silence(stream)
        except (OSError, ValueError):
            pass
