"""stdout that a reader may close early (`ledger simulate | head -1`).

A closed pipe must not end a command half-way: `simulate` still verifies what
it recorded, and `verify`'s exit code still says whether verification passed.
So the first BrokenPipeError points stdout at /dev/null (the Python docs'
recipe, `dup2` over the descriptor, so the interpreter's final flush is quiet
too) and the command goes on.
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
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def tolerate_closed_stdout() -> Iterator[None]:
    original = sys.stdout
    safe = _PipeSafe(original)
    sys.stdout = safe
    try:
        yield
        safe.flush()
    finally:
        sys.stdout = original
