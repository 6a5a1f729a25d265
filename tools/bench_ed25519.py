"""Ed25519 verify rate, one core: PyNaCl (libsodium) vs pyca/cryptography (OpenSSL).

Both verify the same (message, signature) pairs: envelope-sized messages
(ENVELOPE_DOMAIN + a ~250-byte canonical header) signed by one ledger-node
key, as in a store. PyNaCl is called the way ledger/crypto/signing.py calls
it (`crypto_sign_open(signature + message, public_key)`, the concatenation
included); pyca's key object is loaded once, as a verifier would cache it.
The process is pinned to one core. Ratio = PyNaCl rate / pyca rate.

    .venv/bin/python tools/bench_ed25519.py [--events 20000] [--repeats 5]
"""

from __future__ import annotations

import gc
import hashlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _benchlib as bench

NAME = "bench_ed25519"


def make_pairs(n: int) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger.crypto.canonical import ENVELOPE_DOMAIN, canonical_flat
    from ledger.crypto.keys import Role
    from ledger.crypto.signing import InMemorySigner

    key = Ed25519PrivateKey.generate()
    signer = InMemorySigner(key, Role.LEDGER_NODE)
    public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    pairs = []
    prev = bytes(32)
    for i in range(n):
        header = canonical_flat(
            {
                "key_id": signer.key_id,
                "payload_sha256": hashlib.sha256(i.to_bytes(8, "big")).hexdigest(),
                "prev": prev.hex(),
                "stream": "0b6f3c1e-8a4d-4f5e-9c1a-%012x" % (i // 10),
                "type": "tests.demo_table:Table.DiceThrown",
                "version": i % 10 + 1,
            }
        )
        message = ENVELOPE_DOMAIN + header
        pairs.append((message, signer.sign(message)))
        prev = hashlib.sha256(b"\x00" + header).digest()
    return public, pairs


def rate_nacl(public: bytes, pairs: list[tuple[bytes, bytes]]) -> float:
    from nacl.bindings import crypto_sign_open

    gc.collect()
    started = time.perf_counter()
    for message, signature in pairs:
        crypto_sign_open(signature + message, public)
    return len(pairs) / (time.perf_counter() - started)


def rate_pyca(public: bytes, pairs: list[tuple[bytes, bytes]]) -> float:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    verify = Ed25519PublicKey.from_public_bytes(public).verify
    gc.collect()
    started = time.perf_counter()
    for message, signature in pairs:
        verify(signature, message)
    return len(pairs) / (time.perf_counter() - started)


def main() -> int:
    p = bench.parser(__doc__.splitlines()[0], events=20_000, store="sqlite")
    p.add_argument("--no-pin", action="store_true", help="do not pin to one core")
    args = p.parse_args()
    print(bench.machine_line())
    pinned = None
    if not args.no_pin and hasattr(os, "sched_setaffinity"):
        pinned = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {pinned})
    import cryptography
    import nacl

    print(
        f"Ed25519 verify of {args.events:,} envelope-sized messages, one core"
        f"{f' (pinned to CPU {pinned})' if pinned is not None else ''}; "
        f"PyNaCl {nacl.__version__} (bundled libsodium), "
        f"cryptography {cryptography.__version__}"
        f" ({_openssl_version()}); median of {args.repeats} interleaved runs"
    )
    public, pairs = make_pairs(args.events)
    # Both must accept every pair (and reject a forgery) or the rates mean nothing.
    _check(public, pairs)
    c = bench.Comparison(
        "-", "Ed25519 verify, 1 core", "pyca/cryptography", "PyNaCl", "verifies/s", None
    )
    for run in range(args.repeats):
        bench.note(f"run {run + 1}/{args.repeats}")
        if run % 2 == 0:
            pyca = rate_pyca(public, pairs)
            nacl_rate = rate_nacl(public, pairs)
        else:
            nacl_rate = rate_nacl(public, pairs)
            pyca = rate_pyca(public, pairs)
        c.add(pyca, nacl_rate)
        bench.note(f"  pyca {pyca:,.0f}/s  PyNaCl {nacl_rate:,.0f}/s  {nacl_rate / pyca:.3f}x")
    print()
    print(bench.comparison_table([c]))
    print(
        f"\nPyNaCl / pyca = {c.ratio_median:.2f}x "
        f"({'PyNaCl' if c.ratio_median > 1 else 'pyca/cryptography'} is faster here)"
    )
    path = bench.write_results(
        NAME,
        args,
        [c],
        extra={
            "versions": {
                "pynacl": nacl.__version__,
                "cryptography": cryptography.__version__,
                "openssl": _openssl_version(),
            },
            "pinned_cpu": pinned,
        },
    )
    if path:
        print(f"wrote {path.relative_to(bench.TOOLS.parent)}")
    return 0


def _openssl_version() -> str:
    from cryptography.hazmat.backends.openssl.backend import backend

    return str(backend.openssl_version_text())


def _check(public: bytes, pairs: list[tuple[bytes, bytes]]) -> None:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from nacl.bindings import crypto_sign_open
    from nacl.exceptions import BadSignatureError

    key = Ed25519PublicKey.from_public_bytes(public)
    message, signature = pairs[0]
    crypto_sign_open(signature + message, public)
    key.verify(signature, message)
    forged = message + b" "
    try:
        crypto_sign_open(signature + forged, public)
    except BadSignatureError:
        pass
    else:
        raise SystemExit("PyNaCl accepted a forged message")
    try:
        key.verify(signature, forged)
    except InvalidSignature:
        pass
    else:
        raise SystemExit("pyca accepted a forged message")


if __name__ == "__main__":
    raise SystemExit(main())
