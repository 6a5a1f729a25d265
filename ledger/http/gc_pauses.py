"""Short garbage-collector pauses for a server that holds a big live round.

CPython's full collections walk every object that survived the collections
before: a node holding a round of 100,000 bets paused its one Python thread
for 100 ms and more at each of them, every few seconds under a burst, which
is a bet's p99 latency. Nearly nothing they find is garbage (the bet path
frees by reference counting: 0 or 10 objects a collection, measured), so
after each full collection its survivors are frozen (`gc.freeze`) and the
next one walks only what was made since (pauses of a few ms).

A cycle among frozen objects that later becomes garbage would stay; so the
frozen objects are unfrozen once every `UNFREEZE_SECONDS`, and the next full
collection walks them all again (one long pause in that period, not one
every few seconds)."""

from __future__ import annotations

import gc
import threading
from typing import Any

UNFREEZE_SECONDS = 600.0

_installed = threading.Lock()
_state = {"on": False}


def install(unfreeze_seconds: float = UNFREEZE_SECONDS) -> None:
    """Freeze the survivors of every full collection from now on, in this
    process; unfreeze them every `unfreeze_seconds` (a daemon thread)."""
    with _installed:
        if _state["on"]:
            return
        _state["on"] = True
    gc.callbacks.append(_after_collection)
    threading.Thread(
        target=_unfreeze_every, args=(unfreeze_seconds,), name="ledger-gc", daemon=True
    ).start()


def _after_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info.get("generation") == 2:
        gc.freeze()


def _unfreeze_every(seconds: float) -> None:
    stop = threading.Event()
    while not stop.wait(seconds):
        gc.unfreeze()
