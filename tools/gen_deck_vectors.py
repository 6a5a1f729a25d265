"""Write ledger/rng/deck_vectors.json: known-answer vectors for the shuffled deck.

Each vector is computed twice, by a from-the-spec loop here (HMAC-SHA256
blocks of the documented message, Fisher-Yates from the bottom, reject bytes
>= 256 - 256 % (i + 1)) and by `ledger.rng.deck`; the script refuses to write
if they differ.

    .venv/bin/python tools/gen_deck_vectors.py           # (re)write the file
    .venv/bin/python tools/gen_deck_vectors.py --check   # exit 1 if it is stale
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import sys
from pathlib import Path
from typing import Any

from ledger.rng.deck import shuffle_trace, shuffled_deck

OUT = Path(__file__).resolve().parents[1] / "ledger" / "rng" / "deck_vectors.json"
DOMAIN = b"casino-ledger/deck/v1\n"


def spec_shuffle(seed: bytes, round_id: str) -> tuple[list[int], list[int], int, list[int]]:
    """Deck, draws, bytes read and rejected positions, straight from the written spec."""
    message = DOMAIN + round_id.encode("utf-8")
    stream = bytearray()
    block = 0

    def byte(position: int) -> int:
        nonlocal block
        while position >= len(stream):
            stream.extend(hmac.new(seed, message + b"\n" + str(block).encode(), "sha256").digest())
            block += 1
        return stream[position]

    deck, swaps, rejected, position = list(range(52)), [], [], 0
    for i in range(51, 0, -1):
        n = i + 1
        while True:
            b = byte(position)
            position += 1
            if b < 256 - 256 % n:
                break
            rejected.append(position - 1)
        j = b % n
        swaps.append(j)
        deck[i], deck[j] = deck[j], deck[i]
    return deck, swaps, position, rejected


def vector(seed: bytes, round_id: str, note: str) -> dict[str, Any]:
    deck, swaps, read, rejected = spec_shuffle(seed, round_id)
    trace = shuffle_trace(seed, round_id)
    if (
        tuple(deck) != trace.deck
        or deck != shuffled_deck(seed, round_id)
        or tuple(swaps) != trace.swaps
        or read != trace.bytes_read
        or tuple(rejected) != trace.rejected_positions
    ):
        sys.exit(f"ledger.rng.deck disagrees with the spec on {seed.hex()} {round_id!r}")
    return {
        "note": note,
        "seed": seed.hex(),
        "commitment": hashlib.sha256(seed).hexdigest(),
        "round_id": round_id,
        "block0_message_hex": (DOMAIN + round_id.encode("utf-8") + b"\n0").hex(),
        "swaps": swaps,
        "bytes_read": read,
        "rejected_positions": rejected,
        "deck": deck,
    }


def build() -> dict[str, Any]:
    named = [hashlib.sha256(f"casino-ledger deck vector {i}".encode()).digest() for i in range(4)]
    vectors = [
        vector(bytes(32), "r-1", "all-zero seed"),
        vector(bytes(32), "r-2", "another round, same seed"),
        vector(bytes(range(32)), "table-7/round-1", "seed 00 01 .. 1f"),
        vector(b"\xff" * 32, "round-0001", "seed ff .. ff"),
        vector(named[0], "bàn-3/ván-42", "non-ASCII round id, UTF-8 encoded"),
        vector(named[1], "", "empty round id"),
        vector(named[2], "01HZX3K6Y6J8Q4M2W9R5T7V0BC", "ULID-style round id"),
        vector(named[3], "a\nb", "a round id with a newline"),
    ]
    # The most rejections among a few thousand rounds: the retry is visible.
    most = max((f"retry-{k}" for k in range(3000)), key=lambda r: len(spec_shuffle(named[3], r)[3]))
    vectors.append(vector(named[3], most, "the most rejected bytes in 3000 rounds"))
    return {
        "description": (
            "Known answers for ledger/rng/deck.py. Block i of a round's byte stream is "
            "HMAC-SHA256(key=seed, msg=b'casino-ledger/deck/v1\\n' + UTF-8(round_id) + b'\\n' "
            "+ ASCII(i)). From deck = [0..51], for i = 51 down to 1: take the next byte b, "
            "reject b >= 256 - 256 % (i + 1), else j = b % (i + 1), swap deck[i] and deck[j]. "
            "swaps lists j per i; rejected_positions index the stream; deck[0] is the top "
            "card. Written by tools/gen_deck_vectors.py."
        ),
        "vectors": vectors,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the file is stale")
    args = parser.parse_args()
    data = build()
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is stale: run tools/gen_deck_vectors.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {len(data['vectors'])} vectors to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
