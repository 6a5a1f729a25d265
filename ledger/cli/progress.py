"""Progress bars on a terminal, silence elsewhere (logs, pipes, CI)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tqdm import tqdm


@contextmanager
def progress_bar(
    label: str, unit: str = "event"
) -> Iterator[tuple[Callable[[int], None], Callable[[int], None]]]:
    """Yield (advance, set_total) callbacks; a bar only when stderr is a terminal."""
    if not sys.stderr.isatty():
        yield (lambda _n: None), (lambda _n: None)
        return
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
