"""Progress: bars on a terminal; off a terminal (a log file, CI), a plain line
on stderr every few seconds, so a long command is never silent for long.

    ledger: playing: 120/300 rounds, 2,950 events, 6 s elapsed

`LEDGER_PROGRESS_INTERVAL` sets the seconds between lines (default 5; `off`
for none).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ledger.errors import ConfigError

INTERVAL_ENV = "LEDGER_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 5.0


def line_interval() -> float | None:
    """Seconds between progress lines off a terminal; None: no lines."""
    value = os.environ.get(INTERVAL_ENV, "").strip()
    if not value:
        return DEFAULT_INTERVAL
    if value.lower() == "off":
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 86_400:
        raise ConfigError(f"{INTERVAL_ENV} is seconds (0..86400) or 'off', not {value!r}")
    return seconds


@contextmanager
def progress_bar(
    label: str, unit: str = "event", detail: Callable[[], str] | None = None
) -> Iterator[tuple[Callable[[int], None], Callable[[int], None]]]:
    """Yield (advance, set_total) callbacks: a bar when stderr is a terminal,
    else a line every `line_interval()` seconds (`detail` adds to the line)."""
    if not sys.stderr.isatty():
        with _progress_lines(label, unit, detail) as callbacks:
            yield callbacks
        return
    from tqdm import tqdm  # only on a terminal: a pipe gets lines

    bar = tqdm(desc=label, unit=unit, unit_scale=True, leave=False, file=sys.stderr)

    def set_total(total: int) -> None:
        bar.total = total
        bar.refresh()

    def advance(count: int) -> None:
        bar.update(count)

    try:
        yield advance, set_total
    finally:
        bar.close()


@contextmanager
def _progress_lines(
    label: str, unit: str, detail: Callable[[], str] | None
) -> Iterator[tuple[Callable[[int], None], Callable[[int], None]]]:
    interval = line_interval()
    started = time.monotonic()
    state = {"done": 0, "total": 0, "next": started + (interval or 0.0)}

    def set_total(total: int) -> None:
        state["total"] = total

    def advance(count: int) -> None:
        state["done"] += count
        now = time.monotonic()
        if interval is None or now < state["next"]:
            return
        state["next"] = now + interval
        done = f"{state['done']:,}" + (f"/{state['total']:,}" if state["total"] else "")
        extra = f", {detail()}" if detail else ""
        print(
            f"ledger: {label}: {done} {unit}s{extra}, {now - started:.0f} s elapsed",
            file=sys.stderr,
            flush=True,
        )

    yield advance, set_total
