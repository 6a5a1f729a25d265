"""The server's garbage-collector policy (ledger.http.gc_pauses): survivors of a
full collection are frozen, so the next one walks only what was made since;
they are unfrozen again periodically, so a cycle that became garbage among
them is collected after all. Run in a fresh interpreter: the policy is
process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_survivors_of_a_full_collection_are_frozen_and_unfrozen_later() -> None:
    out = run(
        """
        import gc, time
        from ledger.http import gc_pauses
        gc_pauses.install(unfreeze_seconds=0.2)
        kept = [[n] for n in range(10_000)]
        gc.collect()
        print("frozen", gc.get_freeze_count() >= 10_000)
        deadline = time.monotonic() + 10
        while gc.get_freeze_count() and time.monotonic() < deadline:
            time.sleep(0.05)
        print("unfrozen", gc.get_freeze_count() == 0)
        """
    )
    assert out.split() == ["frozen", "True", "unfrozen", "True"]


def test_a_cycle_that_died_while_frozen_is_collected_after_the_unfreeze() -> None:
    out = run(
        """
        import gc, time, weakref
        from ledger.http import gc_pauses
        gc_pauses.install(unfreeze_seconds=1.0)
        class Node: pass
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        gc.collect()  # the cycle is alive: frozen with the rest
        del a, b
        gc.collect()
        print("kept while frozen", alive() is not None)
        deadline = time.monotonic() + 10
        while gc.get_freeze_count() and time.monotonic() < deadline:
            time.sleep(0.05)
        gc.collect()
        print("collected", alive() is None)
        """
    )
    assert "kept while frozen True" in out
    assert "collected True" in out
