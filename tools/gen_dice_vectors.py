"""Write ledger/rng/vectors.json: known-answer vectors for the provably fair dice.

Each vector is computed twice, by a from-the-spec loop here (HMAC-SHA256 over
the documented message, reject bytes >= 252, die = b % 6 + 1) and by
`ledger.rng.dice`; the script refuses to write if they differ. Cases with a
rejected byte are found by searching throw counters, and their positions are
recorded so a test can show the rejection really happens.

    .venv/bin/python tools/gen_dice_vectors.py           # (re)write the file
    .venv/bin/python tools/gen_dice_vectors.py --check   # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import sys
from pathlib import Path
from typing import Any

from ledger.rng.dice import throw, throw_trace

OUT = Path(__file__).resolve().parents[1] / "ledger" / "rng" / "vectors.json"
DOMAIN = b"casino-ledger/dice/v1\n"


def spec_throw(seed: bytes, round_id: str, counter: int) -> tuple[list[int], bytes, list[int]]:
    """Dice, bytes read and rejected positions, straight from the written spec."""
    message = DOMAIN + round_id.encode("utf-8") + b"\n" + str(counter).encode("ascii")
    dice: list[int] = []
    read = bytearray()
    rejected: list[int] = []
    block = 0
    while len(dice) < 3:
        digest = hmac.new(seed, message + b"\n" + str(block).encode("ascii"), hashlib.sha256)
        for byte in digest.digest():
            if len(dice) == 3:
                break
            if byte >= 252:
                rejected.append(len(read))
            else:
                dice.append(byte % 6 + 1)
            read.append(byte)
        block += 1
    return dice, bytes(read), rejected


def vector(seed: bytes, round_id: str, counter: int, note: str) -> dict[str, Any]:
    dice, read, rejected = spec_throw(seed, round_id, counter)
    trace = throw_trace(seed, round_id, counter)
    if (
        tuple(dice) != trace.dice
        or tuple(dice) != throw(seed, round_id, counter)
        or read != trace.bytes_read
        or tuple(rejected) != trace.rejected_positions
    ):
        sys.exit(f"ledger.rng.dice disagrees with the spec on {seed.hex()} {round_id!r} {counter}")
    message = DOMAIN + round_id.encode("utf-8") + b"\n" + str(counter).encode("ascii")
    return {
        "note": note,
        "seed": seed.hex(),
        "commitment": hashlib.sha256(seed).hexdigest(),
        "round_id": round_id,
        "throw_counter": counter,
        "block0_message_hex": (message + b"\n0").hex(),
        "bytes_read": read.hex(),
        "rejected_positions": rejected,
        "dice": dice,
    }


def first_counter(seed: bytes, round_id: str, rejections: int, *, first: bool = False) -> int:
    """The smallest counter whose throw rejects exactly `rejections` bytes.

    With `first`, the very first byte read must be one of them.
    """
    for counter in range(1_000_000):
        _, _, rejected = spec_throw(seed, round_id, counter)
        if len(rejected) == rejections and (not first or rejected[0] == 0):
            return counter
    raise SystemExit(f"no counter with {rejections} rejections found")


def build() -> dict[str, Any]:
    zero = bytes(32)
    ramp = bytes(range(32))
    ones = b"\xff" * 32
    named = [hashlib.sha256(f"casino-ledger dice vector {i}".encode()).digest() for i in range(4)]
    vectors = [
        vector(zero, "r-1", 0, "all-zero seed"),
        vector(zero, "r-1", 1, "next throw of the same round"),
        vector(zero, "r-2", 0, "another round, same counter"),
        vector(ramp, "table-7/round-1", 0, "seed 00 01 .. 1f"),
        vector(ones, "round-0001", 0, "seed ff .. ff"),
        vector(named[0], "bàn-3/ván-42", 2, "non-ASCII round id, UTF-8 encoded"),
        vector(named[1], "r", 10**12, "large counter"),
        vector(named[2], "01HZX3K6Y6J8Q4M2W9R5T7V0BC", 7, "ULID-style round id"),
    ]
    for rejections, first, note in (
        (1, False, "one byte rejected (>= 252)"),
        (1, True, "the first byte read is rejected"),
        (2, False, "two bytes rejected"),
    ):
        seed = named[3]
        counter = first_counter(seed, "reject", rejections, first=first)
        vectors.append(vector(seed, "reject", counter, note))
    counter = first_counter(ramp, "reject", 1)
    vectors.append(vector(ramp, "reject", counter, "one byte rejected, another seed"))
    return {
        "description": (
            "Known answers for ledger/rng/dice.py. Block i of a throw's byte stream is "
            "HMAC-SHA256(key=seed, msg=b'casino-ledger/dice/v1\\n' + UTF-8(round_id) + b'\\n' "
            "+ ASCII(throw_counter) + b'\\n' + ASCII(i)); each die takes the next byte b, "
            "rejects b >= 252, else is b % 6 + 1. rejected_positions index bytes_read. "
            "Written by tools/gen_dice_vectors.py."
        ),
        "vectors": vectors,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args()
    data = build()
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is stale: run tools/gen_dice_vectors.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {len(data['vectors'])} vectors to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
