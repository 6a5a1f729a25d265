"""The verifier's hot loops in C, where they were built; None elsewhere.

`ledger/crypto/_native.c` (built by setup.py, optional) runs the verifier's
fast path over rows and the Merkle levels' hashing without a Python step per
row. Where it could not be built (no C compiler or OpenSSL headers), the
same checks run in Python; the tests hold the two to the same results.
"""

from __future__ import annotations

try:  # typed by its stub, _native.pyi: mypy checks every call into it
    from ledger.crypto import _native as native
except ImportError:  # pragma: no cover - a machine that could not build it
    native = None  # type: ignore[assignment]

__all__ = ["native"]
