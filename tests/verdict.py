"""What a user is told when `ledger verify` fails: the findings report on
stdout (opening `FAILED: N findings`, every step, the first findings) and the
headline, one line, on stderr; the exit code says which kind of failure."""

from __future__ import annotations


def verdict(code: int, out: str, err: str) -> str:
    """The output a test reads: all of it on success or a plain error, the one
    stderr line when a verify run reported findings."""
    if code == 0 or not out.startswith("FAILED: "):
        return out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "finding" in out.splitlines()[0], out
    return err
